//! The data of `tpuport migrate -i` (the screen is `ui::review`): the files and the fixes on
//! offer, one fix's own diff, the result of a person's choice for a file, writing it, and the
//! summary.
//!
//! The fixes on offer are exactly those `--write` would apply: the findings of the same
//! migration ([`driver::migrate_text`]) whose fix applies at the run's trust level. The result
//! of a choice comes from the same fix loop ([`migrate_chosen`]), run with only the accepted
//! fixes; a fix's diff is that loop run with that fix alone. Notebooks are not offered (the
//! summary names them: use `--diff` or `--write` for them).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use ruff_text_size::TextRange;

use super::choice::Choices;
use super::driver::{self, EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, Options};
use super::edit::{self, Edit, Fix};
use super::files::{self, FileIssue};
use super::render::{self, LineIndex};
use super::{Outcome, RuleIndex, RuleSet, migrate_chosen};

/// One fix on offer.
#[derive(Debug, Clone)]
pub struct Proposal {
    /// Index into [`Plan::files`].
    pub file: usize,
    /// Index into that file's `outcome.diagnostics`.
    pub diag: usize,
    pub rule: String,
    /// The rule's name.
    pub title: String,
    pub message: String,
    pub line: usize,
    pub column: usize,
    /// Offered because of `--unsafe-fixes`.
    pub unsafe_fix: bool,
}

/// One Python file with fixes on offer.
pub struct FilePlan {
    pub path: PathBuf,
    /// The path as given (as the other modes print it).
    pub display: String,
    pub source: files::Source,
    pub outcome: Outcome,
}

/// Everything on offer, in file order then position.
#[derive(Default)]
pub struct Plan {
    pub files: Vec<FilePlan>,
    pub proposals: Vec<Proposal>,
    pub issues: Vec<FileIssue>,
    pub warnings: Vec<FileIssue>,
    /// Notebooks found (not reviewed one fix at a time).
    pub notebooks: Vec<PathBuf>,
    /// Findings with no fix at this trust level, by rule id: manual work.
    pub manual: BTreeMap<String, usize>,
    /// Unsafe fixes not offered (no `--unsafe-fixes`).
    pub hidden_unsafe: usize,
    pub scanned: usize,
}

/// The rules and options of one `migrate -i` run.
pub struct Reviewer<'a> {
    pub rules: &'a RuleSet,
    pub opts: &'a Options,
    index: RuleIndex,
}

/// What happened to one file once the review ended.
#[derive(Debug, Default)]
pub struct FileResult {
    /// Accepted fixes that went in.
    pub applied: BTreeSet<usize>,
    /// Accepted fixes that did not, with why.
    pub not_applied: Vec<(usize, String)>,
    pub written: bool,
    pub issue: Option<FileIssue>,
}

