//! Structural pieces of fixes that plain templates cannot express, used by rules declared in
//! TOML (mostly the PyTorch/XLA families):
//!
//! - [`FileFacts`]: what the file as given uses (qualified names), so a rule can be unsafe in a
//!   multi-process script that does not wrap its model in DDP (`unsafe_if_uses`/`unless_uses`;
//!   `xm.optimizer_step(opt)` → `opt.step()` drops the gradient averaging there), or apply only
//!   to some files (`only_if_uses`/`not_if_uses`: `xmp.spawn` joins the process group itself
//!   only where the script never calls `init_process_group`);
//! - [`unwrap_with`]: `with torch_xla.step(): body` → `body`, dedented (`unwrap = "with"`);
//! - [`in_loop`], [`indent_of`]: where a rule's `note` comment goes (`note_in = "loop"` leaves
//!   the explanation only where `xm.mark_step()` sat in a training loop);
//! - [`retire_imports`]: imports of retired packages (`torch_xla`) that nothing uses any more
//!   are removed, side-effect imports included (rule XLA001).

use std::collections::HashSet;

use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor};
use ruff_python_ast::{self as ast, AnyNodeRef, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::checker::delete_statement;
use super::edit::{Edit, apply_edits};
use super::parse::{Parsed, child_bodies, parse};
use super::rules::Rule;
use super::semantic::{BindingKind, Semantic};

/// Facts about a file as the user gave it.
#[derive(Debug, Default)]
pub struct FileFacts {
    /// Every qualified name the code reads (`torch.nn.parallel.DistributedDataParallel`,
    /// `torch_xla.distributed.xla_multiprocessing.spawn`).
    pub uses: HashSet<String>,
}

impl FileFacts {
    pub fn of(parsed: &Parsed, sem: &Semantic) -> FileFacts {
        struct Names<'s> {
            sem: &'s Semantic,
            imported: HashSet<&'s str>,
            out: HashSet<String>,
        }
        impl<'a> SourceOrderVisitor<'a> for Names<'_> {
            fn visit_expr(&mut self, e: &'a Expr) {
                // Only chains rooted in an imported name can resolve; the longest chain is enough
                // (a name matches everything under it), so its prefixes are not resolved again.
                let mut root = e;
                while let Expr::Attribute(a) = root {
                    root = &a.value;
                }
                let chain = match (e, root) {
                    (Expr::Attribute(a), Expr::Name(n)) => {
                        (a.ctx == ExprContext::Load).then_some(n)
                    }
                    (Expr::Name(n), _) => (n.ctx == ExprContext::Load).then_some(n),
                    _ => None,
                };
                if let Some(n) = chain {
                    if self.imported.contains(n.id.as_str())
                        && let Some(q) = self.sem.qualified_name(e)
                    {
                        // Record the chain and each prefix (`a.b.c` uses `a.b` and `a`).
                        let mut q = q.as_str();
                        loop {
                            self.out.insert(q.to_string());
                            match q.rfind('.') {
                                Some(i) => q = &q[..i],
                                None => break,
                            }
                        }
                    }
                    return;
                }
                source_order::walk_expr(self, e);
            }
        }
        let mut v = Names {
            sem,
            imported: sem
                .bindings
                .iter()
                .filter(|b| matches!(b.kind, BindingKind::Import { .. }))
                .map(|b| b.name.as_str())
                .collect(),
            out: HashSet::new(),
        };
        for s in &parsed.module.body {
            v.visit_stmt(s);
        }
        FileFacts { uses: v.out }
    }
}

impl FileFacts {
    /// Does the file use one of `names` (a name matches itself and everything under it)?
    pub fn uses_any(&self, names: &[String]) -> bool {
        names.iter().any(|n| {
            self.uses
                .iter()
                .any(|u| u == n || (u.starts_with(n.as_str()) && u[n.len()..].starts_with('.')))
        })
    }
}

