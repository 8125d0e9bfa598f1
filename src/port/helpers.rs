//! Helper functions (and classes) that fixes call (`_tpuport_rank()`, `_tpuport_device_loader(...)`,
//! `_tpuport_RateTracker()`), declared in the rule files under `[helpers.NAME]`.
//!
//! After the fix loop, [`sync`] makes the file's helpers match its code: a helper that the code
//! (or another helper it keeps) calls but the file does not define is inserted once, after the
//! leading imports (after the helpers already there), in name order; a helper the file defines at
//! top level that nothing calls any more is removed. Only names starting with `_tpuport_` that a
//! rule file declares are ever touched, so the result is the same every time.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::edit::{Edit, apply_edits, delete_statement, line_end};
use super::imports::after_imports;
use super::parse::parse;
use super::rules::Helper;

/// What [`sync`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Synced {
    pub inserted: Vec<String>,
    pub removed: Vec<String>,
}

/// Insert the helpers the code needs and remove those it no longer calls.
pub fn sync(text: &str, helpers: &[Helper]) -> (String, Synced) {
    let mut done = Synced::default();
    if helpers.is_empty() || !text.contains("_tpuport_") {
        return (text.to_string(), done);
    }
    let parsed = parse(text);
    if parsed.has_errors() {
        return (text.to_string(), done);
    }
    let known: HashMap<&str, &Helper> = helpers.iter().map(|h| (h.name.as_str(), h)).collect();
    // Top-level definitions of known helpers.
    let mut defined: BTreeMap<&str, TextRange> = BTreeMap::new();
    for s in &parsed.module.body {
        let name = match s {
            Stmt::FunctionDef(f) => Some(f.name.as_str()),
            Stmt::ClassDef(c) => Some(c.name.as_str()),
            _ => None,
        };
        if let Some(name) = name
            && known.contains_key(name)
        {
            defined.insert(known[name].name.as_str(), s.range());
        }
    }
    // Calls from user code (outside the helpers' own definitions).
    let mut needed: BTreeSet<&str> = BTreeSet::new();
    for s in &parsed.module.body {
        if defined.values().any(|r| *r == s.range()) {
            continue;
        }
        for n in names_in(s) {
            if let Some(h) = known.get(n.as_str()) {
                needed.insert(h.name.as_str());
            }
        }
    }
    // Helpers used by needed helpers.
    loop {
        let mut more = vec![];
        for n in &needed {
            let code_names = names_in_code(&known[n].code);
            for m in code_names {
                if let Some(h) = known.get(m.as_str())
                    && !needed.contains(h.name.as_str())
                {
                    more.push(h.name.as_str());
                }
            }
        }
        if more.is_empty() {
            break;
        }
        needed.extend(more);
    }
    let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let mut edits = vec![];
    let only = parsed.module.body.len() == 1;
    for (name, range) in &defined {
        if !needed.contains(name) {
            edits.push(remove_def(text, *range, only));
            done.removed.push(name.to_string());
        }
    }
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|n| !defined.contains_key(n))
        .collect();
    if !missing.is_empty() {
        let kept_last = parsed
            .module
            .body
            .iter()
            .filter(|s| {
                defined
                    .iter()
                    .any(|(n, r)| *r == s.range() && needed.contains(n))
            })
            .map(|s| s.end())
            .max();
        let at = kept_last.or_else(|| after_imports(&parsed.module.body));
        let mut block: String = missing
            .iter()
            .map(|n| format!("{eol}{eol}{}{eol}", known[n].code.replace('\n', eol)))
            .collect();
        let pos = match at {
            Some(end) => {
                let le = usize::from(line_end(text, end));
                if le >= text.len() {
                    block.insert_str(0, eol);
                    le
                } else {
                    le + 1
                }
            }
            None => {
                block = block.trim_start().to_string();
                0
            }
        };
        // Two blank lines between the helpers and the code after them.
        let rest = &text[pos..];
        if !rest.is_empty() {
            let mut blank = 0;
            let mut r = rest;
            while blank < 2
                && let Some(after) = r.strip_prefix(eol)
            {
                blank += 1;
                r = after;
            }
            for _ in blank..2 {
                block.push_str(eol);
            }
        }
        edits.push(Edit::insert(TextSize::try_from(pos).unwrap(), block));
        done.inserted = missing.iter().map(|s| s.to_string()).collect();
    }
    if edits.is_empty() {
        return (text.to_string(), done);
    }
    (apply_edits(text, edits.iter().collect()), done)
}

/// Delete a helper's definition with the blank lines that separated it.
fn remove_def(text: &str, range: TextRange, only: bool) -> Edit {
    let e = delete_statement(text, range, only);
    if only {
        return e;
    }
    let mut start = usize::from(e.range.start());
    // Blank lines before the definition go with it.
    while start > 0 {
        let prev = text[..start - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
        if !text[prev..start].trim().is_empty() {
            break;
        }
        start = prev;
    }
    Edit::delete(TextRange::new(
        TextSize::try_from(start).unwrap(),
        e.range.end(),
    ))
}

/// Names read in a statement.
fn names_in(stmt: &Stmt) -> Vec<String> {
    struct V(Vec<String>);
    impl<'a> SourceOrderVisitor<'a> for V {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Name(n) = e
                && n.ctx == ExprContext::Load
            {
                self.0.push(n.id.to_string());
            }
            source_order::walk_expr(self, e);
        }
    }
    let mut v = V(vec![]);
    v.visit_stmt(stmt);
    v.0
}

fn names_in_code(code: &str) -> Vec<String> {
    parse(code).module.body.iter().flat_map(names_in).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helpers() -> Vec<Helper> {
        vec![
            Helper {
                name: "_tpuport_rank".into(),
                code: "def _tpuport_rank():\n    return 0".into(),
                imports: vec![],
            },
            Helper {
                name: "_tpuport_z".into(),
                code: "def _tpuport_z():\n    return _tpuport_rank()".into(),
                imports: vec![],
            },
        ]
    }

    #[test]
    fn inserted_once_after_imports_and_removed_when_unused() {
        let src = "\"\"\"Doc.\"\"\"\nimport os\n\n\ndef f():\n    return _tpuport_z()\n";
        let (once, s) = sync(src, &helpers());
        assert_eq!(s.inserted, vec!["_tpuport_rank", "_tpuport_z"]);
        assert_eq!(
            once,
            "\"\"\"Doc.\"\"\"\nimport os\n\n\ndef _tpuport_rank():\n    return 0\n\n\ndef _tpuport_z():\n    return _tpuport_rank()\n\n\ndef f():\n    return _tpuport_z()\n"
        );
        let (twice, s2) = sync(&once, &helpers());
        assert_eq!(twice, once);
        assert_eq!(s2, Synced::default());
        let unused = once.replace("return _tpuport_z()", "return 1");
        let (cleaned, s3) = sync(&unused, &helpers());
        assert_eq!(s3.removed.len(), 2);
        assert_eq!(
            cleaned,
            "\"\"\"Doc.\"\"\"\nimport os\n\n\ndef f():\n    return 1\n"
        );
    }
}
