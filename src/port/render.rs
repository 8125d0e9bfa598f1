//! How findings look: one block per diagnostic (location, rule, fix marker, source line with a
//! caret, advice), a unified diff per changed file, and the JSON form of both.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ruff_text_size::{TextRange, TextSize};
use serde::Serialize;

use super::diagnostic::Diagnostic;
use super::rules::{FixClass, RuleSet};

/// Byte offset → 1-based line and character column.
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex { starts }
    }

    pub fn line_col(&self, text: &str, offset: TextSize) -> (usize, usize) {
        let o = usize::from(offset).min(text.len());
        let line = self.starts.partition_point(|s| *s <= o) - 1;
        let col = text[self.starts[line]..o].chars().count() + 1;
        (line + 1, col)
    }

    pub fn line_text<'t>(&self, text: &'t str, line: usize) -> &'t str {
        let s = self.starts[line - 1];
        let e = self.starts.get(line).copied().unwrap_or(text.len());
        text[s..e].trim_end_matches(['\n', '\r'])
    }
}

/// The marker shown after the rule id.
pub fn marker(d: &Diagnostic, required: FixClass) -> &'static str {
    match &d.fix {
        Some(f) if f.applies(required) => " [*]",
        Some(_) => " [unsafe fix]",
        None => "",
    }
}

/// A rule that fires more than this many times in one file with the same message is grouped
/// in the full text output: the first [`GROUP_SHOWN`] findings, then one line for the rest.
pub const GROUP_OVER: usize = 5;
pub const GROUP_SHOWN: usize = 3;

/// Render diagnostics the way a person reads them: every one (rule fixtures, `--quiet`).
pub fn diagnostics_text(
    path: &str,
    text: &str,
    diags: &[Diagnostic],
    rules: &RuleSet,
    required: FixClass,
    show_source: bool,
) -> String {
    render_diagnostics(path, text, diags, rules, required, show_source, false)
}

/// As [`diagnostics_text`], for `tpuport migrate`'s text output: with `show_source` (not
/// `--quiet`), repetitive findings are grouped (see [`GROUP_OVER`]); `--quiet` keeps one line
/// per finding, and JSON lists them all.
pub fn diagnostics_text_grouped(
    path: &str,
    text: &str,
    diags: &[Diagnostic],
    rules: &RuleSet,
    required: FixClass,
    show_source: bool,
) -> String {
    render_diagnostics(path, text, diags, rules, required, show_source, true)
}

fn render_diagnostics(
    path: &str,
    text: &str,
    diags: &[Diagnostic],
    rules: &RuleSet,
    required: FixClass,
    show_source: bool,
    group: bool,
) -> String {
    let index = LineIndex::new(text);
    let mut out = String::new();
    let mut groups: BTreeMap<(usize, &str), Vec<usize>> = BTreeMap::new();
    for d in diags {
        let line = index.line_col(text, d.range.start()).0;
        groups.entry((d.rule, &d.message)).or_default().push(line);
    }
    let mut seen: BTreeMap<(usize, &str), usize> = BTreeMap::new();
    for d in diags {
        let rule = &rules.rules[d.rule];
        let key = (d.rule, d.message.as_str());
        let lines = &groups[&key];
        let nth = seen.entry(key).or_default();
        *nth += 1;
        let grouped = group && show_source && lines.len() > GROUP_OVER;
        if grouped && *nth > GROUP_SHOWN {
            continue;
        }
        let (line, col) = index.line_col(text, d.range.start());
        let _ = writeln!(
            out,
            "{path}:{line}:{col}: {}{} {}",
            rule.id,
            marker(d, required),
            d.message
        );
        if show_source {
            let src_line = index.line_text(text, line);
            let width = line.to_string().len();
            let (end_line, end_col) = index.line_col(text, d.range.end());
            let carets = if end_line == line {
                (end_col - col).max(1)
            } else {
                src_line.chars().count().saturating_sub(col - 1).max(1)
            };
            let _ = writeln!(out, "{:>width$} |", "");
            let _ = writeln!(out, "{line:>width$} | {}", src_line.replace('\t', "    "));
            let pad: String = src_line
                .chars()
                .take(col - 1)
                .map(|c| if c == '\t' { "    " } else { " " })
                .collect();
            let _ = writeln!(out, "{:>width$} | {pad}{}", "", "^".repeat(carets));
            if let Some(advice) = &rule.advice {
                let _ = writeln!(out, "{:>width$} = help: {}", "", advice.trim());
            }
            if let Some(note) = &d.note {
                let _ = writeln!(out, "{:>width$} = note: {note}", "");
            }
            if let Some(f) = &d.fix
                && !f.applies(required)
            {
                let _ = writeln!(
                    out,
                    "{:>width$} = note: an unsafe fix is available with --unsafe-fixes ({})",
                    "",
                    fix_preview(text, &f.edits)
                );
            }
            out.push('\n');
        }
        if grouped && *nth == GROUP_SHOWN {
            let rest = &lines[GROUP_SHOWN..];
            let mut at: Vec<String> = rest.iter().take(10).map(|l| l.to_string()).collect();
            if rest.len() > 10 {
                at.push("…".into());
            }
            let _ = writeln!(
                out,
                "{path}: … and {} more {} with this message in this file (lines {})\n",
                rest.len(),
                rule.id,
                at.join(", ")
            );
        }
    }
    out
}

