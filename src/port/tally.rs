//! The bookkeeping behind `--statistics`: findings followed through the rounds of the fix loop,
//! so that per rule `found + revealed = fixed + left + absorbed` holds by construction.
//!
//! Between two texts (one round of fixes, or the final import and helper changes), a rule's
//! findings that were not fixed either reappear on the new text, or fewer of them do: the
//! missing ones were *absorbed* (another fix removed or rewrote the code they were on); or more
//! do: the extra ones were *revealed* by a fix (a nested call matches once the outer one is
//! rewritten). Findings are counted per rule, not told apart by position or text: a finding
//! whose text a nested fix rewrote stays the same finding.

use std::collections::BTreeMap;

use super::diagnostic::Diagnostic;

/// Revealed and absorbed findings of one file, by rule index.
#[derive(Debug, Default)]
pub struct Tally {
    pub revealed: BTreeMap<usize, usize>,
    pub absorbed: BTreeMap<usize, usize>,
}

impl Tally {
    /// Account for one step: the findings of the old text that were not fixed, then all the
    /// findings of the new text.
    pub fn step<'a>(
        &mut self,
        not_fixed: impl IntoIterator<Item = &'a Diagnostic>,
        found_after: impl IntoIterator<Item = &'a Diagnostic>,
    ) {
        let old = per_rule(not_fixed);
        let new = per_rule(found_after);
        for (rule, n) in &new {
            let o = old.get(rule).copied().unwrap_or(0);
            if *n > o {
                *self.revealed.entry(*rule).or_default() += n - o;
            }
        }
        for (rule, o) in &old {
            let n = new.get(rule).copied().unwrap_or(0);
            if *o > n {
                *self.absorbed.entry(*rule).or_default() += o - n;
            }
        }
    }
}

fn per_rule<'a>(diags: impl IntoIterator<Item = &'a Diagnostic>) -> BTreeMap<usize, usize> {
    let mut m = BTreeMap::new();
    for d in diags {
        *m.entry(d.rule).or_default() += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruff_text_size::{TextRange, TextSize};

    fn d(rule: usize, start: u32, end: u32) -> Diagnostic {
        Diagnostic {
            rule,
            range: TextRange::new(TextSize::from(start), TextSize::from(end)),
            message: String::new(),
            fix: None,
            note: None,
        }
    }

    #[test]
    fn more_findings_are_revealed_fewer_absorbed() {
        let mut t = Tally::default();
        // Rule 0 kept its one finding (moved); rule 1 lost one of two; rule 2 gained one.
        t.step(
            &[d(0, 0, 2), d(1, 3, 5), d(1, 6, 8)],
            &[d(0, 3, 5), d(1, 9, 10), d(2, 0, 1)],
        );
        assert_eq!(t.revealed, BTreeMap::from([(2, 1)]));
        assert_eq!(t.absorbed, BTreeMap::from([(1, 1)]));
    }
}