impl<'a> Reviewer<'a> {
    pub fn new(rules: &'a RuleSet, opts: &'a Options) -> Reviewer<'a> {
        Reviewer {
            rules,
            opts,
            index: RuleIndex::new(rules),
        }
    }

    /// Read and migrate every file (in order), listing the fixes `--write` would apply.
    pub fn plan(&self) -> Plan {
        let found = files::discover_with(
            &self.opts.paths,
            self.opts.no_ignore,
            self.opts.exclude.as_ref(),
        );
        let mut plan = Plan {
            issues: found.issues,
            warnings: found.warnings,
            ..Plan::default()
        };
        let required = self.opts.settings.required();
        for path in found.files {
            plan.scanned += 1;
            if super::notebook::is_notebook(&path) {
                plan.notebooks.push(path);
                continue;
            }
            let source = match files::read_source(&path, self.opts.max_file_size) {
                Ok(s) => s,
                Err(e) => {
                    plan.issues.push(e);
                    continue;
                }
            };
            let outcome = driver::migrate_text(&path, &source, self.rules, &self.index, self.opts);
            plan.issues
                .extend(outcome.issues(&path, |r| render::location(&source.text, r)));
            plan.hidden_unsafe += outcome.hidden_unsafe(required);
            let lines = LineIndex::new(&source.text);
            let file = plan.files.len();
            for (diag, d) in outcome.diagnostics.iter().enumerate() {
                let rule = &self.rules.rules[d.rule];
                let offered = outcome.internal_error.is_none()
                    && d.fix.as_ref().is_some_and(|f| f.applies(required));
                if !offered {
                    if d.fix.as_ref().is_none_or(|f| !f.applies(required)) {
                        *plan.manual.entry(rule.id.clone()).or_default() += 1;
                    }
                    continue;
                }
                let (line, column) = lines.line_col(&source.text, d.range.start());
                plan.proposals.push(Proposal {
                    file,
                    diag,
                    rule: rule.id.clone(),
                    title: rule.name.clone(),
                    message: d.message.clone(),
                    line,
                    column,
                    unsafe_fix: d
                        .fix
                        .as_ref()
                        .is_some_and(|f| f.applicability < super::FixClass::Safe),
                });
            }
            let display = path.display().to_string();
            plan.files.push(FilePlan {
                path,
                display,
                source,
                outcome,
            });
        }
        plan
    }

    /// The diff of one fix alone (3 lines of context), as the fix loop makes it (with the
    /// import or helper it needs); `replaced` is the person's edit of it.
    pub fn preview(&self, f: &FilePlan, diag: usize, replaced: Option<&Fix>) -> String {
        let mut c = Choices::default();
        c.accepted.insert(diag);
        if let Some(r) = replaced {
            c.replaced.insert(diag, r.clone());
        }
        let (out, _) = self.run(f, &c);
        match out.output {
            Some(new) => render::unified_diff(&f.display, &f.source.text, &new),
            None => match out.internal_error {
                Some(e) => format!("this fix alone changes nothing: {e}\n"),
                None => "this fix alone changes nothing (it needs another one)\n".into(),
            },
        }
    }

    /// The text of `tpuport rule ID`.
    pub fn doc(&self, rule: &str) -> String {
        super::explain(self.rules, Some(rule), false).unwrap_or_else(|e| format!("{e:#}\n"))
    }

    fn run(&self, f: &FilePlan, c: &Choices) -> (Outcome, BTreeSet<usize>) {
        migrate_chosen(
            &f.source.text,
            Some(&f.path),
            self.rules,
            &self.index,
            self.opts.settings,
            Some(c),
        )
    }

    /// Apply a file's accepted fixes through the fix loop and write the file atomically (only
    /// if it is still as it was read).
    pub fn finish_file(&self, f: &FilePlan, c: &Choices) -> FileResult {
        let mut r = FileResult::default();
        if c.accepted.is_empty() {
            return r;
        }
        let (out, applied) = self.run(f, c);
        let missed: Vec<usize> = c.accepted.difference(&applied).copied().collect();
        if !missed.is_empty() {
            // Gone under --write too: another fix rewrote their code.
            let (_, all) = self.run(f, &Choices::all(f.outcome.diagnostics.len()));
            for i in missed {
                let why = if let Some(e) = &out.internal_error {
                    format!("the file was left as it was: {e}")
                } else if all.contains(&i) {
                    "it needs a fix that was skipped".to_string()
                } else {
                    "another accepted fix rewrote its code".to_string()
                };
                r.not_applied.push((i, why));
            }
        }
        r.applied = applied;
        let Some(new) = out.output.filter(|_| !r.applied.is_empty()) else {
            return r;
        };
        match files::read_source(&f.path, u64::MAX) {
            Ok(now) if now.text == f.source.text && now.bom == f.source.bom => {
                r.issue = driver::write_output(&f.path, f.source.bom, &new);
                r.written = r.issue.is_none();
            }
            _ => {
                r.issue = Some(FileIssue {
                    path: f.path.clone(),
                    location: None,
                    message: "changed on disk during the review; not written (run again)".into(),
                })
            }
        }
        r
    }
}

/// The lines a fix touches (without their final line break) and their text with the fix
/// applied: what `e` (edit) puts in the editor.
pub fn edit_span(f: &FilePlan, fix: &Fix) -> (TextRange, String) {
    let text = &f.source.text;
    let r = fix.range();
    let span = TextRange::new(
        edit::line_start(text, r.start()),
        edit::line_end(text, r.end()),
    );
    let mut inside: Vec<Edit> = fix
        .edits
        .iter()
        .filter(|e| span.contains_range(e.range))
        .cloned()
        .collect();
    for e in &mut inside {
        e.range -= span.start();
    }
    let after = edit::apply_edits(&text[span], inside.iter().collect());
    (span, after)
}

