//! The house rules of the source tree, checked on every test run: no module import circle (Rust
//! or the agent's Python), the runtime, rewriter and profile never reach into the dashboard, no
//! source file above 600 lines, every module opens with a comment saying what it is for, and
//! the launcher's functions stay short.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

const MAX_LINES: usize = 600;
const MAX_LAUNCH_FN_LINES: usize = 80;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            let name = p.file_name().unwrap().to_string_lossy();
            if name != "target" && name != "fixtures" && name != "__pycache__" {
                files_under(&p, ext, out);
            }
        } else if p.extension().is_some_and(|e| e == ext) {
            out.push(p);
        }
    }
}

fn rust_sources() -> Vec<PathBuf> {
    let mut v = vec![];
    files_under(&root().join("src"), "rs", &mut v);
    v.sort();
    v
}

fn python_sources() -> Vec<PathBuf> {
    let mut v = vec![];
    files_under(&root().join("src"), "py", &mut v);
    v.sort();
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// `src/port/check/walk.rs` → `["port", "check", "walk"]`; `mod.rs` names its folder.
fn module_of(file: &Path) -> Vec<String> {
    let r = file.strip_prefix(root().join("src")).unwrap();
    let mut parts: Vec<String> = r.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file before its `#[cfg(test)]` module, without comments.
fn code_of(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap_or("");
    body.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expand a `use` tree (`a::{b, c::D}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    match tree.find('{') {
        None => vec![tree.split(" as ").next().unwrap().trim().to_string()],
        Some(open) => {
            let prefix = &tree[..open];
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut parts = vec![];
            let (mut depth, mut start) = (0, 0);
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&inner[start..i]);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&inner[start..]);
            parts
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .flat_map(expand)
                .map(|p| {
                    if p == "self" {
                        prefix.trim_end_matches("::").to_string()
                    } else {
                        format!("{prefix}{p}")
                    }
                })
                .collect()
        }
    }
}

/// Every `crate::…` / `super::…` path a file names (in `use` items and inline).
fn paths_named(code: &str) -> Vec<String> {
    let use_re = Regex::new(r"(?s)\buse\s+((?:crate|super|self)::[^;]*);").unwrap();
    let inline_re = Regex::new(r"\b(?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+").unwrap();
    let mut out = vec![];
    for c in use_re.captures_iter(code) {
        out.extend(expand(&c[1]));
    }
    for m in inline_re.find_iter(code) {
        out.push(m.as_str().to_string());
    }
    out
}

/// Resolve a path written in module `at` to the module it reaches (the longest existing prefix).
fn resolve(at: &[String], path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let mut segs = path.split("::").map(str::trim);
    let mut cur: Vec<String> = match segs.next()? {
        "crate" => vec![],
        "super" => at[..at.len().saturating_sub(1)].to_vec(),
        "self" => at.to_vec(),
        _ => return None,
    };
    for s in segs {
        if s == "super" {
            cur.pop();
            continue;
        }
        let mut next = cur.clone();
        next.push(s.to_string());
        if modules.contains(&next) {
            cur = next;
        } else {
            break;
        }
    }
    Some(cur)
}

/// Edges between sibling modules: `a::b::x` naming `a::c::y` is an edge b → c under `a`.
fn sibling_edges() -> BTreeMap<(Vec<String>, String), BTreeSet<String>> {
    let files = rust_sources();
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f)).collect();
    let mut edges: BTreeMap<(Vec<String>, String), BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let at = module_of(f);
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for p in paths_named(&code) {
            let Some(to) = resolve(&at, &p, &modules) else {
                continue;
            };
            let common = at.iter().zip(&to).take_while(|(a, b)| a == b).count();
            // A module naming its ancestor or its descendant is the tree, not a circle.
            if common == at.len() || common == to.len() {
                continue;
            }
            edges
                .entry((at[..common].to_vec(), at[common].clone()))
                .or_default()
                .insert(to[common].clone());
        }
    }
    edges
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let i = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[i..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = vec![];
            if let Some(c) = visit(n, graph, &mut state, &mut stack) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_rust_module_import_circle() {
    let mut by_parent: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for ((parent, from), tos) in sibling_edges() {
        by_parent
            .entry(parent)
            .or_default()
            .entry(from)
            .or_default()
            .extend(tos);
    }
    let mut circles = vec![];
    for (parent, graph) in &by_parent {
        if let Some(c) = find_cycle(graph) {
            circles.push(format!(
                "under crate::{}: {}",
                parent.join("::"),
                c.join(" → ")
            ));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn only_the_front_end_reaches_the_dashboard() {
    let mut offenders = vec![];
    for f in rust_sources() {
        let m = module_of(&f);
        if !matches!(
            m.first().map(String::as_str),
            Some("runtime" | "port" | "profile")
        ) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        let modules: BTreeSet<Vec<String>> = rust_sources().iter().map(|f| module_of(f)).collect();
        for p in paths_named(&code) {
            if resolve(&m, &p, &modules).is_some_and(|t| t.first().is_some_and(|s| s == "ui")) {
                offenders.push(format!("{}: {p}", rel(&f)));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "runtime/port/profile must not use the dashboard:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn no_source_file_above_600_lines() {
    let mut all = rust_sources();
    all.extend(python_sources());
    files_under(&root().join("tests"), "rs", &mut all);
    files_under(&root().join("benches"), "rs", &mut all);
    files_under(&root().join("fuzz/src"), "rs", &mut all);
    all.push(root().join("build.rs"));
    let long: Vec<String> = all
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", rel(f)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files above {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn every_module_says_what_it_is_for() {
    let mut missing = vec![];
    let mut rust = rust_sources();
    files_under(&root().join("fuzz/src"), "rs", &mut rust);
    for f in rust {
        let text = std::fs::read_to_string(&f).unwrap();
        if !text.trim_start().starts_with("//!") {
            missing.push(rel(&f));
        }
    }
    for f in python_sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let t = text.trim_start();
        let t = t
            .strip_prefix("#!")
            .map_or(t, |r| r.split_once('\n').map_or("", |x| x.1));
        let t = t.trim_start();
        if !(t.starts_with("\"\"\"") || t.starts_with("'''") || t.starts_with('#')) {
            missing.push(rel(&f));
        }
    }
    assert!(
        missing.is_empty(),
        "modules without an opening purpose comment:\n{}",
        missing.join("\n")
    );
}

#[test]
fn no_python_import_circle_in_the_agent() {
    let files = python_sources();
    let import_re =
        Regex::new(r"(?m)^\s*(?:from\s+(tpuport_agent[\w.]*)\s+import\s+([\w, ()]+)|import\s+(tpuport_agent[\w.]*))")
            .unwrap();
    let module_name = |f: &Path| -> Option<String> {
        let parts: Vec<String> = f.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        let i = parts.iter().position(|p| p == "tpuport_agent")?;
        let mut m: Vec<String> = parts[i..].to_vec();
        let last = m.pop()?;
        let stem = last.trim_end_matches(".py");
        if stem != "__init__" {
            m.push(stem.to_string());
        }
        Some(m.join("."))
    };
    let names: BTreeSet<String> = files.iter().filter_map(|f| module_name(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(me) = module_name(f) else { continue };
        let text = std::fs::read_to_string(f).unwrap();
        for c in import_re.captures_iter(&text) {
            let mut targets = vec![];
            if let Some(m) = c.get(3) {
                targets.push(m.as_str().to_string());
            }
            if let (Some(base), Some(list)) = (c.get(1), c.get(2)) {
                for n in list.as_str().split(',') {
                    let n = n.trim().trim_matches(|c| c == '(' || c == ')').trim();
                    let n = n.split(" as ").next().unwrap_or("").trim();
                    let sub = format!("{}.{n}", base.as_str());
                    targets.push(if names.contains(&sub) {
                        sub
                    } else {
                        base.as_str().to_string()
                    });
                }
            }
            for t in targets {
                // A package's submodule importing the package itself is the tree, not a circle.
                if t != me && names.contains(&t) && !me.starts_with(&format!("{t}.")) {
                    graph.entry(me.clone()).or_default().insert(t);
                }
            }
        }
    }
    assert!(
        find_cycle(&graph).is_none(),
        "the agent's modules import each other in a circle: {}",
        find_cycle(&graph).unwrap().join(" → ")
    );
}

#[test]
fn the_launchers_functions_are_short() {
    let mut files = vec![];
    files_under(&root().join("src/runtime"), "rs", &mut files);
    let fn_re = Regex::new(r"^(\s*)(?:pub(?:\([a-z]+\))?\s+)?(?:unsafe\s+)?fn\s+(\w+)").unwrap();
    let mut long = vec![];
    for f in files.iter().filter(|f| rel(f).contains("launch")) {
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(c) = fn_re.captures(l) else { continue };
            let close = format!("{}}}", &c[1]);
            if l.trim_end().ends_with(';') {
                continue;
            }
            if let Some(end) = lines[i..].iter().position(|x| x.trim_end() == close)
                && end + 1 >= MAX_LAUNCH_FN_LINES
            {
                long.push(format!("{}: fn {} ({} lines)", rel(f), &c[2], end + 1));
            }
        }
    }
    assert!(
        long.is_empty(),
        "launcher functions of {MAX_LAUNCH_FN_LINES} lines or more:\n{}",
        long.join("\n")
    );
}
