//! Suppression comments (`# noqa`, `# tpuport: ignore`, `# tpuport: ignore-file[...]`): a
//! finding they name is dropped, with its fix. The comments are read by [`crate::port::noqa`].

use ruff_text_size::Ranged;

use super::Checker;
use crate::port::diagnostic::Diagnostic;
use crate::port::noqa;

impl<'a> Checker<'a> {
    /// A `# noqa`, `# noqa: DEV001`, `# tpuport: noqa: DEV`, `# tpuport: ignore` or
    /// `# tpuport: ignore[DEV001, CUD004]` comment on the line where a finding starts (see
    /// [`noqa::comment_lines`] for continued lines and multi-line strings), or a
    /// `# tpuport: ignore-file[...]` naming its rule, silences it.
    pub(super) fn suppressed(&self, d: &Diagnostic) -> bool {
        let rule = &self.rules.rules[d.rule];
        if self
            .facts
            .ignored_rules
            .iter()
            .any(|c| noqa::code_matches(c, &rule.id, &rule.family))
        {
            return true;
        }
        if self.parsed.comments.is_empty() {
            return false;
        }
        noqa::comment_lines(self.src, d.range)
            .into_iter()
            .any(|(line_start, line_end)| {
                let first = self
                    .parsed
                    .comments
                    .partition_point(|c| usize::from(c.start()) < line_start);
                self.parsed.comments[first..]
                    .iter()
                    .take_while(|c| usize::from(c.start()) < line_end)
                    .any(|c| {
                        noqa::line_codes(&self.src[*c])
                            .is_some_and(|codes| codes.covers(&rule.id, &rule.family))
                    })
            })
    }
}
