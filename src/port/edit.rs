//! Edits and fixes: minimal byte-range replacements on the original text.
//!
//! Everything outside an edit stays byte-identical. Fixes are applied in order of their first
//! edit; a fix that overlaps one already applied is skipped (it is retried on the next pass of
//! the fix loop, against the new text), so overlaps resolve the same way every time.
//!
//! Also the text geometry shared by the fixes and the import passes: deleting a whole statement
//! ([`delete_statement`]), line bounds and the indentation of a line ([`indent_of`]).

use ruff_text_size::{TextRange, TextSize};

use super::rules::FixClass;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: TextRange,
    pub content: String,
}

impl Edit {
    pub fn replace(range: TextRange, content: impl Into<String>) -> Edit {
        Edit {
            range,
            content: content.into(),
        }
    }
    pub fn delete(range: TextRange) -> Edit {
        Edit::replace(range, "")
    }
    pub fn insert(at: TextSize, content: impl Into<String>) -> Edit {
        Edit::replace(TextRange::empty(at), content)
    }
}

/// A set of edits that belong together, and how far they may be trusted.
#[derive(Debug, Clone)]
pub struct Fix {
    pub edits: Vec<Edit>,
    pub applicability: FixClass,
    /// Top-level modules that must be imported for the edits to work (`torch`).
    pub imports: Vec<String>,
    /// At most one fix per key is applied in a round: statement removals carry their block,
    /// so two removals never empty a block together (the next round sees the new block).
    pub exclusive: Option<TextRange>,
    /// While the finding is made: why the fix is unsafe (it becomes the finding's note).
    pub why_unsafe: Option<String>,
}

impl Fix {
    pub fn range(&self) -> TextRange {
        let start = self
            .edits
            .iter()
            .map(|e| e.range.start())
            .min()
            .unwrap_or_default();
        let end = self
            .edits
            .iter()
            .map(|e| e.range.end())
            .max()
            .unwrap_or_default();
        TextRange::new(start, end)
    }

    /// Does this fix apply when fixes of class `required` or better are wanted?
    pub fn applies(&self, required: FixClass) -> bool {
        self.applicability >= required
    }
}

/// Apply non-overlapping fixes; returns the new text and the indices of the fixes applied.
pub fn apply_fixes(source: &str, fixes: &[(usize, &Fix)]) -> (String, Vec<usize>) {
    let mut order: Vec<&(usize, &Fix)> = fixes.iter().collect();
    order.sort_by_key(|(i, f)| (f.range().start(), f.range().end(), *i));
    let mut taken: Vec<TextRange> = vec![];
    let mut keys: Vec<TextRange> = vec![];
    let mut edits: Vec<&Edit> = vec![];
    let mut applied = vec![];
    for (idx, fix) in order {
        if let Some(k) = fix.exclusive
            && keys.contains(&k)
        {
            continue;
        }
        let overlaps = fix.edits.iter().any(|e| {
            taken.iter().any(|t| {
                // Two insertions at one point, or an edit inside another, conflict.
                e.range.start() < t.end() && t.start() < e.range.end()
                    || (e.range.is_empty() || t.is_empty()) && e.range.start() == t.start()
                    || t.contains_range(e.range) && !t.is_empty()
                    || e.range.contains_range(*t) && !e.range.is_empty()
            })
        });
        if overlaps {
            continue;
        }
        taken.extend(fix.edits.iter().map(|e| e.range));
        keys.extend(fix.exclusive);
        edits.extend(fix.edits.iter());
        applied.push(*idx);
    }
    (apply_edits(source, edits), applied)
}

/// Apply edits that are known not to overlap.
pub fn apply_edits(source: &str, mut edits: Vec<&Edit>) -> String {
    edits.sort_by_key(|e| (e.range.start(), e.range.end()));
    let mut out = String::with_capacity(source.len() + 64);
    let mut last = 0usize;
    for e in edits {
        let (s, t) = (usize::from(e.range.start()), usize::from(e.range.end()));
        if s < last {
            continue;
        }
        out.push_str(&source[last..s]);
        out.push_str(&e.content);
        last = t;
    }
    out.push_str(&source[last..]);
    out
}