/// The fix that puts `saved` (what the person wrote in the editor) in place of the lines of
/// `span`; the final line break an editor adds is dropped.
pub fn edited_fix(original: &Fix, span: TextRange, saved: &str) -> Fix {
    let content = saved
        .strip_suffix("\r\n")
        .or_else(|| saved.strip_suffix('\n'))
        .unwrap_or(saved);
    Fix {
        edits: vec![Edit::replace(span, content)],
        applicability: original.applicability,
        imports: original.imports.clone(),
        exclusive: original.exclusive,
        why_unsafe: None,
    }
}

/// A person's decisions, per proposal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Pending,
    Accepted,
    Skipped,
}

/// The choices per file from the decisions (by proposal) and the edited fixes.
pub fn choices(plan: &Plan, decisions: &[Decision], edited: &BTreeMap<usize, Fix>) -> Vec<Choices> {
    let mut out = vec![Choices::default(); plan.files.len()];
    for (i, p) in plan.proposals.iter().enumerate() {
        if decisions.get(i) == Some(&Decision::Accepted) {
            out[p.file].accepted.insert(p.diag);
            if let Some(f) = edited.get(&i) {
                out[p.file].replaced.insert(p.diag, f.clone());
            }
        }
    }
    out
}

/// The summary after the screen, and the exit code (as `--write`'s: 1 with findings left).
pub fn summary(plan: &Plan, decisions: &[Decision], results: &[FileResult]) -> (String, u8) {
    let mut o = String::new();
    let mut accepted: BTreeMap<&str, usize> = BTreeMap::new();
    let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
    let mut missed = vec![];
    for (i, p) in plan.proposals.iter().enumerate() {
        let r = &results[p.file];
        let d = decisions.get(i).copied().unwrap_or(Decision::Pending);
        if d == Decision::Accepted && r.applied.contains(&p.diag) {
            *accepted.entry(&p.rule).or_default() += 1;
        } else if d == Decision::Accepted {
            let why = r.not_applied.iter().find(|(x, _)| *x == p.diag);
            let why = why.map_or("not applied", |(_, w)| w.as_str());
            missed.push(format!(
                "{}:{}:{}: {} not applied: {why}",
                plan.files[p.file].display, p.line, p.column, p.rule
            ));
        } else {
            *skipped.entry(&p.rule).or_default() += 1;
        }
    }
    let written: Vec<&str> = results
        .iter()
        .zip(&plan.files)
        .filter(|(r, _)| r.written)
        .map(|(_, f)| f.display.as_str())
        .collect();
    let _ = writeln!(
        o,
        "tpuport migrate -i: {} files scanned, {} changed{}",
        plan.scanned,
        written.len(),
        if written.is_empty() {
            String::new()
        } else {
            format!(" ({})", written.join(", "))
        }
    );
    let line = |o: &mut String, what: &str, m: &BTreeMap<&str, usize>| {
        let n: usize = m.values().sum();
        let by: Vec<String> = m.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
        let _ = writeln!(o, "  {what}: {n}  ({})", by.join(", "));
    };
    line(&mut o, "fixes accepted", &accepted);
    line(&mut o, "fixes skipped", &skipped);
    for m in &missed {
        let _ = writeln!(o, "  {m}");
    }
    let manual: BTreeMap<&str, usize> = plan.manual.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    if !manual.is_empty() {
        line(&mut o, "left for manual work", &manual);
    }
    if plan.hidden_unsafe > 0 {
        let _ = writeln!(
            o,
            "  {} unsafe fixes not offered: review them with --unsafe-fixes",
            plan.hidden_unsafe
        );
    }
    for n in &plan.notebooks {
        let _ = writeln!(
            o,
            "  {}: notebooks are not reviewed one fix at a time; use --diff or --write",
            n.display()
        );
    }
    let mut issues: Vec<String> = plan.issues.iter().map(|i| format!("error: {i}")).collect();
    issues.extend(
        results
            .iter()
            .flat_map(|r| &r.issue)
            .map(|i| format!("error: {i}")),
    );
    for i in &issues {
        let _ = writeln!(o, "{i}");
    }
    let left = !skipped.is_empty() || !missed.is_empty() || !manual.is_empty();
    let code = if !issues.is_empty() {
        EXIT_ERROR
    } else if left || plan.hidden_unsafe > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    };
    (o, code)
}

/// The fix a proposal offers.
pub fn fix_of<'p>(plan: &'p Plan, p: &Proposal) -> Option<&'p Fix> {
    plan.files[p.file].outcome.diagnostics[p.diag].fix.as_ref()
}
