//! Fix templates: `torch.accelerator.synchronize({device})` turned into source text.
//!
//! `{param}` is replaced by the source text of the argument bound to that parameter (or by its
//! per-literal or per-kind conversion, see `[rule.action.convert]`); `{receiver}` is the object
//! a method is called on; `{value}` is a literal's value. Dotted names in the template whose
//! root is a module the rules know (`torch`, `os`, ...) are written with the file's own aliases:
//! `torch.distributed.barrier` becomes `dist.barrier` after `import torch.distributed as dist`,
//! `torch.x` becomes `T.x` after `import torch as T`; where no import fits, the name is written
//! in full and the fix asks for `import torch` to be added.

use std::collections::{HashMap, HashSet};

use ruff_text_size::TextSize;

use super::rules::{ArgKind, ConvertDef};
use super::semantic::{BindingKind, Semantic};

/// An argument (or receiver) as the template sees it.
#[derive(Debug, Clone)]
pub struct Value<'s> {
    pub text: &'s str,
    pub kind: ArgKind,
    /// The literal's value for ints and strings; the qualified name of a PyTorch constant
    /// (`torch.float16`).
    pub literal: Option<String>,
    /// True if the text can be followed by `.x`, `[i]` or `(...)` without parentheses.
    pub atomic: bool,
}

pub struct Ctx<'a> {
    pub sem: &'a Semantic,
    pub roots: &'a HashSet<String>,
    /// Where the rendered text will be placed (for alias visibility).
    pub site: TextSize,
    /// The name the code at the site already uses for the module (`T` in `T.cuda.x()`): kept
    /// when it fits, so a rewrite does not switch spellings or orphan an import.
    pub prefer: Option<&'a str>,
}

pub struct Rendered {
    pub text: String,
    pub imports: Vec<String>,
    /// A non-trivial argument was used twice (it would be evaluated twice).
    pub duplicated: bool,
}

/// Why a template could not be rendered.
#[derive(Debug)]
pub enum Skip {
    /// An item that needs a missing argument: drop it.
    Missing,
    /// No fix for this argument kind.
    Manual(String),
}

pub fn render(
    template: &str,
    values: &HashMap<String, Value<'_>>,
    convert: &std::collections::BTreeMap<String, ConvertDef>,
    ctx: &Ctx<'_>,
) -> Result<Rendered, Skip> {
    let mut out = Rendered {
        text: String::new(),
        imports: vec![],
        duplicated: false,
    };
    let mut used: HashMap<String, usize> = HashMap::new();
    let b = template.as_bytes();
    let mut i = 0;
    let mut lit_start = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => {
                push_literal(&mut out, &template[lit_start..i], ctx);
                out.text.push('{');
                i += 2;
                lit_start = i;
            }
            b'}' if b.get(i + 1) == Some(&b'}') => {
                push_literal(&mut out, &template[lit_start..i], ctx);
                out.text.push('}');
                i += 2;
                lit_start = i;
            }
            b'{' => {
                push_literal(&mut out, &template[lit_start..i], ctx);
                let end = template[i..].find('}').map(|e| e + i).unwrap_or(b.len());
                let name = &template[i + 1..end.min(b.len())];
                let follows = template.get(end + 1..).unwrap_or("");
                let text = substitute(name, values, convert, ctx, follows)?;
                *used.entry(name.to_string()).or_default() += 1;
                out.text.push_str(&text.text);
                out.imports.extend(text.imports);
                out.duplicated |= text.duplicated;
                i = end + 1;
                lit_start = i;
            }
            _ => i += 1,
        }
    }
    push_literal(&mut out, &template[lit_start..], ctx);
    for (name, n) in used {
        if n > 1
            && let Some(v) = values.get(&name)
            && !is_simple_name(v.text)
            && v.kind == ArgKind::Other
        {
            out.duplicated = true;
        }
    }
    out.imports.sort();
    out.imports.dedup();
    Ok(out)
}

