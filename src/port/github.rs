//! `migrate --output-format github`: one GitHub Actions workflow command per finding, so that a
//! workflow step shows the findings as annotations on the pull request's lines:
//! `::warning file=PATH,line=L,col=C,endLine=L2,endColumn=C2,title=RULE::MESSAGE`.
//!
//! A finding whose fix this run applies (or `--write` would) is a `notice`; manual findings and
//! fixes not enabled (unsafe without `--unsafe-fixes`) are `warning`s; nothing is an `error`
//! (bad input stays an `error:` line on stderr). Columns count characters, as in the text
//! output. The message carries the rule's advice and the finding's note on lines of their own.

use std::fmt::Write as _;

use super::diagnostic::Diagnostic;
use super::render::LineIndex;
use super::rules::{FixClass, RuleSet};

/// The workflow command for a finding: `notice` where its fix is applied, else `warning`.
pub fn command(d: &Diagnostic, required: FixClass) -> &'static str {
    match &d.fix {
        Some(f) if f.applies(required) => "notice",
        _ => "warning",
    }
}

/// Escape a message (the part after `::`) as GitHub's runner reads it.
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a property value (`file=`, `title=`): as data, and also `:` and `,`.
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// One line per finding, in the order given.
pub fn annotations(
    path: &str,
    text: &str,
    diags: &[Diagnostic],
    rules: &RuleSet,
    required: FixClass,
) -> String {
    let index = LineIndex::new(text);
    let file = escape_property(&path.replace('\\', "/"));
    let mut out = String::new();
    for d in diags {
        let rule = &rules.rules[d.rule];
        let (line, col) = index.line_col(text, d.range.start());
        let (end_line, end_col) = index.line_col(text, d.range.end());
        let mut message = d.message.clone();
        match &d.fix {
            Some(f) if f.applies(required) => message.push_str(" [fix: tpuport migrate --write]"),
            Some(_) => message.push_str(" [unsafe fix: needs --unsafe-fixes]"),
            None => {}
        }
        if let Some(advice) = &rule.advice {
            message.push_str("\nhelp: ");
            message.push_str(advice.trim());
        }
        if let Some(note) = &d.note {
            message.push_str("\nnote: ");
            message.push_str(note);
        }
        let _ = writeln!(
            out,
            "::{} file={file},line={line},col={col},endLine={end_line},endColumn={end_col},title={}::{}",
            command(d, required),
            escape_property(&rule.id),
            escape_data(&message)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_the_runner() {
        assert_eq!(escape_data("a%b\r\nc: d, e"), "a%25b%0D%0Ac: d, e");
        assert_eq!(escape_property("a%b\nc: d, e"), "a%25b%0Ac%3A d%2C e");
    }
}
