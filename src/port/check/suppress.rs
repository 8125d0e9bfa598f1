//! `# tpuport: ignore` comments: a finding on a line that carries one is dropped.

use ruff_text_size::Ranged;

use super::Checker;
use crate::port::diagnostic::Diagnostic;

impl<'a> Checker<'a> {
    /// `# tpuport: ignore` (all rules) or `# tpuport: ignore[DEV001, CUD004]` on the line where
    /// a finding starts silences it.
    pub(super) fn suppressed(&self, d: &Diagnostic) -> bool {
        let start = usize::from(d.range.start());
        let line_start = self.src[..start].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_end = self.src[start..]
            .find('\n')
            .map(|i| i + start)
            .unwrap_or(self.src.len());
        let first = self
            .parsed
            .comments
            .partition_point(|c| usize::from(c.start()) < line_start);
        self.parsed.comments[first..]
            .iter()
            .take_while(|c| usize::from(c.start()) < line_end)
            .any(|c| {
                let text = &self.src[*c];
                let Some(rest) = text.split("tpuport: ignore").nth(1) else {
                    return false;
                };
                match rest.trim_start().strip_prefix('[') {
                    None => true,
                    Some(list) => list
                        .split(']')
                        .next()
                        .unwrap_or("")
                        .split(',')
                        .any(|id| id.trim() == self.rules.rules[d.rule].id),
                }
            })
    }
}
