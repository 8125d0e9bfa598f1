//! The needle search of the rule prefilter ([`super::index::RuleIndex::active`]): which of a
//! set of words occur in a text, ASCII case ignored. Every file of a run is searched for every
//! needle (on transformers' 2,860 files, 52 MB, 443 needles), so this is a hand-made
//! Aho-Corasick DFA: byte classes that fold ASCII upper case into lower case (no lower-cased
//! copy of the text), the states that end a needle numbered first (one comparison per byte
//! tells a match), and the text cut into four parts searched side by side, each part running
//! on past its end by the longest needle's length less one, so that a needle across a cut is
//! found by the part it starts in. A DFA walk waits on each transition's load; four
//! independent walks fill that wait (46 ms against the aho-corasick crate's overlapping DFA
//! at 126 ms on transformers, the same answers).

use std::collections::VecDeque;

/// A compiled set of needles.
pub struct Needles {
    /// Byte → its class (a column of the table); bytes no needle holds share class 0.
    classes: [u32; 256],
    /// Classes per state: a state's row starts at its number times this.
    stride: usize,
    /// State row start + class → the next state's row start.
    table: Vec<u32>,
    /// The start state's row.
    start: u32,
    /// Rows below this end at least one needle.
    matching: u32,
    /// For each matching state (by number), its needles' range in `ends`.
    ranges: Vec<(u32, u32)>,
    ends: Vec<u32>,
    /// Empty needles: in every text.
    always: Vec<usize>,
    count: usize,
    longest: usize,
}

/// How many parts of a text are searched side by side, and the shortest text that is cut.
const PARTS: usize = 4;
const CUT_FROM: usize = 4096;

impl Needles {
    pub fn new<S: AsRef<str>>(needles: &[S]) -> Needles {
        let lower = |b: u8| b.to_ascii_lowercase() as usize;
        let mut classes = [0u32; 256];
        let mut next = 1u32;
        for n in needles {
            for &b in n.as_ref().as_bytes() {
                if classes[lower(b)] == 0 {
                    classes[lower(b)] = next;
                    next += 1;
                }
            }
        }
        for b in b'A'..=b'Z' {
            classes[b as usize] = classes[lower(b)];
        }
        let stride = next as usize;
        // The trie: `goto` holds each state's row, NONE where it has no edge.
        const NONE: u32 = u32::MAX;
        let mut goto: Vec<u32> = vec![NONE; stride];
        let mut out: Vec<Vec<u32>> = vec![vec![]];
        let mut always = vec![];
        for (i, n) in needles.iter().enumerate() {
            let n = n.as_ref().as_bytes();
            if n.is_empty() {
                always.push(i);
                continue;
            }
            let mut s = 0;
            for &b in n {
                let at = s * stride + classes[lower(b)] as usize;
                if goto[at] == NONE {
                    goto[at] = out.len() as u32;
                    goto.extend(std::iter::repeat_n(NONE, stride));
                    out.push(vec![]);
                }
                s = goto[at] as usize;
            }
            out[s].push(i as u32);
        }
        // Failure links, breadth first, folded into full transitions; a state ends the needles
        // its longest proper suffix state ends too.
        let states = out.len();
        assert!(
            states.saturating_mul(stride) < u32::MAX as usize,
            "too many needles for the prefilter: {states} states of {stride} classes"
        );
        let mut next_state = vec![0u32; states * stride];
        let mut fail = vec![0usize; states];
        let mut queue = VecDeque::new();
        for c in 0..stride {
            if goto[c] != NONE {
                next_state[c] = goto[c];
                queue.push_back(goto[c] as usize);
            }
        }
        while let Some(s) = queue.pop_front() {
            let f = fail[s];
            let inherited = out[f].clone();
            out[s].extend(inherited);
            for c in 0..stride {
                let t = goto[s * stride + c];
                if t == NONE {
                    next_state[s * stride + c] = next_state[f * stride + c];
                } else {
                    next_state[s * stride + c] = t;
                    fail[t as usize] = next_state[f * stride + c] as usize;
                    queue.push_back(t as usize);
                }
            }
        }
        // Matching states first; rows stored as their start.
        let mut order: Vec<usize> = (0..states).collect();
        order.sort_by_key(|s| (out[*s].is_empty(), *s));
        let mut number = vec![0u32; states];
        for (n, s) in order.iter().enumerate() {
            number[*s] = n as u32;
        }
        let row = |s: usize| number[s] * stride as u32;
        let mut table = vec![0u32; states * stride];
        let mut ranges = vec![];
        let mut ends = vec![];
        for (n, s) in order.iter().enumerate() {
            for c in 0..stride {
                table[n * stride + c] = row(next_state[s * stride + c] as usize);
            }
            if !out[*s].is_empty() {
                let from = ends.len() as u32;
                ends.extend(out[*s].iter().copied());
                ranges.push((from, ends.len() as u32));
            }
        }
        Needles {
            classes,
            stride,
            table,
            start: row(0),
            matching: (ranges.len() * stride) as u32,
            ranges,
            ends,
            always,
            count: needles.len(),
            longest: needles.iter().map(|n| n.as_ref().len()).max().unwrap_or(0),
        }
    }

