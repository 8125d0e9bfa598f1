//! From a match to a diagnostic: the message, the fix its action builds (rename, replace, call
//! rewrite, keyword or statement removal, `with` unwrapping), the note comment it leaves, and
//! the downgrades (comments lost, context, syntax errors nearby).

use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::args::delete_item;
use super::bind::Bound;
use super::{Checker, Match};
use crate::port::diagnostic::Diagnostic;
use crate::port::edit::{self, Edit, Fix};
use crate::port::parse;
use crate::port::rules::{Action, FixClass, Matcher, RemoveKind, Rule};
use crate::port::template::{self, Ctx, Skip};

/// Why a fix that uses an argument twice is unsafe.
pub(super) const TWICE: &str = "an argument would be evaluated twice: check it has no side effects, or bind it to a name first";

impl<'a> Checker<'a> {
    pub(super) fn emit(&mut self, m: Match<'a>) {
        if let Some(d) = self.diagnostic(&m) {
            // A fix that extends a CUDA test to the TPU (`x.is_cuda` → `x.device.type in
            // ("cuda", "tpu")`) goes only where the code the test selects is right on a TPU.
            if d.fix.is_some() && self.v(self.rule(m.rule)).extends {
                let at = self.stack.clone();
                self.remember_extension(&at, m.range, d.range);
            }
            self.diags.push(d);
        }
    }

    pub(super) fn message(&self, rule: &Rule, qualified: Option<&str>, range: TextRange) -> String {
        let matched = self.text(range);
        let matched = if matched.len() > 60 || matched.contains('\n') {
            let first = matched.lines().next().unwrap_or("");
            let cut: String = first.chars().take(57).collect();
            format!("{cut}...")
        } else {
            matched.to_string()
        };
        rule.message
            .replace("{qualified}", qualified.unwrap_or(&matched))
            .replace("{matched}", &matched)
    }

    /// None when the rule's rewrite would change nothing (the code is already right).
    pub(super) fn diagnostic(&self, m: &Match<'a>) -> Option<Diagnostic> {
        let rule = self.rule(m.rule);
        let mut d = Diagnostic {
            rule: m.rule,
            range: m.range,
            message: self.message(rule, m.qualified.as_deref(), m.range),
            fix: None,
            note: None,
        };
        if let Some(action) = &self.v(rule).action {
            match self.build_fix(rule, action, m) {
                Ok(fix) if fix.edits.iter().all(|e| self.text(e.range) == e.content) => {
                    return None;
                }
                Ok(fix) => match self.with_note(rule, action, fix) {
                    Ok(fix) => d.fix = Some(fix),
                    Err(note) => d.note = Some(note),
                },
                Err(note) => d.note = Some(note),
            }
        }
        self.judge_in_context(rule, m, &mut d);
        Some(self.finalize(d))
    }

    /// A fix of the rule's class, or unsafe where `downgrade` (the reason) or the place says
    /// so: it would delete a comment, it is a probe in a `try`, it sits in code about CUDA.
    pub(super) fn make_fix(
        &self,
        rule: &Rule,
        edits: Vec<Edit>,
        imports: Vec<String>,
        downgrade: Option<String>,
    ) -> Fix {
        let v = self.v(rule);
        let mut applicability = v.fix;
        let mut why = (v.fix == FixClass::Unsafe)
            .then(|| v.fix_safety.clone())
            .flatten();
        if applicability > FixClass::Unsafe
            && let Some(reason) = self.unsafe_reason(rule, &edits, downgrade)
        {
            applicability = FixClass::Unsafe;
            why = Some(reason);
        }
        Fix {
            edits,
            applicability,
            imports,
            exclusive: None,
            why_unsafe: why,
        }
    }

