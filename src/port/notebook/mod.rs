//! Jupyter notebooks (`.ipynb`) in `tpuport migrate`.
//!
//! The code cells are migrated together as one module, as a kernel runs them ([`cells`]), so
//! an import in the first cell resolves names in the fifth, and an import the rewrite adds goes
//! to the cell that holds the imports. Only the `source` of code cells changes, and only the
//! lines that change: metadata, outputs, execution counts, markdown and raw cells and the JSON
//! layout stay byte-identical ([`json`]). Findings are located as `PATH:cell N:LINE:COL`, N
//! counting every cell of the notebook from 1 and LINE the line within that cell.

mod cells;
mod json;

use std::path::Path;

use ruff_text_size::{TextRange, TextSize};
use serde_json::Value;

use super::diagnostic::Diagnostic;
use super::files::FileIssue;
use super::render::{self, LineIndex};
use super::{Outcome, RuleIndex, RuleSet, Settings, migrate_source_at};

/// Whether `path` is a notebook (by its extension).
pub fn is_notebook(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "ipynb")
}

/// What to render.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// JSON findings instead of text.
    pub json: bool,
    /// Text findings.
    pub findings: bool,
    /// The diff of the notebook file.
    pub diff: bool,
    /// Source lines and advice under each text finding (not `--quiet`).
    pub show_source: bool,
}

/// The result for one notebook, ready for the driver.
#[derive(Default)]
pub struct Report {
    /// `None` when the notebook could not be read; its `output` is the new notebook file.
    pub outcome: Option<Outcome>,
    pub issues: Vec<FileIssue>,
    pub text: String,
    pub json: Vec<Value>,
    /// Findings with an unsafe fix that is not enabled.
    pub hidden_unsafe: usize,
    /// The findings located in the notebook file itself (the JSON text), without their edits:
    /// for outputs that point into files (SARIF, GitHub annotations).
    pub in_file: Vec<Diagnostic>,
    /// What the migration left, for the program judgement: a notebook with code is a program
    /// (set AC: two notebooks picking `"cuda"` only where CUDA is available ran on a TPU VM's
    /// CPU with no program-level word).
    pub state: Option<crate::port::program::FileState>,
}

/// A migrated notebook.
pub struct Migrated {
    /// Findings and counts over the code cells; `output` is the new notebook file.
    pub outcome: Outcome,
    module: cells::Module,
    nb: json::NotebookJson,
    /// Why a rewrite was refused (the notebook is left as it was).
    pub refused: Option<String>,
}

/// Migrate the notebook `text` (the file's content, without a BOM). The error says why the
/// file is not a notebook tpuport can read, and what to do.
pub fn migrate(
    path: &Path,
    text: &str,
    rules: &RuleSet,
    index: &RuleIndex,
    settings: Settings,
) -> Result<Migrated, String> {
    let nb = json::read(text)?;
    let python = nb
        .language
        .as_deref()
        .is_none_or(|l| l.eq_ignore_ascii_case("python"));
    let code: Vec<(usize, &str)> = nb
        .cells
        .iter()
        .enumerate()
        .filter(|(_, c)| python && c.cell_type == "code" && !cells::is_cell_magic(&c.source))
        .map(|(i, c)| (i, c.source.as_str()))
        .collect();
    let module = cells::build(&code);
    if code.is_empty() {
        let outcome = Outcome {
            skipped: true,
            ..Outcome::default()
        };
        return Ok(Migrated {
            outcome,
            module,
            nb,
            refused: None,
        });
    }
    let mut outcome = migrate_source_at(&module.text, Some(path), rules, index, settings);
    let mut refused = None;
    if let Some(new) = outcome.output.take() {
        match module.split(&new) {
            Ok(bodies) => {
                let new_cells: Vec<(usize, String)> =
                    module.parts.iter().map(|p| p.cell).zip(bodies).collect();
                let file = nb.with_sources(text, &new_cells);
                if file != text {
                    outcome.output = Some(file);
                }
            }
            Err(why) => {
                // Nothing is applied: every finding stays.
                outcome.applied.clear();
                outcome.revealed.clear();
                outcome.absorbed.clear();
                outcome.remaining = outcome.found.clone();
                refused = Some(why);
            }
        }
    }
    Ok(Migrated {
        outcome,
        module,
        nb,
        refused,
    })
}

impl Migrated {
    /// `cell N:LINE:COL` of a byte offset in the module.
    pub fn location(&self, offset: TextSize) -> String {
        let part = &self.module.parts[self.module.part_at(usize::from(offset))];
        let cell_text = &self.module.text[part.start..part.end];
        let off = usize::from(offset).clamp(part.start, part.end) - part.start;
        let (line, col) =
            LineIndex::new(cell_text).line_col(cell_text, TextSize::try_from(off).unwrap());
        format!("cell {}:{line}:{col}", part.cell + 1)
    }

