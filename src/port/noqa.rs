//! Suppression comments, read the way ruff reads `# noqa`: which rule codes a comment silences
//! on its line (`# noqa`, `# noqa: DEV001, CUD007`, `# tpuport: noqa: DEV`, `# tpuport:
//! ignore[DEV017]`) or in the whole file (`# tpuport: ignore-file`, `# tpuport:
//! ignore-file[DEV, AMP003]`), and which line of a finding carries its comment.
//!
//! Only text is read here; [`crate::port::rewrite`] drops the suppressed findings (and so their
//! fixes) in every round of the fix loop, and [`crate::port::migrate_source_at`] skips a file
//! that ignores every rule.

use ruff_text_size::TextRange;

/// The rule codes a suppression comment names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Codes<'a> {
    /// Every tpuport rule (`# noqa`, `# tpuport: ignore`, `# tpuport: ignore-file`).
    All,
    /// Rule ids or prefixes (`DEV001`, `DEV`, `DEV0`).
    Some(Vec<&'a str>),
}

impl Codes<'_> {
    /// Whether these codes silence the rule `id` of `family`.
    pub fn covers(&self, id: &str, family: &str) -> bool {
        match self {
            Codes::All => true,
            Codes::Some(codes) => codes.iter().any(|c| code_matches(c, id, family)),
        }
    }

    fn merge<'a>(a: Option<Codes<'a>>, b: Codes<'a>) -> Codes<'a> {
        match (a, b) {
            (None, b) => b,
            (Some(Codes::All), _) | (_, Codes::All) => Codes::All,
            (Some(Codes::Some(mut x)), Codes::Some(y)) => {
                x.extend(y);
                Codes::Some(x)
            }
        }
    }
}

/// A code names a rule when it is the rule's id or a prefix of it at least as long as the
/// family: `DEV` and `DEV0` cover `DEV001`, but `D` (pydocstyle's family in ruff) covers nothing,
/// and `XM` covers `XM001` but not `XMP001`.
pub fn code_matches(code: &str, id: &str, family: &str) -> bool {
    id.starts_with(code) && (code.len() >= family.len() || code == id)
}

/// The line-level directive in one comment's text (from its `#`), if any. A comment may hold
/// several (`# type: ignore  # noqa: DEV001`): they add up.
pub fn line_codes(comment: &str) -> Option<Codes<'_>> {
    let mut out: Option<Codes> = None;
    for (i, _) in comment.match_indices('#') {
        let rest = comment[i + 1..].trim_start();
        let (tpuport, rest) = match rest.strip_prefix("tpuport:") {
            Some(r) => (true, r.trim_start()),
            None => (false, rest),
        };
        let found = if tpuport && let Some(r) = rest.strip_prefix("ignore") {
            // `ignore-file` is the file-level form, read by `file_codes`.
            if r.starts_with(['-', '_']) || r.starts_with(|c: char| c.is_alphanumeric()) {
                None
            } else {
                Some(bracketed(r))
            }
        } else {
            noqa(rest)
        };
        if let Some(codes) = found {
            out = Some(Codes::merge(out, codes));
        }
    }
    out
}

/// The file-level directive in one comment's text: `# tpuport: ignore-file` (every rule) or
/// `# tpuport: ignore-file[DEV, AMP003]`.
pub fn file_codes(comment: &str) -> Option<Codes<'_>> {
    let mut out: Option<Codes> = None;
    for (i, _) in comment.match_indices('#') {
        let rest = comment[i + 1..].trim_start();
        let Some(rest) = rest.strip_prefix("tpuport:") else {
            continue;
        };
        let Some(r) = rest.trim_start().strip_prefix("ignore-file") else {
            continue;
        };
        if r.starts_with(|c: char| c.is_alphanumeric() || c == '-' || c == '_') {
            continue;
        }
        out = Some(Codes::merge(out, bracketed(r)));
    }
    out
}