    pub(super) fn ctx(&self, site: TextSize) -> Ctx<'_> {
        Ctx {
            sem: self.sem,
            roots: &self.index.roots,
            site,
            prefer: None,
        }
    }

    /// A context that keeps the module alias used by the expression at `at` (`T` in `T.cuda.x`).
    pub(super) fn ctx_at(&self, at: TextRange) -> Ctx<'a> {
        let text = self.text(at);
        let root = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .filter(|r| !r.is_empty());
        Ctx {
            sem: self.sem,
            roots: &self.index.roots,
            site: at.start(),
            prefer: root,
        }
    }

    pub(super) fn build_fix(
        &self,
        rule: &Rule,
        action: &Action,
        m: &Match<'a>,
    ) -> Result<Fix, String> {
        if let Some(fix) = self.duplicate_removal(rule, m) {
            return fix;
        }
        match action {
            Action::Rename(map) => {
                let to = map
                    .get("*")
                    .or_else(|| m.qualified.as_ref().and_then(|q| map.get(q)))
                    .ok_or("no rename target for this name")?;
                let target = match (m.reference, m.call) {
                    (Some(r), _) => r,
                    (None, Some(c)) => c.func.range(),
                    _ => return Err("nothing to rename".into()),
                };
                let (text, import) = template::qualify(to, &self.ctx(target.start()));
                Ok(self.make_fix(
                    rule,
                    vec![Edit::replace(target, text)],
                    import.into_iter().collect(),
                    None,
                ))
            }
            Action::Replace(t) => {
                let target = match rule.matcher {
                    Matcher::Reference { .. } | Matcher::Attribute(_) => {
                        m.reference.unwrap_or(m.range)
                    }
                    _ => m.call.map(|c| c.range()).unwrap_or(m.range),
                };
                let values = self.bind(rule, m)?;
                let r = self.render(t, &values, rule, target)?;
                let text = self.parenthesize(target, r.text);
                let downgrade = values
                    .downgrade
                    .or_else(|| r.duplicated.then(|| TWICE.to_string()));
                Ok(self.make_fix(
                    rule,
                    vec![Edit::replace(target, text)],
                    r.imports,
                    downgrade,
                ))
            }
            Action::Call { to, args } => {
                let call = m.call.ok_or("not a call")?;
                let values = self.bind(rule, m)?;
                let mut edits = vec![];
                let mut imports = vec![];
                match to.as_deref() {
                    Some(method) if method.starts_with('.') => {
                        let Expr::Attribute(a) = call.func.as_ref() else {
                            return Err("not a method call".into());
                        };
                        edits.push(Edit::replace(a.attr.range, &method[1..]));
                    }
                    Some(q) => {
                        let (text, import) = template::qualify(q, &self.ctx_at(call.func.range()));
                        edits.push(Edit::replace(call.func.range(), text));
                        imports.extend(import);
                    }
                    None => {}
                }
                let (arg_edits, arg_imports, dup) =
                    self.rewrite_arguments(rule, call, args, &values)?;
                edits.extend(arg_edits);
                imports.extend(arg_imports);
                let downgrade = values.downgrade.or_else(|| dup.then(|| TWICE.to_string()));
                Ok(self.make_fix(rule, edits, imports, downgrade))
            }
            Action::Remove(RemoveKind::Keyword) => {
                let call = m.call.ok_or("not a call")?;
                let kw = m.keyword.ok_or("no keyword")?;
                let items = self.arg_items(call);
                let idx = items
                    .iter()
                    .position(|r| *r == kw.range())
                    .ok_or("keyword not found")?;
                Ok(self.make_fix(
                    rule,
                    vec![delete_item(&items, idx, call, self.src)],
                    vec![],
                    None,
                ))
            }
            Action::Remove(RemoveKind::Statement) => {
                if !self.v(rule).params.is_empty() {
                    // Arguments can stop the removal (`xm.mark_step(wait=True)`).
                    self.bind(rule, m)?;
                }
                let target = m.reference.or(m.call.map(|c| c.range())).unwrap_or(m.range);
                self.removal_fix(rule, target, 0, false)
            }
            Action::Unwrap => self.unwrap_fix(rule, m),
            Action::Assign(t) => self.assign_fix(rule, t, m),
            Action::String(_) => Err("string rewrites need a string match".into()),
        }
    }

    /// Leave the rule's note as a comment at the statement: above it, or in its place when the
    /// fix removes it (for a note `note_in = "loop"`: inside loops, and wherever the removal
    /// leaves a bare `pass`). The note is skipped where the statement shares its line with other
    /// code.
    pub(super) fn with_note(
        &self,
        rule: &Rule,
        action: &Action,
        mut fix: Fix,
    ) -> Result<Fix, String> {
        let Some(note) = &self.v(rule).note else {
            return Ok(fix);
        };
        let Some(pos) = self.stack.iter().rposition(|n| n.as_stmt_ref().is_some()) else {
            return Ok(fix);
        };
        // Outside loops the note is left only where the removal leaves a bare `pass`: a comment
        // above the block may still describe what the removed statement did.
        let leaves_pass = matches!(action, Action::Remove(RemoveKind::Statement))
            && fix.edits.iter().any(|e| e.content == "pass");
        if note.only_in_loop && !leaves_pass && !in_loop(&self.stack[..pos]) {
            return Ok(fix);
        }
        let mut stmt = self.stack[pos].range();
        // The removal took the `if` around the statement (`if XLA_AVAILABLE: xm.mark_step()`):
        // the note takes the `if`'s place.
        if let Some(AnyNodeRef::StmtIf(i)) = pos.checked_sub(1).map(|p| self.stack[p])
            && fix
                .edits
                .iter()
                .any(|e| e.range.contains_range(i.range()) && e.content.is_empty())
        {
            stmt = i.range();
        }
        let Some(indent) = edit::indent_of(self.src, stmt.start()) else {
            return Ok(fix);
        };
        let comment = format!("# tpuport {}: {}", rule.id, note.text);
        if matches!(action, Action::Remove(RemoveKind::Statement)) {
            let only = fix.edits.iter().any(|e| e.content == "pass");
            let text = if only {
                format!("pass  {comment}")
            } else {
                comment
            };
            fix.edits = vec![Edit::replace(stmt, text)];
        } else {
            let eol = if self.src.contains("\r\n") {
                "\r\n"
            } else {
                "\n"
            };
            let at = stmt.start() - TextSize::of(indent);
            fix.edits
                .push(Edit::insert(at, format!("{indent}{comment}{eol}")));
        }
        Ok(fix)
    }

    pub(super) fn render(
        &self,
        t: &str,
        values: &Bound<'a>,
        rule: &Rule,
        site: TextRange,
    ) -> Result<template::Rendered, String> {
        template::render(t, &values.values, &self.v(rule).convert, &self.ctx_at(site)).map_err(
            |e| match e {
                Skip::Missing => "a required argument is missing".to_string(),
                Skip::Manual(why) => why,
            },
        )
    }

    /// Wrap a replacement in parentheses where the parent binds tighter than it.
    pub(super) fn parenthesize(&self, target: TextRange, text: String) -> String {
        if parse::expr_is_atomic(&text) {
            return text;
        }
        let tight = match self
            .stack
            .iter()
            .rev()
            .find(|n| n.range() != target && n.range().contains_range(target))
        {
            Some(AnyNodeRef::ExprAttribute(_))
            | Some(AnyNodeRef::ExprSubscript(_))
            | Some(AnyNodeRef::ExprBinOp(_))
            | Some(AnyNodeRef::ExprUnaryOp(_))
            | Some(AnyNodeRef::ExprCompare(_))
            | Some(AnyNodeRef::ExprAwait(_))
            | Some(AnyNodeRef::ExprStarred(_)) => true,
            Some(AnyNodeRef::ExprCall(c)) => c.func.range() == target,
            _ => false,
        };
        if tight { format!("({text})") } else { text }
    }
}

/// Is the innermost function (or the module) around these ancestors running a loop here?
fn in_loop(ancestors: &[AnyNodeRef<'_>]) -> bool {
    for n in ancestors.iter().rev() {
        match n {
            AnyNodeRef::StmtFor(_) | AnyNodeRef::StmtWhile(_) => return true,
            AnyNodeRef::StmtFunctionDef(_) | AnyNodeRef::StmtClassDef(_) => return false,
            _ => {}
        }
    }
    false
}