    /// A byte offset in the module as a byte offset in the notebook file `text`: inside the
    /// JSON string that holds the line.
    fn file_offset(&self, text: &str, offset: TextSize) -> TextSize {
        let part = &self.module.parts[self.module.part_at(usize::from(offset))];
        let masked = &self.module.text[part.start..part.end];
        let off = usize::from(offset).clamp(part.start, part.end) - part.start;
        let orig = part.original_offset(masked, off);
        let cell = &self.nb.cells[part.cell];
        let line_start = part.original[..orig].rfind('\n').map_or(0, |i| i + 1);
        let line = part.original[..orig].matches('\n').count();
        let escaped = |s: &str| serde_json::to_string(s).map_or(0, |j| j.len() - 2);
        let at = match &cell.items {
            Some(items)
                if line < items.len()
                    && items.len() == part.original.split_inclusive('\n').count() =>
            {
                items[line].start + 1 + escaped(&part.original[line_start..orig])
            }
            _ => cell.span.start + 1 + escaped(&part.original[..orig]),
        };
        TextSize::try_from(at.min(text.len())).unwrap()
    }

    /// The findings located in the notebook file `text`, without their edits.
    pub fn in_file(&self, text: &str) -> Vec<Diagnostic> {
        self.outcome
            .diagnostics
            .iter()
            .map(|d| {
                let mut d = d.clone();
                let start = self.file_offset(text, d.range.start());
                let end = self.file_offset(text, d.range.end()).max(start);
                d.range = TextRange::new(start, end);
                if let Some(f) = d.fix.as_mut() {
                    f.edits.clear();
                }
                d
            })
            .collect()
    }

    /// The findings of each cell, with ranges (and fix edits) made relative to the cell's
    /// text; edits outside the cell are left out. With each cell: its 1-based number, its
    /// masked text in the module, and the part.
    fn by_cell(&self) -> Vec<(usize, &str, &cells::Part, Vec<Diagnostic>)> {
        let mut out: Vec<(usize, &str, &cells::Part, Vec<Diagnostic>)> = vec![];
        for d in &self.outcome.diagnostics {
            let i = self.module.part_at(usize::from(d.range.start()));
            let part = &self.module.parts[i];
            let d = shift(d, part.start, part.end);
            match out.last_mut() {
                Some(last) if last.2.cell == part.cell => last.3.push(d),
                _ => out.push((
                    part.cell + 1,
                    &self.module.text[part.start..part.end],
                    part,
                    vec![d],
                )),
            }
        }
        out
    }
}

fn shift(d: &Diagnostic, start: usize, end: usize) -> Diagnostic {
    let to_cell = |r: TextRange| {
        let s = usize::from(r.start()).clamp(start, end) - start;
        let e = usize::from(r.end()).clamp(start, end) - start;
        TextRange::new(
            TextSize::try_from(s).unwrap(),
            TextSize::try_from(e.max(s)).unwrap(),
        )
    };
    let inside = |r: TextRange| usize::from(r.start()) >= start && usize::from(r.end()) <= end;
    let mut d = d.clone();
    d.range = to_cell(d.range);
    if let Some(f) = d.fix.as_mut() {
        f.edits.retain(|e| inside(e.range));
        for e in &mut f.edits {
            e.range = to_cell(e.range);
        }
    }
    d
}

/// Migrate one notebook and render what `view` asks for.
pub fn process(
    path: &Path,
    display: &str,
    text: &str,
    rules: &RuleSet,
    index: &RuleIndex,
    settings: Settings,
    view: View,
) -> Report {
    let issue = |location: Option<String>, message: String| FileIssue {
        path: path.to_path_buf(),
        location,
        message,
    };
    let mut report = Report::default();
    let m = match migrate(path, text, rules, index, settings) {
        Ok(m) => m,
        Err(e) => {
            report
                .issues
                .push(issue(None, format!("{e}; nothing was written")));
            return report;
        }
    };
    let required = settings.required();
    report
        .issues
        .extend(m.outcome.issues(path, |r| m.location(r.start())));
    if let Some(why) = &m.refused {
        report.issues.push(issue(
            None,
            format!(
                "internal error: {why}; the notebook was left untouched. Please report this with the notebook, or skip the rules involved with --ignore"
            ),
        ));
    }
    report.hidden_unsafe = m.outcome.hidden_unsafe(required);
    for (n, cell_text, part, diags) in m.by_cell() {
        if view.json {
            for d in render::json_diagnostics(display, cell_text, &diags, rules, required) {
                let mut v = serde_json::to_value(d).unwrap_or_default();
                // Edits as byte offsets into the cell's source, as the notebook holds it.
                if let Some(edits) = v.get_mut("edits").and_then(Value::as_array_mut) {
                    for e in edits {
                        for k in ["start", "end"] {
                            if let Some(o) = e[k].as_u64() {
                                e[k] = part.original_offset(cell_text, o as usize).into();
                            }
                        }
                    }
                }
                v["cell"] = n.into();
                report.json.push(v);
            }
        } else if view.findings {
            report.text.push_str(&render::diagnostics_text_grouped(
                &format!("{display}:cell {n}"),
                cell_text,
                &diags,
                rules,
                required,
                view.show_source,
            ));
        }
    }
    if view.diff
        && !view.json
        && let Some(new) = &m.outcome.output
    {
        report
            .text
            .push_str(&render::unified_diff(display, text, new));
    }
    report.in_file = m.in_file(text);
    if !m.outcome.skipped {
        let mut state = crate::port::program::state_of(
            path,
            m.module.text.clone(),
            &m.outcome,
            rules,
            required,
        );
        // A notebook runs as a program; its lines are the code cells' run together, which
        // name no place in the file: the rule alone is shown.
        state.program = true;
        for l in &mut state.left {
            l.line = 0;
        }
        report.state = Some(state);
    }
    report.outcome = Some(m.outcome);
    report
}

#[cfg(test)]
mod tests;