/// Delete a whole statement: its lines when it stands alone on them, `pass` if it is the only
/// statement of its block.
pub fn delete_statement(src: &str, range: TextRange, only_in_block: bool) -> Edit {
    if only_in_block {
        return Edit::replace(range, "pass");
    }
    let b = src.as_bytes();
    let (s, e) = (usize::from(range.start()), usize::from(range.end()));
    let mut ls = s;
    while ls > 0 && b[ls - 1] != b'\n' {
        ls -= 1;
    }
    let mut le = e;
    while le < b.len() && b[le] != b'\n' {
        le += 1;
    }
    let before = &src[ls..s];
    let after = &src[e..le];
    let after_trim = after.trim_start();
    if before.trim().is_empty() && (after_trim.is_empty() || after_trim.starts_with('#')) {
        let end = if le < b.len() { le + 1 } else { le };
        return Edit::delete(TextRange::new(
            TextSize::try_from(ls).unwrap(),
            TextSize::try_from(end).unwrap(),
        ));
    }
    if let Some(rest) = after_trim.strip_prefix(';') {
        let skip = after.len() - rest.trim_start().len();
        return Edit::delete(TextRange::new(
            range.start(),
            range.end() + TextSize::try_from(skip).unwrap(),
        ));
    }
    // `a; b` where b is removed: take the `;` before it.
    let semi = before.rfind(';').map(|i| ls + i).unwrap_or(s);
    Edit::delete(TextRange::new(
        TextSize::try_from(semi).unwrap(),
        range.end(),
    ))
}

/// The comment lines directly above a statement that describe it alone: a block of comments at
/// its indentation with no blank line between, where the statement ends its group (a blank
/// line, the end of the block or of the file follows). None for a block that starts the file
/// (a header), one followed by more code of the group, or one with a tool directive.
pub fn leading_comments(src: &str, stmt: TextRange) -> Option<TextRange> {
    let indent = indent_of(src, stmt.start())?;
    let start = usize::from(stmt.start()) - indent.len();
    let end = usize::from(line_end(src, stmt.end()));
    if let Some(next) = src.get(end + 1..) {
        let line = next.split('\n').next().unwrap_or("");
        let rest = line.trim_start();
        if !rest.is_empty() && line.len() - rest.len() >= indent.len() {
            return None;
        }
    }
    let mut top = start;
    while top > 0 {
        let prev_start = src[..top - 1].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line = src[prev_start..top - 1].trim_end_matches('\r');
        let rest = line.trim_start();
        if !rest.starts_with('#') || &line[..line.len() - rest.len()] != indent {
            break;
        }
        top = prev_start;
    }
    // Tool directives (`# fmt: off`, `# pylint: disable=...`) may reach past the statement.
    let directive = src[top..start].lines().any(|l| {
        let c = l.trim_start().trim_start_matches('#').trim_start();
        [
            "fmt:", "isort:", "pylint:", "noqa", "type:", "pragma", "tpuport", "mypy:", "ruff:",
        ]
        .iter()
        .any(|d| c.starts_with(d))
    });
    if top == start || top == 0 || directive {
        return None;
    }
    Some(TextRange::new(
        TextSize::try_from(top).unwrap(),
        TextSize::try_from(start).unwrap(),
    ))
}

