//! Removing the statement that holds a match: only where the statement consists of it (an
//! expression statement, a print of it, an assignment that binds no name), `pass` where it
//! was the only statement of its block.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::{Checker, Match};
use crate::port::edit::{self, Edit, Fix, delete_statement};
use crate::port::parse::child_bodies;
use crate::port::rules::{FixClass, Matcher, Rule};

impl<'a> Checker<'a> {
    /// Where the rule has `remove_after` and the statement next to this call's statement (same
    /// block, before or after) calls one of those names with the same arguments, the fix
    /// removes the call instead, as safe: `torch.manual_seed(s)` seeds every device.
    pub(super) fn duplicate_removal(
        &self,
        rule: &Rule,
        m: &Match<'a>,
    ) -> Option<Result<Fix, String>> {
        if rule.remove_after.is_empty() {
            return None;
        }
        let call = m.call?;
        let pos = self.stack.iter().rposition(|n| n.as_stmt_ref().is_some())?;
        let ast::StmtRef::Expr(stmt) = self.stack[pos].as_stmt_ref()? else {
            return None;
        };
        if stmt.value.range() != call.range() {
            return None;
        }
        let block: &[ast::Stmt] = match pos.checked_sub(1) {
            None => &self.parsed.module.body,
            Some(p) => child_bodies(self.stack[p])
                .into_iter()
                .find(|b| b.iter().any(|s| s.range() == stmt.range()))?,
        };
        let i = block.iter().position(|s| s.range() == stmt.range())?;
        let args = |c: &ast::ExprCall| -> Vec<String> {
            let args = c.arguments.args.iter().map(Ranged::range);
            args.chain(c.arguments.keywords.iter().map(Ranged::range))
                .map(|r| self.text(r).split_whitespace().collect())
                .collect()
        };
        let own: &[String] = match &rule.matcher {
            Matcher::Reference { exact, .. } | Matcher::Call(exact) => exact,
            _ => &[],
        };
        // Walk over the same kind of call with the same arguments (`cuda.manual_seed(s)` then
        // `cuda.manual_seed_all(s)`), back or forth, to the call that makes them duplicates.
        let duplicate = |stmts: &mut dyn Iterator<Item = &ast::Stmt>| {
            for s in stmts {
                let ast::Stmt::Expr(e) = s else { return false };
                let Expr::Call(other) = e.value.as_ref() else {
                    return false;
                };
                let Some(q) = self.qualified(&other.func) else {
                    return false;
                };
                if args(other) != args(call) {
                    return false;
                }
                if rule.remove_after.contains(&q) {
                    return true;
                }
                if !own.contains(&q) {
                    return false;
                }
            }
            false
        };
        if !duplicate(&mut block[..i].iter().rev()) && !duplicate(&mut block[i + 1..].iter()) {
            return None;
        }
        let target = m.reference.unwrap_or(call.func.range());
        Some(self.removal_fix(rule, target, 0, false).map(|mut fix| {
            let loses = fix
                .edits
                .first()
                .is_some_and(|e| self.parsed.has_comment_in(e.range));
            if !loses {
                fix.applicability = FixClass::Safe;
            }
            fix
        }))
    }

    /// The fix that deletes the statement holding `target` (the statement must consist of it).
    pub(super) fn removal_fix(
        &self,
        rule: &Rule,
        target: TextRange,
        depth: usize,
        string_match: bool,
    ) -> Result<Fix, String> {
        let (edit, block, removed) = self.remove_statement(target, depth, string_match)?;
        let mut fix = self.make_fix(rule, vec![edit], vec![], None);
        // The comment that described the statement alone goes with it (not a lost comment:
        // it would no longer be true).
        if let Some(c) = edit::leading_comments(self.src, removed) {
            fix.edits.push(Edit::delete(c));
        }
        fix.exclusive = Some(block);
        Ok(fix)
    }

    /// `if is_torch_xla_available(): xm.mark_step()`, the `if` alone in no chain: with the
    /// statement gone it would hold only `pass`, so the whole `if` goes (with the comment above
    /// it), when its test only asks something (a name, an attribute, a call of an `is_*` or
    /// `*_available` function without arguments) and its own block keeps other statements.
    /// Returns the `if` and the block that holds it.
    fn pure_if_around(
        &self,
        parent: Option<AnyNodeRef<'_>>,
        at: usize,
    ) -> Option<(TextRange, TextRange)> {
        let Some(AnyNodeRef::StmtIf(i)) = parent else {
            return None;
        };
        if !i.elif_else_clauses.is_empty() || i.body.len() != 1 {
            return None;
        }
        let asks = |e: &Expr| match e {
            Expr::Name(_) | Expr::Attribute(_) => true,
            Expr::Call(c) if c.arguments.is_empty() => {
                let name = match c.func.as_ref() {
                    Expr::Name(n) => n.id.as_str(),
                    Expr::Attribute(a) => a.attr.as_str(),
                    _ => "",
                };
                name.starts_with("is_") || name.ends_with("_available")
            }
            _ => false,
        };
        let test = match i.test.as_ref() {
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => u.operand.as_ref(),
            t => t,
        };
        // A test that is PyTorch's or PyTorch/XLA's (`xm.is_master_ordinal()`) has findings
        // of its own; only the project's own predicates go with the statement.
        let func = match test {
            Expr::Call(c) => c.func.as_ref(),
            t => t,
        };
        let torch = self.qualified(func).is_some_and(|q| q.starts_with("torch"));
        if !asks(test) || torch {
            return None;
        }
        let outer = at.checked_sub(1).map(|p| self.stack[p])?;
        let is_module = matches!(outer, AnyNodeRef::ModModule(_));
        let siblings = child_bodies(outer)
            .into_iter()
            .find(|b| b.iter().any(|s| s.range() == i.range()))?;
        let block = TextRange::new(siblings.first()?.start(), siblings.last()?.end());
        (is_module || siblings.len() > 1).then_some((i.range(), block))
    }

