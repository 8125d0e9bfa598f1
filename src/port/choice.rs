//! A person's choice among a file's fixes (`tpuport migrate -i`), and following it through the
//! fix loop: the loop applies only the fixes of accepted findings, and a finding of a later
//! round is told apart from one the person skipped by mapping positions through the edits of
//! each round.
//!
//! A finding of a later round continues a finding of the round before when it has the same
//! rule and sits where that one's range went (or inside the code an applied edit rewrote around
//! it, for a nested finding): it takes over that one's origin and decision. A finding that
//! continues none was revealed by the accepted fixes (only they changed the text), and one that
//! continues a finding with no fix on offer got its fix from them: both follow those fixes and
//! are applied. With every finding accepted the loop runs as `--write`'s (the tests compare).

use std::collections::{BTreeMap, BTreeSet};

use ruff_text_size::{TextRange, TextSize};

use super::diagnostic::Diagnostic;
use super::edit::{Edit, Fix};
use super::rules::FixClass;

/// What a person chose for a file's findings (indices into `Outcome::diagnostics`).
#[derive(Debug, Clone, Default)]
pub struct Choices {
    pub accepted: BTreeSet<usize>,
    /// Fixes the person edited: the replacement for the original fix.
    pub replaced: BTreeMap<usize, Fix>,
}

impl Choices {
    /// Every finding in `0..n` accepted.
    pub fn all(n: usize) -> Choices {
        Choices {
            accepted: (0..n).collect(),
            replaced: BTreeMap::new(),
        }
    }
}

/// One layer of replacements on a text: `(old range, new length)`, sorted, not overlapping.
type Layer = Vec<(TextRange, TextSize)>;

/// How offsets of a text move when edits, then other changes, turn it into the next one.
#[derive(Debug, Default)]
pub struct Shift {
    layers: Vec<Layer>,
}

impl Shift {
    /// The edits applied by [`apply_edits`](super::edit::apply_edits).
    pub fn edits<'a>(edits: impl IntoIterator<Item = &'a Edit>) -> Shift {
        let mut layer: Layer = edits
            .into_iter()
            .map(|e| (e.range, TextSize::of(e.content.as_str())))
            .collect();
        layer.sort_by_key(|(r, _)| (r.start(), r.end()));
        Shift {
            layers: vec![layer],
        }
    }

    /// Then `old` became `new` by some change (import upkeep): the part between their common
    /// prefix and suffix counts as rewritten.
    pub fn then_text(&mut self, old: &str, new: &str) {
        if old == new {
            return;
        }
        let (a, b) = (old.as_bytes(), new.as_bytes());
        let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let max_suffix = a.len().min(b.len()) - prefix;
        let suffix = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take(max_suffix)
            .take_while(|(x, y)| x == y)
            .count();
        let at = |n: usize| TextSize::try_from(n).unwrap_or_default();
        let range = TextRange::new(at(prefix), at(a.len() - suffix));
        self.layers
            .push(vec![(range, at(b.len() - suffix - prefix))]);
    }

    /// Where `range` went, if none of its ends was rewritten.
    pub fn exact(&self, range: TextRange) -> Option<TextRange> {
        let mut r = range;
        for layer in &self.layers {
            let (s, s_ok) = map(layer, r.start(), true);
            let (e, e_ok) = map(layer, r.end(), false);
            if !(s_ok && e_ok) || e < s {
                return None;
            }
            r = TextRange::new(s, e);
        }
        Some(r)
    }

    /// The smallest range of the new text that holds what became of `range`.
    pub fn region(&self, range: TextRange) -> TextRange {
        let mut r = range;
        for layer in &self.layers {
            let s = map(layer, r.start(), true).0;
            let e = map(layer, r.end(), false).0.max(s);
            r = TextRange::new(s, e);
        }
        r
    }
}