fn substitute(
    name: &str,
    values: &HashMap<String, Value<'_>>,
    convert: &std::collections::BTreeMap<String, ConvertDef>,
    ctx: &Ctx<'_>,
    follows: &str,
) -> Result<Rendered, Skip> {
    let value = values.get(name);
    let kind = value.map(|v| v.kind).unwrap_or(ArgKind::Missing);
    if let Some(conv) = convert.get(name) {
        let by_literal = value
            .and_then(|v| v.literal.as_ref())
            .and_then(|l| conv.literal.get(l));
        if let Some(t) = by_literal {
            return render_owned(t, &HashMap::new(), ctx);
        }
        if kind.listed_in(&conv.manual_for) && !has_explicit(conv, kind) {
            return Err(Skip::Manual(format!(
                "`{}` is {}: no mechanical rewrite",
                value.map(|v| v.text).unwrap_or(name),
                kind_name(kind)
            )));
        }
        if let Some(t) = conv.template(kind) {
            // Inside a conversion `{name}` means the argument as written, `{value}` its value.
            let mut inner: HashMap<String, Value<'_>> = HashMap::new();
            if let Some(v) = value {
                inner.insert(name.to_string(), v.clone());
                if let Some(l) = &v.literal {
                    inner.insert(
                        "value".to_string(),
                        Value {
                            text: l.as_str(),
                            kind: v.kind,
                            literal: None,
                            atomic: true,
                        },
                    );
                }
            }
            return render_owned(t, &inner, ctx);
        }
    }
    match value {
        None => Err(Skip::Missing),
        Some(v) => {
            // A value that is not atomic is parenthesized where what follows binds tighter
            // (`{x}.y`, `{x} % n`, `{x} and y`).
            let binds = [
                " and ", " or ", " % ", " * ", " if ", " in ", " == ", " != ",
            ];
            let wrap = !v.atomic
                && (matches!(follows.chars().next(), Some('.' | '[' | '('))
                    || binds.iter().any(|b| follows.starts_with(b)));
            Ok(Rendered {
                text: if wrap {
                    format!("({})", v.text)
                } else {
                    v.text.to_string()
                },
                imports: vec![],
                duplicated: false,
            })
        }
    }
}

/// A literal with its own template (`literal = { ieee = ... }`) is not covered by its kind's
/// `unsafe`/`manual` lists.
pub fn has_literal(conv: &ConvertDef, value: Option<&Value<'_>>) -> bool {
    value
        .and_then(|v| v.literal.as_ref())
        .is_some_and(|l| conv.literal.contains_key(l))
}

/// A boolean argument with its own `true`/`false` template is not covered by `other`.
pub fn has_explicit(conv: &ConvertDef, kind: ArgKind) -> bool {
    match kind {
        ArgKind::True => conv.true_.is_some(),
        ArgKind::False => conv.false_.is_some(),
        _ => false,
    }
}

fn render_owned(
    t: &str,
    values: &HashMap<String, Value<'_>>,
    ctx: &Ctx<'_>,
) -> Result<Rendered, Skip> {
    render(t, values, &Default::default(), ctx)
}

pub fn kind_name(kind: ArgKind) -> &'static str {
    match kind {
        ArgKind::Missing => "not given",
        ArgKind::None => "None",
        ArgKind::Int => "an integer literal",
        ArgKind::String => "a string literal",
        ArgKind::True => "True",
        ArgKind::False => "False",
        ArgKind::Other => "an expression whose value is not known statically",
    }
}

fn is_simple_name(t: &str) -> bool {
    !t.is_empty()
        && t.split('.')
            .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
}

/// Copy template text, writing qualified names with the file's aliases and skipping strings.
fn push_literal(out: &mut Rendered, lit: &str, ctx: &Ctx<'_>) {
    let b = lit.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'"' || c == b'\'' {
            let end = lit[i + 1..]
                .find(c as char)
                .map(|e| e + i + 2)
                .unwrap_or(b.len());
            out.text.push_str(&lit[i..end]);
            i = end;
            continue;
        }
        let starts_chain = (c.is_ascii_alphabetic() || c == b'_')
            && (i == 0
                || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.'));
        if starts_chain {
            let mut j = i;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_' || b[j] == b'.') {
                j += 1;
            }
            let chain = lit[i..j].trim_end_matches('.');
            let root = chain.split('.').next().unwrap_or("");
            if chain.contains('.') && ctx.roots.contains(root) {
                let (text, import) = qualify(chain, ctx);
                out.text.push_str(&text);
                out.imports.extend(import);
                out.text.push_str(&lit[i + chain.len()..j]);
            } else {
                out.text.push_str(&lit[i..j]);
            }
            i = j;
            continue;
        }
        let ch = lit[i..].chars().next().unwrap_or(' ');
        out.text.push(ch);
        i += ch.len_utf8();
    }
}