/// What the comments of a file exempt file-wide, like ruff's `# ruff: noqa`: a directive in
/// any comment counts, wherever it is (the top of the file is the place to put it).
pub fn file_exemption<'s>(source: &'s str, comments: &[TextRange]) -> Option<Codes<'s>> {
    let mut out: Option<Codes> = None;
    for c in comments {
        let text = &source[usize::from(c.start())..usize::from(c.end())];
        if !text.contains("ignore-file") {
            continue;
        }
        if let Some(codes) = file_codes(text) {
            out = Some(Codes::merge(out, codes));
        }
    }
    out
}

/// `[DEV001, CUD004]` after `ignore`: those codes; anything else (nothing, or prose): all.
fn bracketed(rest: &str) -> Codes<'_> {
    match rest.trim_start().strip_prefix('[') {
        Some(list) => Codes::Some(
            list.split(']')
                .next()
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect(),
        ),
        None => Codes::All,
    }
}

/// After a `#`: `noqa` (any case), then nothing, or `:` and codes separated by commas or
/// spaces. Text after the codes is a reason (`# noqa: DEV001 the CPU path`). `noqa:` without a
/// code silences nothing (ruff warns about it and ignores it too).
fn noqa(rest: &str) -> Option<Codes<'_>> {
    let head = rest.get(..4)?;
    if !head.eq_ignore_ascii_case("noqa") {
        return None;
    }
    let after = &rest[4..];
    let Some(list) = after.strip_prefix(':') else {
        // `# noqa`, `# noqa  reason`; not `# noqaxyz`.
        return (!after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
            .then_some(Codes::All);
    };
    let codes: Vec<&str> = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .take_while(|t| is_code(t))
        .collect();
    (!codes.is_empty()).then_some(Codes::Some(codes))
}

/// `DEV001`, `DEV`, `TEAM0`: capital letters, then digits.
fn is_code(t: &str) -> bool {
    let letters = t.bytes().take_while(u8::is_ascii_uppercase).count();
    letters > 0 && t.bytes().skip(letters).all(|b| b.is_ascii_digit())
}

/// The byte ranges of the lines whose comments may silence a finding over `range`, as ruff
/// decides: the line the finding starts on, carried on to the last line of a statement
/// continued with `\`; and, for a finding on a string that spans lines (a triple-quoted
/// string), the line where it ends.
pub fn comment_lines(src: &str, range: TextRange) -> Vec<(usize, usize)> {
    let start = usize::from(range.start()).min(src.len());
    let end = usize::from(range.end()).min(src.len());
    let line_start = src[..start].rfind('\n').map_or(0, |i| i + 1);
    let mut first_end = end_of_line(src, start);
    while src[..first_end].trim_end_matches('\r').ends_with('\\') && first_end < src.len() {
        first_end = end_of_line(src, first_end + 1);
    }
    let mut lines = vec![(line_start, first_end)];
    if end > first_end && is_string(&src[start..end]) {
        let last_start = src[..end].rfind('\n').map_or(0, |i| i + 1);
        lines.push((last_start, end_of_line(src, end)));
    }
    lines
}

fn end_of_line(src: &str, from: usize) -> usize {
    src[from..].find('\n').map_or(src.len(), |i| i + from)
}

