//! Text mutations that keep an input close to real code: whole lines deleted, duplicated,
//! swapped or moved; tokens from a dictionary inserted or swapped for one another; lines from
//! another corpus input spliced in; and the byte-level damage files meet in the wild (truncation,
//! mixed line endings, BOMs, tabs for spaces, stray or invalid UTF-8 bytes, NUL). Each call stacks
//! a few of them. Every target uses these on its text; the structured targets add their own.

use crate::rng::Rng;

/// No input grows past this (a huge line is made on purpose by the events target).
pub const MAX_LEN: usize = 256 * 1024;

/// Characters that are valid UTF-8 but unusual in source files.
const ODD_CHARS: &[&str] = &[
    "é",
    "中",
    "🚀",
    "\u{200b}",
    "\u{2028}",
    "\u{85}",
    "\u{c}",
    "\u{b}",
    "\u{feff}",
    "\u{0}",
    "\u{1b}[31m",
    "\u{7f}",
    "ǅ",
    "\u{301}",
];

/// Bytes that are not UTF-8 (alone, or as broken sequences).
const BAD_BYTES: &[&[u8]] = &[
    b"\xff",
    b"\xfe",
    b"\xc3",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\x80",
];

/// Mutate `input`: 1 to 8 stacked mutations. `dict` holds tokens of the input's language,
/// `others` other inputs to splice lines from.
pub fn mutate(rng: &mut Rng, input: &[u8], dict: &[&str], others: &[&[u8]]) -> Vec<u8> {
    let mut data = input.to_vec();
    let n = 1 + rng.small(7);
    for _ in 0..n {
        mutate_once(rng, &mut data, dict, others);
        if data.len() > MAX_LEN {
            data.truncate(MAX_LEN);
        }
    }
    data
}

fn mutate_once(rng: &mut Rng, data: &mut Vec<u8>, dict: &[&str], others: &[&[u8]]) {
    match rng.below(20) {
        0 | 1 => edit_lines(rng, data, |rng, lines| {
            // Delete 1 to 3 lines.
            if !lines.is_empty() {
                let at = rng.below(lines.len());
                let n = (1 + rng.below(3)).min(lines.len() - at);
                lines.drain(at..at + n);
            }
        }),
        2 => edit_lines(rng, data, |rng, lines| {
            if !lines.is_empty() {
                let at = rng.below(lines.len());
                let l = lines[at].clone();
                lines.insert(at, l);
            }
        }),
        3 => edit_lines(rng, data, |rng, lines| {
            if lines.len() > 1 {
                let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                lines.swap(a, b);
            }
        }),
        4 => edit_lines(rng, data, |rng, lines| {
            if lines.len() > 1 {
                let l = lines.remove(rng.below(lines.len()));
                let to = rng.below(lines.len() + 1);
                lines.insert(to, l);
            }
        }),
        5..=7 => {
            // A token at a character boundary.
            let tok = rng.pick(dict).as_bytes().to_vec();
            let at = boundary(rng, data);
            data.splice(at..at, tok);
        }
        8 => edit_lines(rng, data, |rng, lines| {
            // A token as a line of its own, at some indentation.
            let indent = " ".repeat(*rng.pick(&[0, 0, 4, 8, 1, 2, 3])).into_bytes();
            let mut line = indent;
            line.extend_from_slice(rng.pick(dict).as_bytes());
            line.push(b'\n');
            let at = rng.below(lines.len() + 1);
            lines.insert(at, line);
        }),
        9 => {
            // One token replaced by another wherever it first occurs.
            let (from, to) = (rng.pick(dict), rng.pick(dict));
            if let Some(i) = find(data, from.as_bytes()) {
                data.splice(i..i + from.len(), to.bytes());
            }
        }
        10 => {
            let at = rng.below(data.len() + 1);
            data.truncate(at);
        }
        11 => line_endings(rng, data),
        12 => {
            let at = if rng.one_in(3) {
                boundary(rng, data)
            } else {
                0
            };
            data.splice(at..at, "\u{feff}".bytes());
        }
        13 => edit_lines(rng, data, |rng, lines| {
            // Tabs for spaces, or the other way, in a run of lines.
            if lines.is_empty() {
                return;
            }
            let at = rng.below(lines.len());
            let n = rng.range(1, 20).min(lines.len() - at);
            let to_tabs = rng.one_in(2);
            for l in &mut lines[at..at + n] {
                *l = if to_tabs {
                    replace_leading(l, b"    ", b"\t")
                } else {
                    replace_leading(l, b"\t", b"  ")
                };
            }
        }),
        14 => edit_lines(rng, data, |rng, lines| {
            // Indent or dedent a run of lines.
            if lines.is_empty() {
                return;
            }
            let at = rng.below(lines.len());
            let n = rng.range(1, 6).min(lines.len() - at);
            let more = rng.one_in(2);
            let pad = *rng.pick(&[1usize, 2, 4]);
            for l in &mut lines[at..at + n] {
                if more {
                    l.splice(0..0, std::iter::repeat_n(b' ', pad));
                } else {
                    let ws = l.iter().take(pad).take_while(|b| **b == b' ').count();
                    l.drain(..ws);
                }
            }
        }),
        15 => {
            if let Some(other) = (!others.is_empty()).then(|| *rng.pick(others)) {
                splice_lines(rng, data, other);
            }
        }
        16 => {
            let odd = rng.pick(ODD_CHARS).as_bytes().to_vec();
            let at = boundary(rng, data);
            data.splice(at..at, odd);
        }
        17 => {
            // Bytes that are not UTF-8: the file must be refused whole, with its place.
            let bad = rng.pick(BAD_BYTES).to_vec();
            let at = rng.below(data.len() + 1);
            data.splice(at..at, bad);
        }
        18 => {
            // Flip or delete a few bytes.
            if data.is_empty() {
                return;
            }
            let at = rng.below(data.len());
            if rng.one_in(2) {
                data[at] ^= 1 << rng.below(8);
            } else {
                let n = rng.small(16).min(data.len() - at);
                data.drain(at..at + n);
            }
        }
        _ => {
            // Repeat a chunk (deep nesting, long lines, many statements).
            if data.is_empty() {
                return;
            }
            let a = boundary(rng, data);
            let len = rng.small(64).min(data.len() - a);
            let chunk = data[a..a + len].to_vec();
            let times = rng.small(200);
            for _ in 0..times {
                if data.len() + chunk.len() > MAX_LEN {
                    break;
                }
                data.splice(a..a, chunk.iter().copied());
            }
        }
    }
}

