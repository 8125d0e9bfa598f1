//! The bookkeeping behind `--statistics`: findings followed through the rounds of the fix loop,
//! so that per rule `found + revealed = fixed + left + absorbed` holds by construction.
//!
//! A finding is known across rounds by its rule and the text it covers (positions move as
//! fixes apply). Between two texts, a finding not fixed in the first either reappears in the
//! second or is *absorbed*: another fix removed or rewrote the code it was on. A finding in the
//! second text that was not in the first was *revealed* by a fix (a nested call matches once
//! the outer one is rewritten; an import nothing uses any more after the rewrite).

use std::collections::BTreeMap;

use super::diagnostic::Diagnostic;

/// Revealed and absorbed findings of one file, by rule index.
#[derive(Debug, Default)]
pub struct Tally {
    pub revealed: BTreeMap<usize, usize>,
    pub absorbed: BTreeMap<usize, usize>,
}

impl Tally {
    /// Account for one step from `before` (its findings that were not fixed) to `after` (all
    /// findings on the new text).
    pub fn step<'a>(
        &mut self,
        before: &str,
        not_fixed: impl IntoIterator<Item = &'a Diagnostic>,
        after: &str,
        found_after: impl IntoIterator<Item = &'a Diagnostic>,
    ) {
        let old = keys(before, not_fixed);
        let new = keys(after, found_after);
        for (k, n) in &new {
            let o = old.get(k).copied().unwrap_or(0);
            if *n > o {
                *self.revealed.entry(k.0).or_default() += n - o;
            }
        }
        for (k, o) in &old {
            let n = new.get(k).copied().unwrap_or(0);
            if *o > n {
                *self.absorbed.entry(k.0).or_default() += o - n;
            }
        }
    }
}

fn keys<'t, 'a>(
    text: &'t str,
    diags: impl IntoIterator<Item = &'a Diagnostic>,
) -> BTreeMap<(usize, &'t str), usize> {
    let mut m = BTreeMap::new();
    for d in diags {
        let covered = text
            .get(usize::from(d.range.start())..usize::from(d.range.end()))
            .unwrap_or("");
        *m.entry((d.rule, covered)).or_default() += 1;
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
    fn moved_findings_persist_and_the_rest_is_revealed_or_absorbed() {
        let mut t = Tally::default();
        // "ab cd" → "xx ab ef": `ab` (rule 0) moved, `cd` (rule 1) went, `ef` (rule 1) came.
        t.step(
            "ab cd",
            &[d(0, 0, 2), d(1, 3, 5)],
            "xx ab ef",
            &[d(0, 3, 5), d(1, 6, 8)],
        );
        assert_eq!(t.revealed, BTreeMap::from([(1, 1)]));
        assert_eq!(t.absorbed, BTreeMap::from([(1, 1)]));
    }
}
