//! Allocator calls that do nothing without CUDA, and raise without an accelerator.
//! `torch.cuda.empty_cache()` and the `torch.cuda` memory statistics (`memory_allocated`,
//! `max_memory_reserved`, `memory_stats`, ...) return quietly (nothing, 0, `{}`) where CUDA was
//! never initialized, a CPU-only PyTorch build included. Their `torch.accelerator` forms ask for
//! the current accelerator first, and on a build with none (the `+cpu` wheels, macOS x86) raise
//! "Cannot access accelerator device when none is available". A script with a CPU fallback that
//! empties the cache unconditionally would crash there after the port (found by set E's review).
//!
//! So under the portable port, such a call outside code that runs only with an accelerator
//! (inside a test that asks `is_available()`, `is_cuda` or a device's type) keeps doing nothing
//! without one:
//! - a call that is its own statement, alone on its line, becomes
//!   `if torch.accelerator.is_available():` and the call under it;
//! - in an expression the call becomes
//!   `(torch.accelerator.memory_allocated() if torch.accelerator.is_available() else 0)`
//!   (`{}` for `memory_stats`, None for `empty_cache`: what the CUDA call answered there).

use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use crate::port::diagnostic::Diagnostic;
use crate::port::edit::{Edit, indent_of};
use crate::port::rewrite::{Checker, Match};
use crate::port::rules::{FixClass, Rule};
use crate::port::template;

/// The rules of calls that are no-ops without CUDA, with what they answer there.
const QUIET: [(&str, &str); 8] = [
    ("cuda-empty-cache", "None"),
    ("cuda-memory-allocated", "0"),
    ("cuda-max-memory-allocated", "0"),
    ("cuda-memory-reserved", "0"),
    ("cuda-max-memory-reserved", "0"),
    ("cuda-memory-cached", "0"),
    ("cuda-max-memory-cached", "0"),
    ("cuda-memory-stats", "{}"),
];

impl<'a> Checker<'a> {
    /// Keep a quiet allocator call quiet without an accelerator (see the module doc).
    pub(in crate::port::rewrite) fn keep_quiet_without_accelerator(
        &self,
        rule: &Rule,
        m: &Match<'a>,
        d: &mut Diagnostic,
    ) {
        let Some((_, answer)) = QUIET.iter().find(|(name, _)| *name == rule.name) else {
            return;
        };
        let Some(fix) = d.fix.as_mut() else { return };
        if fix.applicability != FixClass::Safe || self.runs_with_accelerator(m.range) {
            return;
        }
        // The call: the match itself, or (a reference match) its parent.
        let call = m
            .call
            .map(|c| c.range())
            .or_else(|| match self.stack.last() {
                Some(AnyNodeRef::ExprCall(c)) if c.func.range() == m.range => Some(c.range()),
                _ => None,
            });
        let Some(call) = call else { return };
        let (avail, import) = template::qualify(
            "torch.accelerator.is_available",
            &self.ctx_at(TextRange::empty(call.start())),
        );
        let statement = self.statement_of_call(call);
        if !fix.edits.iter().all(|e| call.contains_range(e.range)) {
            return;
        }
        let replacement = match statement {
            Some(s) if self.alone_on_its_lines(s) && indent_of(self.src, s.start()).is_some() => {
                let indent = indent_of(self.src, s.start()).unwrap_or_default();
                let body = self.edited_text(s, &fix.edits);
                Edit::replace(s, format!("if {avail}():\n{indent}    {body}"))
            }
            _ => {
                let body = self.edited_text(call, &fix.edits);
                // No parentheses where the value stands alone: an argument, an assigned or
                // returned value.
                let parent = self.stack.iter().rev().find(|n| n.range() != call);
                let alone = match parent {
                    Some(AnyNodeRef::Arguments(_) | AnyNodeRef::Keyword(_)) => true,
                    Some(AnyNodeRef::StmtAssign(a)) => a.value.range() == call,
                    Some(AnyNodeRef::StmtReturn(r)) => {
                        r.value.as_ref().is_some_and(|v| v.range() == call)
                    }
                    _ => false,
                };
                let form = format!("{body} if {avail}() else {answer}");
                Edit::replace(call, if alone { form } else { format!("({form})") })
            }
        };
        fix.edits = vec![replacement];
        fix.imports.extend(import);
    }