/// Write `qualified` using an import visible at the site; else in full, asking for an import.
pub fn qualify(qualified: &str, ctx: &Ctx<'_>) -> (String, Option<String>) {
    let mut candidates: Vec<(&str, &str)> = ctx
        .sem
        .module_imports()
        .filter(|(_, q)| qualified == *q || qualified.starts_with(&format!("{q}.")))
        .collect();
    candidates.sort_by(|a, b| {
        let pa = Some(a.0) == ctx.prefer;
        let pb = Some(b.0) == ctx.prefer;
        pb.cmp(&pa)
            .then_with(|| b.1.len().cmp(&a.1.len()))
            .then_with(|| (a.0 != a.1).cmp(&(b.0 != b.1)))
            .then_with(|| a.0.cmp(b.0))
    });
    for (name, q) in candidates {
        let visible = matches!(
            ctx.sem.bound_at(name, ctx.site).map(|b| &b.kind),
            Some(BindingKind::Import { qualified }) if qualified == q
        );
        if visible {
            return (format!("{name}{}", &qualified[q.len()..]), None);
        }
    }
    if !qualified.contains('.') {
        // A bare name (a builtin, or a helper the fix inserts) needs no import.
        return (qualified.to_string(), None);
    }
    let root = qualified.split('.').next().unwrap_or(qualified);
    let root_ok = matches!(
        ctx.sem.bound_at(root, ctx.site).map(|b| &b.kind),
        Some(BindingKind::Import { qualified }) if qualified == root
    );
    if root_ok {
        (qualified.to_string(), None)
    } else {
        (qualified.to_string(), Some(root.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::parse::parse;

    fn render_in(
        src: &str,
        template: &str,
        values: &[(&str, &str, ArgKind)],
    ) -> (String, Vec<String>) {
        let parsed = parse(src);
        let sem = Semantic::build(&parsed.module);
        let roots: HashSet<String> = ["torch".to_string(), "os".to_string()].into();
        let ctx = Ctx {
            sem: &sem,
            roots: &roots,
            site: TextSize::try_from(src.len()).unwrap(),
            prefer: None,
        };
        let vals = values
            .iter()
            .map(|(n, t, k)| {
                (
                    n.to_string(),
                    Value {
                        text: t,
                        kind: *k,
                        literal: (*k == ArgKind::Int).then(|| t.to_string()),
                        atomic: is_simple_name(t),
                    },
                )
            })
            .collect();
        match render(template, &vals, &Default::default(), &ctx) {
            Ok(r) => (r.text, r.imports),
            Err(e) => panic!("{e:?}"),
        }
    }

    #[test]
    fn uses_the_files_aliases() {
        let (t, imp) = render_in(
            "import torch as T\n",
            "torch.accelerator.synchronize({d})",
            &[("d", "dev", ArgKind::Other)],
        );
        assert_eq!(t, "T.accelerator.synchronize(dev)");
        assert!(imp.is_empty());
        let (t, _) = render_in(
            "import torch\nimport torch.distributed as dist\n",
            "torch.distributed.is_backend_available(\"tpu_dist\")",
            &[],
        );
        assert_eq!(t, "dist.is_backend_available(\"tpu_dist\")");
    }

    #[test]
    fn asks_for_an_import_when_none_fits() {
        let (t, imp) = render_in(
            "from torch import cuda\n",
            "torch.accelerator.is_available",
            &[],
        );
        assert_eq!(t, "torch.accelerator.is_available");
        assert_eq!(imp, vec!["torch"]);
    }

    #[test]
    fn strings_and_braces_are_literal() {
        let (t, _) = render_in(
            "import torch\n",
            "{x}.to(\"torch.x\") + {{1}}",
            &[("x", "a + b", ArgKind::Other)],
        );
        assert_eq!(t, "(a + b).to(\"torch.x\") + {1}");
    }
}