/// Split into lines (each with its `\n`), let `f` edit them, join again.
fn edit_lines(rng: &mut Rng, data: &mut Vec<u8>, f: impl FnOnce(&mut Rng, &mut Vec<Vec<u8>>)) {
    let mut lines: Vec<Vec<u8>> = data
        .split_inclusive(|b| *b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    // A last line without its newline gets one when it moves, so that lines stay lines.
    if let Some(last) = lines.last_mut()
        && last.last() != Some(&b'\n')
    {
        last.push(b'\n');
    }
    f(rng, &mut lines);
    *data = lines.concat();
}

/// A random position that does not split a UTF-8 character (when the data is UTF-8).
fn boundary(rng: &mut Rng, data: &[u8]) -> usize {
    let mut at = rng.below(data.len() + 1);
    if std::str::from_utf8(data).is_ok() {
        while at < data.len() && (data[at] & 0xC0) == 0x80 {
            at += 1;
        }
    }
    at
}

fn line_endings(rng: &mut Rng, data: &mut Vec<u8>) {
    let all = rng.one_in(3);
    let ending: &[u8] = if rng.one_in(4) { b"\r" } else { b"\r\n" };
    let mut out = Vec::with_capacity(data.len() + data.len() / 16);
    for (i, b) in data.iter().enumerate() {
        let at_newline = *b == b'\n' && (i == 0 || data[i - 1] != b'\r');
        if at_newline && (all || rng.one_in(3)) {
            out.extend_from_slice(ending);
        } else {
            out.push(*b);
        }
    }
    *data = out;
}

fn replace_leading(line: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut rest = line;
    let mut out = vec![];
    while let Some(r) = rest.strip_prefix(from) {
        out.extend_from_slice(to);
        rest = r;
    }
    out.extend_from_slice(rest);
    out
}

fn splice_lines(rng: &mut Rng, data: &mut Vec<u8>, other: &[u8]) {
    let theirs: Vec<&[u8]> = other.split_inclusive(|b| *b == b'\n').collect();
    if theirs.is_empty() {
        return;
    }
    let a = rng.below(theirs.len());
    let n = rng.range(1, 12).min(theirs.len() - a);
    let chunk: Vec<u8> = theirs[a..a + n].concat();
    edit_lines(rng, data, |rng, lines| {
        let at = rng.below(lines.len() + 1);
        lines.insert(at, chunk);
    });
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_bounded() {
        let input = b"import torch\nx = torch.zeros(3).cuda()\n\nif x:\n    y = 1\n";
        let dict = ["torch.cuda", "(", ":", "'''"];
        let others: [&[u8]; 1] = [b"import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..200)
                .map(|_| mutate(&mut rng, input, &dict, &others))
                .collect::<Vec<_>>()
        };
        let (a, b) = (run(3), run(3));
        assert_eq!(a, b);
        assert!(a.iter().all(|m| m.len() <= MAX_LEN));
        assert!(a.iter().any(|m| m.as_slice() != input), "nothing changed");
        assert!(
            a.iter().any(|m| std::str::from_utf8(m).is_err()),
            "never broke UTF-8"
        );
        assert!(
            a.iter().any(|m| m.windows(2).any(|w| w == b"\r\n")),
            "never CRLF"
        );
    }

    #[test]
    fn line_edits_keep_lines() {
        let mut rng = Rng::new(1);
        let mut data = b"a\nb".to_vec();
        edit_lines(&mut rng, &mut data, |_, lines| lines.swap(0, 1));
        assert_eq!(data, b"b\na\n");
    }
}