    /// The edit that deletes the statement holding `target`, the range of its block, and the
    /// statement removed (the `if` around it where [`Self::pure_if_around`] says so).
    pub(super) fn remove_statement(
        &self,
        target: TextRange,
        depth: usize,
        string_match: bool,
    ) -> Result<(Edit, TextRange, TextRange), String> {
        let ancestors = &self.stack[..self.stack.len().saturating_sub(depth)];
        let stmt_pos = ancestors
            .iter()
            .rposition(|n| n.as_stmt_ref().is_some())
            .ok_or("not inside a statement")?;
        let stmt = ancestors[stmt_pos]
            .as_stmt_ref()
            .ok_or("not inside a statement")?;
        let removable = match stmt {
            ast::StmtRef::Expr(e) => match e.value.as_ref() {
                // The statement is the match, or a call of the matched name...
                v if v.range() == target => true,
                Expr::Call(c) if c.func.range() == target => true,
                // ...or a print of the matched value alone: `print(met.metrics_report())`...
                Expr::Call(c)
                    if !string_match
                        && c.arguments.args.len() == 1
                        && c.arguments.args[0].range() == target
                        && self.is_print(c) =>
                {
                    true
                }
                // ...or, for a string (an environment variable's name), a call taking it as a
                // direct argument: `os.environ.setdefault("NCCL_DEBUG", "INFO")`.
                Expr::Call(c) => {
                    string_match && c.arguments.args.iter().any(|a| a.range() == target)
                }
                _ => false,
            },
            // Only single, non-binding targets: `torch.backends.cudnn.benchmark = True`,
            // `os.environ["X"] = "1"` (never a tuple, which may set other things too).
            ast::StmtRef::Assign(a) => {
                a.targets.len() == 1
                    && is_settable(&a.targets[0])
                    && a.targets[0].range().contains_range(target)
            }
            ast::StmtRef::AugAssign(a) => {
                is_settable(&a.target) && a.target.range().contains_range(target)
            }
            ast::StmtRef::AnnAssign(a) => {
                is_settable(&a.target) && a.target.range().contains_range(target)
            }
            ast::StmtRef::Delete(d) => {
                d.targets.len() == 1
                    && is_settable(&d.targets[0])
                    && d.targets[0].range().contains_range(target)
            }
            _ => false,
        };
        if !removable {
            return Err("its value is used here: remove or rewrite this code by hand".into());
        }
        let parent = stmt_pos.checked_sub(1).map(|i| ancestors[i]);
        let block = parent.and_then(|p| {
            child_bodies(p)
                .into_iter()
                .find(|b| b.iter().any(|s| s.range() == stmt.range()))
        });
        // A module may be empty; any other block needs `pass`.
        let is_module = matches!(parent, Some(AnyNodeRef::ModModule(_)));
        let only = !is_module && block.is_some_and(|b| b.len() == 1);
        let key = block
            .and_then(|b| Some(TextRange::new(b.first()?.start(), b.last()?.end())))
            .unwrap_or(stmt.range());
        if only
            && let Some((whole, outer)) = stmt_pos
                .checked_sub(1)
                .and_then(|p| self.pure_if_around(parent, p))
        {
            return Ok((delete_statement(self.src, whole, false), outer, whole));
        }
        Ok((
            delete_statement(self.src, stmt.range(), only),
            key,
            stmt.range(),
        ))
    }
}

/// Functions that only print their arguments: the builtin `print` (not shadowed),
/// `xm.master_print` and the helper that replaces it.
const PRINTERS: &[&str] = &["torch_xla.core.xla_model.master_print"];

impl Checker<'_> {
    fn is_print(&self, c: &ast::ExprCall) -> bool {
        if let Expr::Name(n) = c.func.as_ref()
            && (n.id.as_str() == "_tpuport_master_print"
                || (n.id.as_str() == "print" && self.sem.resolve("print", n.start()).is_none()))
        {
            return true;
        }
        self.qualified(&c.func)
            .is_some_and(|q| PRINTERS.contains(&q.as_str()))
    }
}

/// An assignment target that sets something without binding a name: `a.b`, `a[k]`.
fn is_settable(t: &Expr) -> bool {
    matches!(t, Expr::Attribute(_) | Expr::Subscript(_))
}