/// Is the rule's fix unsafe in this file (it uses one of `unsafe_if_uses`, none of
/// `unless_uses`)?
pub fn unsafe_here(rule: &Rule, facts: &FileFacts) -> bool {
    !rule.unsafe_if_uses.is_empty()
        && facts.uses_any(&rule.unsafe_if_uses)
        && !facts.uses_any(&rule.unless_uses)
}

/// Does the rule apply to this file at all (`only_if_uses`, `not_if_uses`)?
pub fn applies_here(rule: &Rule, facts: &FileFacts) -> bool {
    (rule.only_if_uses.is_empty() || facts.uses_any(&rule.only_if_uses))
        && !facts.uses_any(&rule.not_if_uses)
}

/// Is the innermost function (or the module) around these ancestors running a loop here?
pub fn in_loop(ancestors: &[AnyNodeRef<'_>]) -> bool {
    for n in ancestors.iter().rev() {
        match n {
            AnyNodeRef::StmtFor(_) | AnyNodeRef::StmtWhile(_) => return true,
            AnyNodeRef::StmtFunctionDef(_) | AnyNodeRef::StmtClassDef(_) => return false,
            _ => {}
        }
    }
    false
}

/// The indentation before `at` when only whitespace precedes it on its line.
pub fn indent_of(src: &str, at: TextSize) -> Option<&str> {
    let at = usize::from(at);
    let start = src[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let indent = &src[start..at];
    indent
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(indent)
}

/// The edit that replaces `with CALL: body` by `body`, one level less indented. Refused (with
/// the reason) where that could change the code: other context managers, `as` targets, a body on
/// the `with` line, or multi-line strings in the body.
pub fn unwrap_with(src: &str, with: &ast::StmtWith, call: TextRange) -> Result<Edit, String> {
    if with.items.len() != 1 || with.is_async {
        return Err("the `with` has other context managers: unwrap it by hand".into());
    }
    if with.items[0].optional_vars.is_some() || with.items[0].context_expr.range() != call {
        return Err("the context value is bound with `as`: unwrap the `with` by hand".into());
    }
    let outer =
        indent_of(src, with.start()).ok_or("the `with` shares its line: unwrap it by hand")?;
    let first = with.body.first().ok_or("empty body")?;
    let inner =
        indent_of(src, first.start()).ok_or("the body is on the `with` line: unwrap it by hand")?;
    if inner.len() <= outer.len() || !inner.starts_with(outer) {
        return Err("unusual indentation: unwrap the `with` by hand".into());
    }
    let body_start = first.start() - TextSize::of(inner);
    let body = &src[TextRange::new(body_start, with.end())];
    if body.contains("\"\"\"") || body.contains("'''") || body.contains('\\') {
        return Err(
            "the body holds multi-line strings or continuations: unwrap the `with` by hand".into(),
        );
    }
    let mut out = String::with_capacity(body.len());
    for line in body.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix(inner) {
            out.push_str(outer);
            out.push_str(rest);
        } else if line.trim().is_empty() {
            out.push_str(line.trim_start_matches([' ', '\t']));
        } else {
            return Err(
                "a line of the body is indented less than the body: unwrap the `with` by hand"
                    .into(),
            );
        }
    }
    let with_line = with.start() - TextSize::of(outer);
    Ok(Edit::replace(TextRange::new(with_line, with.end()), out))
}

/// Packages whose imports go once nothing uses them (their import has side effects only for
/// the old runtime).
const RETIRED: &[&str] = &["torch_xla"];

/// Remove every import of a retired package that no code reads; returns the new text and how
/// many import statements were removed or shortened.
pub fn retire_imports(text: &str) -> (String, usize) {
    let parsed = parse(text);
    if parsed.has_errors() {
        return (text.to_string(), 0);
    }
    let sem = Semantic::build(&parsed.module);
    let counts = sem.use_counts();
    let retired = |q: &str| {
        RETIRED
            .iter()
            .any(|r| q == *r || (q.starts_with(r) && q[r.len()..].starts_with('.')))
    };
    let unused: HashSet<TextRange> = sem
        .bindings
        .iter()
        .enumerate()
        .filter(|(i, b)| {
            counts[*i] == 0
                && matches!(&b.kind, BindingKind::Import { qualified } if retired(qualified))
        })
        .map(|(_, b)| b.range)
        .collect();
    // `import torch_xla.x.y` binds `torch_xla`: the statement's module name decides.
    let mut edits = vec![];
    let mut n = 0;
    collect(
        text,
        &parsed.module.body,
        &unused,
        &retired,
        &mut edits,
        &mut n,
    );
    (apply_edits(text, edits.iter().collect()), n)
}

fn collect(
    text: &str,
    body: &[Stmt],
    unused: &HashSet<TextRange>,
    retired: &dyn Fn(&str) -> bool,
    out: &mut Vec<Edit>,
    n: &mut usize,
) {
    let only = body.len() == 1;
    for stmt in body {
        let aliases: Vec<(TextRange, bool)> = match stmt {
            Stmt::Import(i) => i
                .names
                .iter()
                .map(|a| (a.range(), retired(a.name.as_str())))
                .collect(),
            Stmt::ImportFrom(f) => {
                let module = f.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                f.names
                    .iter()
                    .map(|a| (a.range(), f.level == 0 && retired(module)))
                    .collect()
            }
            other => {
                for b in child_bodies(other) {
                    collect(text, b, unused, retired, out, n);
                }
                continue;
            }
        };
        let gone: Vec<bool> = aliases
            .iter()
            .map(|(r, ret)| *ret && unused.iter().any(|u| r.contains_range(*u)))
            .collect();
        if !gone.iter().any(|g| *g) {
            continue;
        }
        *n += 1;
        if gone.iter().all(|g| *g) {
            out.push(delete_statement(text, stmt.range(), only));
            continue;
        }
        // Some names stay: rewrite the name list.
        let keep: Vec<&str> = aliases
            .iter()
            .zip(&gone)
            .filter(|(_, g)| !**g)
            .map(|((r, _), _)| &text[*r])
            .collect();
        let (first, last) = (aliases[0].0, aliases[aliases.len() - 1].0);
        out.push(Edit::replace(
            TextRange::new(first.start(), last.end()),
            keep.join(", "),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unused_torch_xla_imports_go_used_ones_stay() {
        let src = "import torch\nimport torch_xla\nimport torch_xla.distributed.xla_backend\nimport torch_xla.core.xla_model as xm, os\nfrom torch_xla.amp import autocast, syncfree\nx = syncfree\n";
        let (out, n) = retire_imports(src);
        assert_eq!(
            out,
            "import torch\nimport os\nfrom torch_xla.amp import syncfree\nx = syncfree\n"
        );
        assert_eq!(n, 4);
        // Nothing left to do.
        assert_eq!(retire_imports(&out), (out.clone(), 0));
    }

    #[test]
    fn unwrap_dedents_the_body() {
        let src = "for i in r:\n    with torch_xla.step():\n        a = 1\n\n        b = f(\n            a)\n    c = 2\n";
        let parsed = parse(src);
        let Stmt::For(f) = &parsed.module.body[0] else {
            panic!()
        };
        let Stmt::With(w) = &f.body[0] else { panic!() };
        let e = unwrap_with(src, w, w.items[0].context_expr.range()).unwrap();
        let out = apply_edits(src, vec![&e]);
        assert_eq!(
            out,
            "for i in r:\n    a = 1\n\n    b = f(\n        a)\n    c = 2\n"
        );
    }

    #[test]
    fn indentation() {
        assert_eq!(indent_of("a\n    b", TextSize::from(6)), Some("    "));
        assert_eq!(indent_of("a; b", TextSize::from(3)), None);
    }
}