/// The indentation before `at` when only whitespace precedes it on its line.
pub fn indent_of(src: &str, at: TextSize) -> Option<&str> {
    let at = usize::from(at);
    let start = src[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let indent = &src[start..at];
    indent
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(indent)
}

/// The start of the line that holds `at`.
pub fn line_start(text: &str, at: TextSize) -> TextSize {
    let s = usize::from(at);
    let i = text[..s].rfind('\n').map(|i| i + 1).unwrap_or(0);
    TextSize::try_from(i).unwrap()
}

/// The end of the line that holds `at` (its `\n`, or the end of the text).
pub fn line_end(text: &str, at: TextSize) -> TextSize {
    let s = usize::from(at);
    let i = text[s..].find('\n').map(|i| i + s).unwrap_or(text.len());
    TextSize::try_from(i).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: u32, b: u32) -> TextRange {
        TextRange::new(TextSize::from(a), TextSize::from(b))
    }

    fn fix(edits: Vec<Edit>) -> Fix {
        Fix {
            edits,
            applicability: FixClass::Safe,
            imports: vec![],
            exclusive: None,
            why_unsafe: None,
        }
    }

    #[test]
    fn edits_keep_everything_else() {
        let src = "a = 'cuda'  # c\r\nb\t= 1\r\n";
        let f = fix(vec![Edit::replace(r(5, 9), "tpu")]);
        let (out, applied) = apply_fixes(src, &[(0, &f)]);
        assert_eq!(out, "a = 'tpu'  # c\r\nb\t= 1\r\n");
        assert_eq!(applied, vec![0]);
    }

    #[test]
    fn overlapping_fixes_resolve_by_position_then_index() {
        let src = "0123456789";
        let outer = fix(vec![Edit::replace(r(2, 8), "X")]);
        let inner = fix(vec![Edit::replace(r(3, 4), "Y")]);
        let later = fix(vec![Edit::replace(r(8, 9), "Z")]);
        let (out, applied) = apply_fixes(src, &[(0, &inner), (1, &outer), (2, &later)]);
        assert_eq!(out, "01XZ9");
        assert_eq!(applied, vec![1, 2]);
        // Same input in another order gives the same result.
        let (out2, _) = apply_fixes(src, &[(2, &later), (1, &outer), (0, &inner)]);
        assert_eq!(out2, out);
    }

    #[test]
    fn applicability_order() {
        assert!(FixClass::Safe > FixClass::Unsafe && FixClass::Unsafe > FixClass::Manual);
        let f = fix(vec![]);
        assert!(f.applies(FixClass::Unsafe));
    }

    #[test]
    fn statement_deletion() {
        let src = "a\nb  # c\nd\n";
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(2), TextSize::from(3)),
            false,
        );
        assert_eq!(apply_edits(src, vec![&e]), "a\nd\n");
        let src = "a; b\n";
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(3), TextSize::from(4)),
            false,
        );
        assert_eq!(apply_edits(src, vec![&e]), "a\n");
        let e = delete_statement(
            src,
            TextRange::new(TextSize::from(0), TextSize::from(1)),
            false,
        );
        assert_eq!(apply_edits(src, vec![&e]), "b\n");
    }

    #[test]
    fn comments_that_describe_a_statement_alone() {
        fn at<'s>(src: &'s str, stmt: &str) -> Option<&'s str> {
            let s = src.find(stmt).unwrap() as u32;
            leading_comments(src, r(s, s + stmt.len() as u32)).map(|c| &src[c])
        }
        let src = "x = 1\n# TF32\n# fast\ny = 2\n\nz = 3\n";
        assert_eq!(at(src, "y = 2"), Some("# TF32\n# fast\n"));
        // Separated by a blank line, or followed by more of the group: kept.
        assert_eq!(at("x = 1\n# TF32\n\ny = 2\n", "y = 2"), None);
        assert_eq!(at("x = 1\n# TF32\ny = 2\nz = 3\n", "y = 2"), None);
        // A file header stays; the end of a block ends the group.
        assert_eq!(at("# Copyright\ny = 2\n", "y = 2"), None);
        assert_eq!(at("x = 1\n# fmt: off\ny = 2\n", "y = 2"), None);
        let src = "if a:\n    # TF32\n    y = 2\nz = 3";
        assert_eq!(at(src, "y = 2"), Some("    # TF32\n"));
    }

    #[test]
    fn indentation() {
        assert_eq!(indent_of("a\n    b", TextSize::from(6)), Some("    "));
        assert_eq!(indent_of("a; b", TextSize::from(3)), None);
    }
}