    /// For each needle, whether the text holds it (ASCII case ignored).
    pub fn present(&self, text: &str) -> Vec<bool> {
        let text = text.as_bytes();
        let mut found = vec![false; self.count];
        for i in &self.always {
            found[*i] = true;
        }
        if text.len() < CUT_FROM {
            self.walk(self.start, text, &mut found);
            return found;
        }
        let part = text.len() / PARTS;
        let over = self.longest.saturating_sub(1);
        let parts: [&[u8]; PARTS] = std::array::from_fn(|k| {
            let end = if k + 1 == PARTS {
                text.len()
            } else {
                ((k + 1) * part + over).min(text.len())
            };
            &text[k * part..end]
        });
        let common = parts.iter().map(|p| p.len()).min().unwrap_or(0);
        let mut states = [self.start; PARTS];
        for j in 0..common {
            for (s, p) in states.iter_mut().zip(&parts) {
                *s = self.step(*s, p[j]);
            }
            for s in states {
                if s < self.matching {
                    self.mark(s, &mut found);
                }
            }
        }
        for (s, p) in states.into_iter().zip(&parts) {
            self.walk(s, &p[common..], &mut found);
        }
        found
    }

    #[inline(always)]
    fn step(&self, state: u32, byte: u8) -> u32 {
        self.table[(state + self.classes[byte as usize]) as usize]
    }

    fn walk(&self, mut state: u32, text: &[u8], found: &mut [bool]) {
        for &b in text {
            state = self.step(state, b);
            if state < self.matching {
                self.mark(state, found);
            }
        }
    }

    #[inline(always)]
    fn mark(&self, state: u32, found: &mut [bool]) {
        let (from, to) = self.ranges[state as usize / self.stride];
        for i in &self.ends[from as usize..to as usize] {
            found[*i as usize] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(needles: &[&str], text: &str) -> Vec<bool> {
        let text = text.to_ascii_lowercase();
        needles
            .iter()
            .map(|n| text.contains(&n.to_ascii_lowercase()))
            .collect()
    }

    /// Overlapping needles, needles inside needles, case, an empty needle, non-ASCII bytes, and
    /// texts long enough to be cut, with needles across every cut.
    #[test]
    fn finds_what_a_substring_test_finds() {
        let needles = [
            "cuda",
            "torch.cuda.",
            ".cuda(",
            "a",
            "aa",
            "aab",
            "bfloat16",
            "float16",
            "",
            "é",
            "nccl",
            "xyzzy",
            "import torch",
            "ß.to(",
        ];
        let set = Needles::new(&needles);
        let mut texts: Vec<String> = vec![
            String::new(),
            "x".into(),
            "IMPORT TORCH\nx.CUDA()".into(),
            "aab".into(),
            "Bfloat16 only".into(),
            "é and ß.To(".into(),
        ];
        // Long texts: filler with needles placed at and around every cut of every length.
        let mut seed = 7u64;
        let mut rand = move |n: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        for _ in 0..200 {
            let len = CUT_FROM + rand(3 * CUT_FROM);
            let mut t: Vec<u8> = (0..len).map(|_| b"qwe rtyu\n"[rand(9)]).collect();
            let needle = needles[rand(needles.len())].as_bytes();
            let part = len / PARTS;
            let at = (rand(PARTS - 1) + 1) * part;
            let at = (at + rand(needle.len() + 1))
                .saturating_sub(needle.len())
                .min(len - needle.len());
            t[at..at + needle.len()].copy_from_slice(needle);
            texts.push(String::from_utf8_lossy(&t).into_owned());
        }
        for t in &texts {
            assert_eq!(set.present(t), naive(&needles, t), "{t:?}");
        }
    }
}