/// Map one offset through a layer: the new offset and whether it was outside every rewritten
/// part (inside one it goes to the part's start for a range's start, its end for a range's end).
fn map(layer: &Layer, p: TextSize, start: bool) -> (TextSize, bool) {
    let mut delta: i64 = 0;
    for (r, len) in layer {
        let (s, e) = (r.start(), r.end());
        let before = if start { p < s } else { p <= s };
        if before {
            break;
        }
        let after = if start { p >= e } else { p > e };
        if !after {
            let new_s = i64::from(u32::from(s)) + delta;
            let to = if start {
                new_s
            } else {
                new_s + i64::from(u32::from(*len))
            };
            return (offset(to), false);
        }
        delta += i64::from(u32::from(*len)) - i64::from(u32::from(r.len()));
    }
    (offset(i64::from(u32::from(p)) + delta), true)
}

fn offset(n: i64) -> TextSize {
    TextSize::try_from(n.max(0) as usize).unwrap_or_default()
}

/// The decisions carried through the fix loop.
#[derive(Debug)]
pub struct Follow {
    /// For each finding of the current round: the original finding it continues, and whether
    /// its fix may be applied.
    now: Vec<(Option<usize>, bool)>,
    /// Original findings whose fix (or a continuation's) was applied.
    pub applied: BTreeSet<usize>,
}

impl Follow {
    /// A finding with no fix on offer at the trust level `required` is no one's choice: once a
    /// fix rewrites around it and it gets one, it follows that fix.
    pub fn new(diags: &[Diagnostic], choices: &Choices, required: FixClass) -> Follow {
        Follow {
            now: diags
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let offered = d.fix.as_ref().is_some_and(|f| f.applies(required));
                    (Some(i), !offered || choices.accepted.contains(&i))
                })
                .collect(),
            applied: BTreeSet::new(),
        }
    }

    /// May the fix of the current round's finding `i` be applied?
    pub fn allows(&self, i: usize) -> bool {
        self.now.get(i).is_some_and(|n| n.1)
    }

    /// One round: `old` the findings before, `applied` those whose fix went in, `shift` how the
    /// text moved, `next` the findings after.
    pub fn step(
        &mut self,
        old: &[Diagnostic],
        applied: &[usize],
        shift: &Shift,
        next: &[Diagnostic],
    ) {
        for i in applied {
            if let Some(Some(o)) = self.now.get(*i).map(|n| n.0) {
                self.applied.insert(o);
            }
        }
        let open: Vec<usize> = (0..old.len()).filter(|i| !applied.contains(i)).collect();
        let mut used = vec![false; old.len()];
        let mut now: Vec<Option<(Option<usize>, bool)>> = vec![None; next.len()];
        for (j, d) in next.iter().enumerate() {
            if let Some(&i) = open.iter().find(|&&i| {
                !used[i] && old[i].rule == d.rule && shift.exact(old[i].range) == Some(d.range)
            }) {
                used[i] = true;
                now[j] = Some(self.now[i]);
            }
        }
        for (j, d) in next.iter().enumerate() {
            if now[j].is_some() {
                continue;
            }
            let inside = open.iter().find(|&&i| {
                let r = shift.region(old[i].range);
                !used[i]
                    && old[i].rule == d.rule
                    && (r.contains_range(d.range) || d.range.contains_range(r))
            });
            now[j] = Some(match inside {
                Some(&i) => {
                    used[i] = true;
                    self.now[i]
                }
                // Revealed by the accepted fixes.
                None => (None, true),
            });
        }
        self.now = now.into_iter().map(|n| n.unwrap_or((None, true))).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: u32, b: u32) -> TextRange {
        TextRange::new(TextSize::from(a), TextSize::from(b))
    }

    #[test]
    fn offsets_move_past_edits_and_imports() {
        // "aa cuda bb cuda" → "aa tpu bb cuda", then a line inserted at the top.
        let mut s = Shift::edits(&[Edit::replace(r(3, 7), "tpu")]);
        assert_eq!(s.exact(r(11, 15)), Some(r(10, 14)));
        assert_eq!(s.exact(r(3, 7)), None);
        assert_eq!(s.region(r(4, 5)), r(3, 6));
        s.then_text("aa tpu bb cuda", "import t\naa tpu bb cuda");
        assert_eq!(s.exact(r(11, 15)), Some(r(19, 23)));
        assert_eq!(s.exact(r(0, 2)), Some(r(9, 11)));
    }
}