    /// The statement that is the call at `call` and nothing else (`torch.cuda.empty_cache()`
    /// on its own), if the call is one.
    pub(super) fn statement_of_call(&self, call: TextRange) -> Option<TextRange> {
        match self.stack.iter().rev().find_map(|n| n.as_stmt_ref()) {
            Some(ruff_python_ast::StmtRef::Expr(s)) if s.value.range() == call => Some(s.range()),
            _ => None,
        }
    }

    /// Is `r` alone on its lines: nothing before it on its first line, at most a comment after
    /// it on its last? (Then it can be put under an `if` of its own.)
    pub(super) fn alone_on_its_lines(&self, r: TextRange) -> bool {
        let line_start = self.src[..r.start().to_usize()]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let before = &self.src[line_start..r.start().to_usize()];
        let after = self.src[r.end().to_usize()..].lines().next().unwrap_or("");
        before.trim().is_empty() && (after.trim().is_empty() || after.trim_start().starts_with('#'))
    }

    /// The text of `range` once `edits` (all inside it) are made.
    pub(super) fn edited_text(&self, range: TextRange, edits: &[Edit]) -> String {
        let mut text = self.text(range).to_string();
        let mut sorted: Vec<&Edit> = edits.iter().collect();
        sorted.sort_by_key(|e| std::cmp::Reverse(e.range.start()));
        for e in sorted {
            let start = (e.range.start() - range.start()).to_usize();
            let end = (e.range.end() - range.start()).to_usize();
            text.replace_range(start..end, &e.content);
        }
        text
    }

    /// Is the finding at `at` reached only where an accelerator (or CUDA) is there: in the
    /// branch that a test asking `is_available()`, `is_cuda`, a device count or a device's type
    /// (`device.type == "cuda"`) takes when it holds (not under `not`)?
    fn runs_with_accelerator(&self, at: TextRange) -> bool {
        let asks = |test: &Expr| {
            let t = self.text(test.range());
            !matches!(test, Expr::UnaryOp(u) if u.op == ruff_python_ast::UnaryOp::Not)
                && [
                    "is_available",
                    "is_cuda",
                    "device_count",
                    "\"cuda",
                    "'cuda",
                    ".type",
                ]
                .iter()
                .any(|w| t.contains(w))
        };
        let within = |body: &[ruff_python_ast::Stmt]| {
            body.first()
                .zip(body.last())
                .is_some_and(|(a, b)| a.start() <= at.start() && at.end() <= b.end())
        };
        self.stack.iter().rev().any(|n| match n {
            AnyNodeRef::StmtIf(i) => {
                (within(&i.body) && asks(&i.test))
                    || i.elif_else_clauses
                        .iter()
                        .any(|c| within(&c.body) && c.test.as_ref().is_some_and(&asks))
            }
            AnyNodeRef::ExprIf(e) => e.body.range().contains_range(at) && asks(&e.test),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::migrate;

    #[test]
    fn quiet_allocator_calls_stay_quiet_without_an_accelerator() {
        let src = "import torch\n\n\ndef step(x):\n    torch.cuda.empty_cache()\n    used = torch.cuda.memory_allocated() / 2**20\n    print(torch.cuda.memory_stats())\n    if torch.cuda.is_available():\n        torch.cuda.empty_cache()\n    return x\n";
        let mut out = String::new();
        for id in ["MEM001", "MEM002", "MEM008"] {
            let o = migrate(id, src, None).output.unwrap_or_default();
            out.push_str(&o);
        }
        assert!(
            out.contains(
                "    if torch.accelerator.is_available():\n        torch.accelerator.empty_cache()\n    used"
            ),
            "{out}"
        );
        assert!(
            out.contains("used = (torch.accelerator.memory_allocated() if torch.accelerator.is_available() else 0) / 2**20"),
            "{out}"
        );
        assert!(
            out.contains("print(torch.accelerator.memory_stats() if torch.accelerator.is_available() else {})"),
            "{out}"
        );
        // Under an availability test the call keeps its short form.
        assert!(
            out.contains(
                "    if torch.cuda.is_available():\n        torch.accelerator.empty_cache()\n"
            ),
            "{out}"
        );
    }
}
