//! Structure-aware mutations of JSON (notebooks, events lines) and TOML (rule files,
//! `[tool.tpuport]` tables): a node of the parsed document is picked and replaced by a value of
//! another type or an extreme one, deleted, duplicated, moved or given an unknown sibling key;
//! strings are mutated as text. The document is then written back in a random layout.

use serde_json::{Map, Value, json};

use crate::mutate;
use crate::rng::Rng;

/// JSON values that readers should refuse or survive: other types, extremes, deep nesting.
pub fn odd_json(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(1.5),
        5 => json!(1e308),
        6 => json!(-1e308),
        7 => json!(u64::MAX),
        8 => json!(i64::MIN),
        9 => json!(""),
        10 => json!("x".repeat(rng.small(5000))),
        11 => json!("\u{0}\u{1b}[2J\n\r\t\"\\"),
        12 => json!([]),
        13 => json!({}),
        14 => {
            let mut v = json!(1);
            for _ in 0..rng.small(200) {
                v = json!([v]);
            }
            v
        }
        _ => json!({"a": {"b": [1, "2", null, {"c": []}]}}),
    }
}

/// Every node of `v` as a JSON pointer (the root is "").
fn json_paths(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                json_paths(x, format!("{at}/{i}"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                let k = k.replace('~', "~0").replace('/', "~1");
                json_paths(x, format!("{at}/{k}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// Split a pointer into its parent and last segment.
fn parent(ptr: &str) -> Option<(&str, String)> {
    let i = ptr.rfind('/')?;
    Some((
        &ptr[..i],
        ptr[i + 1..].replace("~1", "/").replace("~0", "~"),
    ))
}

/// One structural mutation of `v`. `dict` holds tokens for strings and keys.
pub fn mutate_json(rng: &mut Rng, v: &mut Value, dict: &[&str]) {
    let mut paths = vec![];
    json_paths(v, String::new(), &mut paths);
    let ptr = rng.pick(&paths).clone();
    let op = rng.below(9);
    match op {
        0 | 1 => {
            let odd = odd_json(rng);
            if let Some(n) = v.pointer_mut(&ptr) {
                *n = odd;
            }
        }
        2 => {
            // Delete the node from its parent.
            if let Some((p, last)) = parent(&ptr)
                && let Some(container) = v.pointer_mut(p)
            {
                match container {
                    Value::Object(m) => {
                        m.remove(&last);
                    }
                    Value::Array(a) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        3 => {
            // Duplicate, or swap with a sibling, inside an array.
            if let Some((p, last)) = parent(&ptr)
                && let Some(Value::Array(a)) = v.pointer_mut(p)
                && let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                if rng.one_in(2) {
                    let x = a[i].clone();
                    a.insert(i, x);
                } else {
                    let j = rng.below(a.len());
                    a.swap(i, j);
                }
            }
        }
        4 => {
            // An unknown (or known) key with an odd value.
            let key = if rng.one_in(2) {
                rng.pick(dict).trim_matches('"').to_string()
            } else {
                format!("unknown_{}", rng.below(100))
            };
            let odd = odd_json(rng);
            if let Some(Value::Object(m)) = v.pointer_mut(&ptr) {
                m.insert(key, odd);
            }
        }
        5 | 6 => {
            // A string mutated as text (a cell's source, a message, a type name).
            let tok = rng.pick(dict).to_string();
            if let Some(Value::String(s)) = v.pointer_mut(&ptr) {
                let m = mutate::mutate(rng, s.as_bytes(), &[tok.as_str(), "\n", "\"", "\\"], &[]);
                *s = String::from_utf8_lossy(&m).into_owned();
            }
        }
        7 => {
            // Wrap the node in a list or an object.
            if let Some(n) = v.pointer_mut(&ptr) {
                let inner = n.take();
                *n = if rng.one_in(2) {
                    json!([inner])
                } else {
                    let mut m = Map::new();
                    m.insert("value".into(), inner);
                    Value::Object(m)
                };
            }
        }
        _ => {
            // Numbers at their edges.
            let edge = *rng.pick(&[0.0, -1.0, 1e-300, 1e300, -0.0, 4_294_967_296.0]);
            if let Some(n) = v.pointer_mut(&ptr)
                && n.is_number()
            {
                *n = json!(edge);
            }
        }
    }
}

/// `v` as JSON text in a random layout: minified, one-space (Jupyter's), two-space.
pub fn write_json(rng: &mut Rng, v: &Value) -> Vec<u8> {
    match rng.below(3) {
        0 => serde_json::to_vec(v).unwrap_or_default(),
        1 => {
            let mut out = vec![];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
            let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
            let _ = serde::Serialize::serialize(v, &mut ser);
            out.push(b'\n');
            out
        }
        _ => serde_json::to_vec_pretty(v).unwrap_or_default(),
    }
}

/// TOML values a rule file or configuration should refuse with a clear error.
fn odd_toml(rng: &mut Rng, dict: &[&str]) -> toml::Value {
    use toml::Value as T;
    match rng.below(12) {
        0 => T::Integer(rng.pick(&[0i64, -1, i64::MAX, i64::MIN, 3]).to_owned()),
        1 => T::Float(*rng.pick(&[f64::NAN, f64::INFINITY, -0.0, 1e300])),
        2 => T::Boolean(rng.one_in(2)),
        3 => T::String(String::new()),
        4 => T::String(rng.pick(dict).to_string()),
        5 => T::String(rng.pick(BAD_PATTERNS).to_string()),
        6 => T::Array(vec![]),
        7 => T::Array(vec![T::Integer(1), T::String("x".into())]),
        8 => T::Array(vec![T::String(rng.pick(BAD_PATTERNS).to_string())]),
        9 => T::Table(toml::Table::new()),
        10 => T::String("x".repeat(rng.small(3000))),
        _ => {
            let mut t = toml::Table::new();
            t.insert(
                rng.pick(dict).to_string(),
                T::String(rng.pick(dict).to_string()),
            );
            T::Table(t)
        }
    }
}

/// Regexes, globs and templates that do not compile, or match everything.
pub const BAD_PATTERNS: &[&str] = &[
    "(",
    "[a-",
    "\\",
    "*",
    "**",
    "",
    "(?P<x>",
    "a{99999}",
    "{",
    "}",
    "{missing}",
    "{{",
    ".*",
    "^$",
    "\\p{Nope}",
    "[[",
    "!",
    "/",
    "..",
    "*:*",
    "torch.device:",
    ":0",
    "x:y|z",
    "a|",
    "(?i)CUDA",
    "$1",
    "${name",
    "{receiver}",
    "\u{0}",
];

/// Every node of a TOML table as a list of keys/indices.
fn toml_paths(v: &toml::Value, at: Vec<String>, out: &mut Vec<Vec<String>>) {
    match v {
        toml::Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                let mut p = at.clone();
                p.push(i.to_string());
                toml_paths(x, p, out);
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t {
                let mut p = at.clone();
                p.push(k.clone());
                toml_paths(x, p, out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn toml_at<'a>(v: &'a mut toml::Value, path: &[String]) -> Option<&'a mut toml::Value> {
    let mut cur = v;
    for seg in path {
        cur = match cur {
            toml::Value::Table(t) => t.get_mut(seg)?,
            toml::Value::Array(a) => a.get_mut(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// One structural mutation of a TOML document.
pub fn mutate_toml(rng: &mut Rng, root: &mut toml::Value, dict: &[&str]) {
    let mut paths = vec![];
    toml_paths(root, vec![], &mut paths);
    let path = rng.pick(&paths).clone();
    match rng.below(6) {
        0 | 1 => {
            let odd = odd_toml(rng, dict);
            if !path.is_empty()
                && let Some(n) = toml_at(root, &path)
            {
                *n = odd;
            }
        }
        2 => {
            if let Some((last, p)) = path.split_last()
                && let Some(container) = toml_at(root, p)
            {
                match container {
                    toml::Value::Table(t) => {
                        t.remove(last);
                    }
                    toml::Value::Array(a) => {
                        if let Ok(i) = last.parse::<usize>()
                            && i < a.len()
                        {
                            a.remove(i);
                        }
                    }
                    _ => {}
                }
            }
        }
        3 => {
            let key = if rng.one_in(2) {
                rng.pick(dict).to_string()
            } else {
                format!("unknown-{}", rng.below(100))
            };
            let odd = odd_toml(rng, dict);
            if let Some(toml::Value::Table(t)) = toml_at(root, &path) {
                t.insert(key, odd);
            }
        }
        4 => {
            if let Some((last, p)) = path.split_last()
                && let Some(toml::Value::Array(a)) = toml_at(root, p)
                && let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                let x = a[i].clone();
                a.push(x);
            }
        }
        _ => {
            let tok = rng.pick(dict).to_string();
            if let Some(toml::Value::String(s)) = toml_at(root, &path) {
                let m = mutate::mutate(rng, s.as_bytes(), &[tok.as_str(), "{", "}", "*", "("], &[]);
                *s = String::from_utf8_lossy(&m).into_owned();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_mutations_change_the_document_and_stay_json() {
        let mut rng = Rng::new(5);
        let base = json!({"cells": [{"cell_type": "code", "source": ["x = 1\n"]}], "nbformat": 4});
        let mut changed = 0;
        for _ in 0..300 {
            let mut v = base.clone();
            mutate_json(&mut rng, &mut v, &["source", "cell_type"]);
            changed += usize::from(v != base);
            let text = write_json(&mut rng, &v);
            assert!(serde_json::from_slice::<Value>(&text).is_ok());
        }
        assert!(changed > 150, "{changed}");
    }

    #[test]
    fn toml_mutations_change_the_document() {
        let mut rng = Rng::new(5);
        let base: toml::Value =
            toml::from_str("family = \"TEAM\"\n[[rule]]\nid = \"TEAM001\"\nfix = \"safe\"\n")
                .unwrap();
        let changed = (0..300)
            .filter(|_| {
                let mut v = base.clone();
                mutate_toml(&mut rng, &mut v, &["id", "fix"]);
                v != base
            })
            .count();
        assert!(changed > 100, "{changed}");
    }
}