/// The text starts a string literal: an optional prefix (`r`, `b`, `f`, `rb`, ...) and a quote.
fn is_string(text: &str) -> bool {
    let body = text.trim_start_matches(|c: char| "rRbBfFuUtT".contains(c));
    body.len() + 2 >= text.len() && body.starts_with(['"', '\''])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruff_text_size::TextSize;

    fn all() -> Option<Codes<'static>> {
        Some(Codes::All)
    }

    fn some(c: &[&'static str]) -> Option<Codes<'static>> {
        Some(Codes::Some(c.to_vec()))
    }

    #[test]
    fn noqa_forms() {
        assert_eq!(line_codes("# noqa"), all());
        assert_eq!(line_codes("# NOQA"), all());
        assert_eq!(line_codes("#noqa"), all());
        assert_eq!(line_codes("# noqa  the CPU path"), all());
        assert_eq!(line_codes("# noqa: DEV001"), some(&["DEV001"]));
        assert_eq!(
            line_codes("# noqa:DEV001,CUD007"),
            some(&["DEV001", "CUD007"])
        );
        assert_eq!(
            line_codes("# noqa: DEV001, CUD007 kept for CUDA"),
            some(&["DEV001", "CUD007"])
        );
        assert_eq!(line_codes("# noqa: DEV"), some(&["DEV"]));
        assert_eq!(line_codes("# tpuport: noqa: DEV001"), some(&["DEV001"]));
        assert_eq!(line_codes("# tpuport: noqa"), all());
        assert_eq!(line_codes("# type: ignore  # noqa: E501"), some(&["E501"]));
        // Not directives.
        assert_eq!(line_codes("# noqa:"), None);
        assert_eq!(line_codes("# noqa: see below"), None);
        assert_eq!(line_codes("# noqaxyz"), None);
        assert_eq!(line_codes("# the noqa comment"), None);
        assert_eq!(line_codes("# runs on cuda"), None);
    }

    #[test]
    fn tpuport_ignore_forms() {
        assert_eq!(line_codes("# tpuport: ignore"), all());
        assert_eq!(
            line_codes("# tpuport: ignore[DEV017, CUD004]"),
            some(&["DEV017", "CUD004"])
        );
        assert_eq!(line_codes("# tpuport: ignore-file"), None);
        assert_eq!(line_codes("# tpuport: ignored"), None);
    }

    #[test]
    fn file_forms() {
        assert_eq!(file_codes("# tpuport: ignore-file"), all());
        assert_eq!(file_codes("# tpuport:ignore-file  (CUDA only)"), all());
        assert_eq!(
            file_codes("# tpuport: ignore-file[DEV, AMP003]"),
            some(&["DEV", "AMP003"])
        );
        assert_eq!(file_codes("# tpuport: ignore"), None);
        assert_eq!(file_codes("# tpuport: ignore-files"), None);
        assert_eq!(file_codes("# noqa"), None);
        let src = "# Copyright\nimport torch  # tpuport: ignore-file[DEV]\nx = 1  # tpuport: ignore-file[CUD004]\n";
        let comments = [
            TextRange::new(TextSize::new(0), TextSize::new(11)),
            TextRange::new(TextSize::new(26), TextSize::new(53)),
            TextRange::new(TextSize::new(61), TextSize::new(90)),
        ];
        assert_eq!(&src[26..27], "#");
        assert_eq!(file_exemption(src, &comments), some(&["DEV", "CUD004"]));
        assert_eq!(file_exemption(src, &comments[..1]), None);
    }

    #[test]
    fn codes_match_ids_and_families() {
        let c = Codes::Some(vec!["DEV", "CUD007", "XM", "D", "AMP0"]);
        assert!(c.covers("DEV001", "DEV"));
        assert!(c.covers("CUD007", "CUD"));
        assert!(!c.covers("CUD004", "CUD"));
        assert!(c.covers("XM001", "XM"));
        assert!(!c.covers("XMP001", "XMP"));
        assert!(!c.covers("DST001", "DST"));
        assert!(c.covers("AMP003", "AMP"));
        assert!(Codes::All.covers("OPS001", "OPS"));
    }

    #[test]
    fn lines_of_a_finding() {
        fn at<'s>(src: &'s str, from: &str, to: &str) -> Vec<&'s str> {
            let s = src.find(from).unwrap();
            let e = src.find(to).unwrap() + to.len();
            comment_lines(
                src,
                TextRange::new(TextSize::new(s as u32), TextSize::new(e as u32)),
            )
            .into_iter()
            .map(|(a, b)| &src[a..b])
            .collect()
        }
        let src = "a = 1\nx = f(\n    'cuda')  # noqa\ny = 2\n";
        assert_eq!(at(src, "f(", "'cuda')"), vec!["x = f("]);
        let src = "x = torch.cuda.synchronize() + \\\n    1  # noqa\n";
        assert_eq!(
            at(src, "torch", "()"),
            vec!["x = torch.cuda.synchronize() + \\\n    1  # noqa"]
        );
        let src = "d = '''cuda\n'''  # noqa\n";
        assert_eq!(at(src, "'''c", "\n'''"), vec!["d = '''cuda", "'''  # noqa"]);
    }
}