fn fix_preview(text: &str, edits: &[super::edit::Edit]) -> String {
    edits
        .iter()
        .map(|e| {
            let old = &text[e.range];
            if old.is_empty() {
                format!("insert `{}`", e.content.trim())
            } else if e.content.is_empty() {
                format!("remove `{}`", shorten(old))
            } else {
                format!("`{}` → `{}`", shorten(old), shorten(&e.content))
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn shorten(s: &str) -> String {
    let one = s.lines().next().unwrap_or("").trim();
    if one.chars().count() > 50 || s.contains('\n') {
        format!("{}…", one.chars().take(50).collect::<String>())
    } else {
        one.to_string()
    }
}

/// A unified diff (3 lines of context) with `a/` and `b/` headers, as `git apply` takes it.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// One finding in machine-readable form (`--output-format json`).
#[derive(Serialize)]
pub struct JsonDiagnostic<'a> {
    pub path: &'a str,
    pub rule: &'a str,
    pub message: &'a str,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub fix_class: &'static str,
    pub fix_applied: bool,
    pub advice: Option<&'a str>,
    pub note: Option<&'a str>,
    pub edits: Vec<JsonEdit>,
}

#[derive(Serialize)]
pub struct JsonEdit {
    pub start: u32,
    pub end: u32,
    pub content: String,
}

pub fn json_diagnostics<'a>(
    path: &'a str,
    text: &str,
    diags: &'a [Diagnostic],
    rules: &'a RuleSet,
    required: FixClass,
) -> Vec<JsonDiagnostic<'a>> {
    let index = LineIndex::new(text);
    diags
        .iter()
        .map(|d| {
            let rule = &rules.rules[d.rule];
            let (line, column) = index.line_col(text, d.range.start());
            let (end_line, end_column) = index.line_col(text, d.range.end());
            JsonDiagnostic {
                path,
                rule: &rule.id,
                message: &d.message,
                line,
                column,
                end_line,
                end_column,
                fix_class: d
                    .fix
                    .as_ref()
                    .map(|f| f.applicability)
                    .unwrap_or(FixClass::Manual)
                    .as_str(),
                fix_applied: d.fix.as_ref().is_some_and(|f| f.applies(required)),
                advice: rule.advice.as_deref(),
                note: d.note.as_deref(),
                edits: d
                    .fix
                    .iter()
                    .flat_map(|f| &f.edits)
                    .map(|e| JsonEdit {
                        start: e.range.start().into(),
                        end: e.range.end().into(),
                        content: e.content.clone(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Location of a byte offset as `line:col`, for error messages.
pub fn location(text: &str, range: TextRange) -> String {
    let (l, c) = LineIndex::new(text).line_col(text, range.start());
    format!("{l}:{c}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let t = "ab\ncdé f\n";
        let ix = LineIndex::new(t);
        assert_eq!(ix.line_col(t, TextSize::from(0)), (1, 1));
        assert_eq!(ix.line_col(t, TextSize::from(4)), (2, 2));
        assert_eq!(ix.line_col(t, TextSize::from(7)), (2, 4));
        assert_eq!(ix.line_text(t, 2), "cdé f");
    }

    #[test]
    fn repetitive_findings_are_grouped_unless_quiet() {
        let rules = RuleSet::builtin();
        let rule = rules.rules.iter().position(|r| r.id == "DEV017").unwrap();
        let text = "x = 1\n".repeat(8);
        let diags: Vec<Diagnostic> = (0..8u32)
            .map(|i| Diagnostic {
                rule,
                range: TextRange::new(TextSize::from(i * 6), TextSize::from(i * 6 + 1)),
                message: "same".into(),
                fix: None,
                note: None,
            })
            .collect();
        let full = diagnostics_text_grouped("a.py", &text, &diags, &rules, FixClass::Safe, true);
        let all = diagnostics_text("a.py", &text, &diags, &rules, FixClass::Safe, true);
        assert_eq!(all.matches(": DEV017 same").count(), 8, "{all}");
        assert_eq!(full.matches(": DEV017 same").count(), GROUP_SHOWN, "{full}");
        assert!(
            full.contains(
                "a.py: … and 5 more DEV017 with this message in this file (lines 4, 5, 6, 7, 8)"
            ),
            "{full}"
        );
        let quiet = diagnostics_text_grouped("a.py", &text, &diags, &rules, FixClass::Safe, false);
        assert_eq!(quiet.lines().count(), 8, "{quiet}");
        let few = diagnostics_text_grouped(
            "a.py",
            &text,
            &diags[..GROUP_OVER],
            &rules,
            FixClass::Safe,
            true,
        );
        assert_eq!(few.matches(": DEV017 same").count(), GROUP_OVER);
    }

    #[test]
    fn converted_share_counts_revealed_and_absorbed() {
        let row = |found, revealed, fixed, left, absorbed| StatRow {
            found,
            revealed,
            fixed,
            left,
            absorbed,
            ..StatRow::default()
        };
        assert_eq!(row(10, 5, 13, 2, 0).converted(), Some(86.7));
        assert_eq!(row(30, 0, 20, 8, 2).converted(), Some(73.3));
        assert_eq!(row(2, 0, 2, 0, 0).converted(), Some(100.0));
        assert_eq!(row(2000, 0, 1999, 1, 0).converted(), Some(99.9));
        assert_eq!(row(2000, 0, 1, 1999, 0).converted(), Some(0.1));
        assert_eq!(row(4, 0, 0, 4, 0).converted(), Some(0.0));
        assert_eq!(row(0, 0, 0, 0, 0).converted(), None);
    }

    #[test]
    fn diff_has_git_headers() {
        let d = unified_diff("x.py", "a\nb\n", "a\nc\n");
        assert!(d.starts_with("--- a/x.py\n+++ b/x.py\n@@"), "{d}");
        assert!(d.contains("-b\n+c\n"));
    }
}

/// The `--statistics` counts over all files, by rule id (see [`Outcome`](super::Outcome)).
#[derive(Debug, Default)]
pub struct Counts {
    pub found: BTreeMap<String, usize>,
    pub revealed: BTreeMap<String, usize>,
    pub fixed: BTreeMap<String, usize>,
    pub left: BTreeMap<String, usize>,
    pub absorbed: BTreeMap<String, usize>,
}

/// One row of `--statistics`: a rule or a family, with its counts over all files.
/// `found + revealed = fixed + left + absorbed` on every row.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StatRow {
    /// Rule id, family prefix, or "total".
    pub name: String,
    /// Findings in the input (the ones listed).
    pub found: usize,
    /// Findings a fix revealed: a nested use matched once the outer one was rewritten, or
    /// (XLA001) a `torch_xla` import removed because nothing used it any more.
    pub revealed: usize,
    /// Fixes applied (or that would be applied).
    pub fixed: usize,
    /// Findings left on the result: manual work, or unsafe fixes not enabled.
    pub left: usize,
    /// Findings gone without a fix of their own: another fix removed or rewrote their code.
    pub absorbed: usize,
    /// The share converted, hipify-style: `(fixed + absorbed) / (found + revealed)` in percent,
    /// to one decimal; `None` (JSON `null`) when there was nothing to convert. See
    /// [`StatRow::converted`].
    pub converted_percent: Option<f64>,
}

impl StatRow {
    /// `(fixed + absorbed) / (found + revealed)` in percent, to one decimal: every finding that
    /// is gone from the result (fixed, or its code rewritten by another fix) over every finding
    /// (listed or revealed). Not `fixed / found`, which passes 100 % when fixes reveal findings
    /// (a `torch_xla` import retired once nothing uses it). 100.0 only when nothing is left and
    /// 0.0 only when nothing was converted (99.96 % shows as 99.9).
    pub fn converted(&self) -> Option<f64> {
        let all = self.found + self.revealed;
        let done = (self.fixed + self.absorbed).min(all);
        (all > 0).then(|| {
            let p = (done as f64 * 1000.0 / all as f64).round() / 10.0;
            if done < all { p.min(99.9) } else { p }.max(if done > 0 { 0.1 } else { 0.0 })
        })
    }
}

/// Per-rule rows (in rule order), per-family rows (in family order) and the total.
pub fn statistics(rules: &RuleSet, c: &Counts) -> (Vec<StatRow>, Vec<StatRow>, StatRow) {
    let get = |m: &BTreeMap<String, usize>, k: &str| m.get(k).copied().unwrap_or(0);
    let mut by_rule: Vec<StatRow> = vec![];
    let mut by_family: Vec<StatRow> = vec![];
    let mut total = StatRow {
        name: "total".into(),
        ..StatRow::default()
    };
    for r in &rules.rules {
        if by_rule.iter().any(|x| x.name == r.id) {
            continue;
        }
        let row = StatRow {
            name: r.id.clone(),
            found: get(&c.found, &r.id),
            revealed: get(&c.revealed, &r.id),
            fixed: get(&c.fixed, &r.id),
            left: get(&c.left, &r.id),
            absorbed: get(&c.absorbed, &r.id),
            converted_percent: None,
        };
        if row.found + row.revealed + row.fixed + row.left + row.absorbed == 0 {
            continue;
        }
        let fam = match by_family.iter_mut().find(|f| f.name == r.family) {
            Some(f) => f,
            None => {
                by_family.push(StatRow {
                    name: r.family.clone(),
                    ..StatRow::default()
                });
                by_family.last_mut().expect("just pushed")
            }
        };
        for acc in [fam, &mut total] {
            acc.found += row.found;
            acc.revealed += row.revealed;
            acc.fixed += row.fixed;
            acc.left += row.left;
            acc.absorbed += row.absorbed;
        }
        by_rule.push(row);
    }
    for row in by_rule
        .iter_mut()
        .chain(by_family.iter_mut())
        .chain(std::iter::once(&mut total))
    {
        row.converted_percent = row.converted();
    }
    (by_rule, by_family, total)
}

const STAT_HEADER: &str = "   found revealed    fixed     left absorbed";

fn stat_counts(r: &StatRow) -> String {
    format!(
        "{:>8} {:>8} {:>8} {:>8} {:>8}",
        r.found, r.revealed, r.fixed, r.left, r.absorbed
    )
}

/// The `--statistics` table.
pub fn statistics_text(
    rules: &RuleSet,
    rows: &(Vec<StatRow>, Vec<StatRow>, StatRow),
    to: crate::port::Target,
) -> String {
    let (by_rule, by_family, total) = rows;
    let mut s = String::new();
    let _ = writeln!(s, "{:<8}{STAT_HEADER}  fix     name", "rule");
    for r in by_rule {
        let rule = rules.get(&r.name);
        let (fix, name) = rule
            .first()
            .map(|x| (x.fix_class(to).as_str(), x.name.as_str()))
            .unwrap_or(("", ""));
        let _ = writeln!(s, "{:<8}{}  {fix:<7} {name}", r.name, stat_counts(r));
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "{:<8}{STAT_HEADER} converted", "family");
    for r in by_family.iter().chain(std::iter::once(total)) {
        let pct = r
            .converted_percent
            .map_or("-".to_string(), |p| format!("{p:.1}%"));
        let _ = writeln!(s, "{:<8}{} {pct:>9}", r.name, stat_counts(r));
    }
    let _ = writeln!(
        s,
        "\nfound + revealed = fixed + left + absorbed (revealed: a fix exposed it; absorbed: another fix removed its code)"
    );
    let _ = writeln!(
        s,
        "converted = (fixed + absorbed) / (found + revealed): the share that needs no more work"
    );
    s
}
