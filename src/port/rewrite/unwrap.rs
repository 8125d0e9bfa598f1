//! `with` unwrapping (`unwrap = "with"`): `with torch_xla.step(): body` → `body`, dedented,
//! refused (with the reason) where that could change the code.

use ruff_python_ast::{self as ast, AnyNodeRef};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::{Checker, Match};
use crate::port::edit::{Edit, Fix, indent_of};
use crate::port::rules::Rule;

impl<'a> Checker<'a> {
    /// The fix of an `unwrap` rule: the matched call must be the only context manager of the
    /// `with` statement around it.
    pub(super) fn unwrap_fix(&self, rule: &Rule, m: &Match<'a>) -> Result<Fix, String> {
        let call = m.call.ok_or("not a call")?;
        // The call's parents: the `with` item, then the `with` statement.
        let with = self
            .stack
            .iter()
            .rev()
            .take(2)
            .find_map(|n| match n {
                AnyNodeRef::StmtWith(w) => Some(*w),
                _ => None,
            })
            .filter(|w| {
                w.items
                    .iter()
                    .any(|i| i.context_expr.range() == call.range())
            })
            .ok_or("not the context manager of a `with` statement")?;
        let edit = unwrap_with(self.src, with, call.range())?;
        Ok(self.make_fix(rule, vec![edit], vec![], None))
    }
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

#[cfg(test)]
mod tests {
    use ruff_python_ast::Stmt;

    use super::*;
    use crate::port::edit::apply_edits;
    use crate::port::parse::parse;

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
}
