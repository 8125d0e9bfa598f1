//! `tpuport migrate`: run the rewriter over files in parallel, print findings and diffs in a
//! stable order, write results when asked, and sum up.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use rayon::prelude::*;

use super::diagnostic::UNDECLARED_TORCH;
use super::files::{self, FileIssue};
use super::notebook;
use super::render;
use super::{Outcome, RuleIndex, RuleSet, Settings, migrate_source_at};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Findings plus a diff; nothing written.
    Preview,
    /// Only the diff (a patch on stdout).
    Diff,
    /// Only findings; exit 1 if anything would change or is reported.
    Check,
    /// Write the changes.
    Write,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// One SARIF 2.1.0 log (see [`sarif`](super::sarif)).
    Sarif,
    /// GitHub Actions workflow commands (see [`github`](super::github)).
    Github,
}

pub struct Options {
    pub paths: Vec<PathBuf>,
    pub mode: Mode,
    pub format: Format,
    pub settings: Settings,
    pub no_ignore: bool,
    pub max_file_size: u64,
    pub quiet: bool,
    /// Print counts per rule and per family (found, fixed, left) instead of findings and diffs.
    pub statistics: bool,
    /// `exclude` patterns of the configuration file, applied while walking folders.
    pub exclude: Option<super::config::Exclude>,
}

/// Exit statuses of `tpuport migrate`.
pub const EXIT_CLEAN: u8 = 0;
pub const EXIT_FINDINGS: u8 = 1;
pub const EXIT_ERROR: u8 = 2;

struct FileReport {
    outcome: Option<Outcome>,
    /// What the migration left, for the program it belongs to ([`super::program`]).
    state: Option<super::program::FileState>,
    issues: Vec<FileIssue>,
    /// Findings / diff, ready to print.
    text: String,
    json: Vec<serde_json::Value>,
    hidden_unsafe: usize,
}

#[derive(Default)]
struct Totals {
    scanned: usize,
    parsed: usize,
    /// Files a `# tpuport: ignore-file` comment exempts.
    ignored: usize,
    changed: usize,
    errors: usize,
    diagnostics: usize,
    counts: render::Counts,
    hidden_unsafe: usize,
    /// Fixes that keep the original beside them, or stay unsafe, for want of a declared torch.
    undeclared_torch: usize,
    /// Programs (entry scripts): ported whole, partly ported and blocked (reported: PRG001),
    /// not ported (their findings are all manual work), nothing to port.
    programs: [usize; 4],
}

/// Run `tpuport migrate`: findings, diffs or tables on stdout, errors and the summary on stderr.
pub fn run(rules: &RuleSet, opts: &Options) -> Result<u8> {
    // Not locked for the whole run: the progress bar draws on stderr from its own thread while
    // the files are processed (holding the lock here deadlocked it).
    run_to(rules, opts, &mut std::io::stdout(), &mut std::io::stderr())
}

/// [`run`] with its output going to `out` and its errors and summary to `err` (the fuzz harness
/// and tests read both).
pub fn run_to(
    rules: &RuleSet,
    opts: &Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8> {
    let start = Instant::now();
    let index = RuleIndex::new(rules);
    // What was learnt about the tree's programs in an earlier run (`--watch`) may be stale.
    super::texts::forget();
    super::program::forget();
    super::rewrite::forget();
    super::program::tree::set_run_roots(&opts.paths);
    let mut found = files::discover_with(&opts.paths, opts.no_ignore, opts.exclude.as_ref());
    // Project modules an ignore rule hid but the project imports (ignored.rs).
    let taken_back = if opts.no_ignore {
        vec![]
    } else {
        super::ignored::imported_but_ignored(&found, &opts.paths, opts.exclude.as_ref())
    };
    if !taken_back.is_empty() {
        found.files.extend(taken_back.iter().cloned());
        found.files.sort();
        found.files.dedup();
    }
    let bar = super::progress::Progress::start(found.files.len(), opts.quiet);
    super::program::tree::read_entries(&found.files);
    // Largest files first (no big file starts last, keeping one core busy alone); the reports
    // are put back in the files' order.
    let mut order: Vec<(u64, usize)> = (found.files.par_iter().enumerate())
        .map(|(i, p)| (std::fs::metadata(p).map_or(0, |m| m.len()), i))
        .collect();
    order.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut indexed: Vec<(usize, FileReport)> = order
        .par_iter()
        .map(|&(_, i)| {
            let r = process(&found.files[i], rules, &index, opts);
            bar.inc();
            (i, r)
        })
        .collect();
    indexed.sort_unstable_by_key(|(i, _)| *i);
    let mut reports: Vec<FileReport> = indexed.into_iter().map(|(_, r)| r).collect();
    // Gone before anything is printed (see `progress`).
    bar.clear();

    let mut totals = Totals::default();
    let mut json_all: Vec<serde_json::Value> = vec![];
    let mut issues: Vec<FileIssue> = found.issues;
    let states: Vec<super::program::FileState> =
        reports.iter_mut().filter_map(|r| r.state.take()).collect();
    for r in reports {
        totals.scanned += 1;
        totals.hidden_unsafe += r.hidden_unsafe;
        issues.extend(r.issues);
        if let Some(o) = &r.outcome {
            totals.undeclared_torch += o
                .diagnostics
                .iter()
                .filter(|d| d.fix.is_some())
                .filter(|d| {
                    d.note
                        .as_ref()
                        .is_some_and(|n| n.contains(UNDECLARED_TORCH))
                })
                .count();
            if !o.skipped {
                totals.parsed += 1;
            }
            if o.ignored {
                totals.ignored += 1;
            }
            if o.changed() {
                totals.changed += 1;
            }
            totals.diagnostics += o.diagnostics.len();
            let c = &mut totals.counts;
            for (sum, m) in [
                (&mut c.found, &o.found),
                (&mut c.revealed, &o.revealed),
                (&mut c.fixed, &o.applied),
                (&mut c.left, &o.remaining),
                (&mut c.absorbed, &o.absorbed),
            ] {
                for (k, v) in m {
                    *sum.entry(k.clone()).or_default() += v;
                }
            }
        }
        if opts.statistics {
            continue;
        }
        json_all.extend(r.json);
        if !r.text.is_empty() {
            out.write_all(r.text.as_bytes())?;
        }
    }
    program_findings(rules, &states, opts, &mut totals, &mut json_all, out)?;
    let mut bad: Vec<&PathBuf> = issues.iter().map(|i| &i.path).collect();
    bad.sort();
    bad.dedup();
    totals.errors = bad.len();
    if opts.statistics {
        let rows = render::statistics(rules, &totals.counts);
        match opts.format {
            // The command line refuses --statistics with sarif/github: a table is text or JSON.
            Format::Text | Format::Sarif | Format::Github => {
                out.write_all(render::statistics_text(rules, &rows, opts.settings.to).as_bytes())?
            }
            Format::Json => {
                let (by_rule, by_family, total) = &rows;
                let v = serde_json::json!({
                    "rules": by_rule,
                    "families": by_family,
                    "total": total,
                });
                serde_json::to_writer_pretty(&mut *out, &v)?;
                writeln!(out)?;
            }
        }
    } else if opts.format == Format::Json {
        serde_json::to_writer_pretty(&mut *out, &json_all)?;
        writeln!(out)?;
    } else if opts.format == Format::Sarif {
        let log = super::sarif::log(rules, json_all, &issues, &found.warnings, opts.settings.to);
        serde_json::to_writer_pretty(&mut *out, &log)?;
        writeln!(out)?;
    }
    out.flush()?;

    if !opts.quiet {
        for w in &found.warnings {
            writeln!(err, "warning: {w}")?;
        }
        if let Some(first) = taken_back.first() {
            let n = taken_back.len();
            let s = if n == 1 { "" } else { "s" };
            writeln!(
                err,
                "warning: {n} Python file{s} that an ignore rule (.gitignore) skips migrated too, because the project imports them (first: {}); name them in `exclude` to leave them out",
                first.display(),
            )?;
        }
        for (dir, n) in &found.hidden {
            let more = if *n >= files::HIDDEN_COUNT_CAP {
                "+"
            } else {
                ""
            };
            let s = if *n == 1 { "" } else { "s" };
            writeln!(
                err,
                "warning: {}: hidden folder with {n}{more} Python file{s} or notebook{s}, not migrated (hidden folders are skipped): name it on the command line, or pass --no-ignore",
                dir.display(),
            )?;
        }
    }
    for i in &issues {
        writeln!(err, "error: {i}")?;
    }
    if !opts.quiet {
        summary(err, &totals, opts, start.elapsed().as_secs_f64())?;
    }
    let findings = match opts.mode {
        Mode::Write => totals.counts.left.values().sum::<usize>() > 0,
        _ => totals.changed > 0 || totals.diagnostics > 0,
    };
    Ok(if totals.errors > 0 {
        EXIT_ERROR
    } else if findings {
        EXIT_FINDINGS
    } else {
        EXIT_CLEAN
    })
}

fn process(path: &Path, rules: &RuleSet, index: &RuleIndex, opts: &Options) -> FileReport {
    let mut report = FileReport {
        outcome: None,
        state: None,
        issues: vec![],
        text: String::new(),
        json: vec![],
        hidden_unsafe: 0,
    };
    let mut source = match files::read_source(path, opts.max_file_size) {
        Ok(s) => s,
        Err(e) => {
            report.issues.push(e);
            return report;
        }
    };
    let display = path.display().to_string();
    if notebook::is_notebook(path) {
        return notebook_report(path, &display, &source, rules, index, opts);
    }
    let outcome = migrate_text(path, &source, rules, index, opts);
    let required = opts.settings.required();
    report
        .issues
        .extend(outcome.issues(path, |r| render::location(&source.text, r)));
    report.hidden_unsafe = outcome.hidden_unsafe(required);
    match opts.format {
        Format::Json => {
            for d in render::json_diagnostics(
                &display,
                &source.text,
                &outcome.diagnostics,
                rules,
                required,
            ) {
                report
                    .json
                    .push(serde_json::to_value(d).unwrap_or_default());
            }
        }
        Format::Sarif => report.json.extend(super::sarif::results(
            &display,
            &source.text,
            &outcome.diagnostics,
            rules,
            required,
        )),
        Format::Github => report.text.push_str(&super::github::annotations(
            &display,
            &source.text,
            &outcome.diagnostics,
            rules,
            required,
        )),
        Format::Text => {
            if opts.mode != Mode::Diff {
                report.text.push_str(&render::diagnostics_text_grouped(
                    &display,
                    &source.text,
                    &outcome.diagnostics,
                    rules,
                    required,
                    !opts.quiet,
                ));
            }
            if matches!(opts.mode, Mode::Preview | Mode::Diff)
                && let Some(new) = &outcome.output
            {
                report
                    .text
                    .push_str(&render::unified_diff(&display, &source.text, new));
            }
        }
    }
    if opts.mode == Mode::Write
        && let Some(new) = &outcome.output
    {
        report.issues.extend(write_output(path, source.bom, new));
    }
    report.state = Some(super::program::state_of(
        path,
        std::mem::take(&mut source.text),
        &outcome,
        rules,
        required,
    ));
    report.outcome = Some(outcome);
    report
}

/// The programs of the run judged whole ([`super::program`]): a program that a TPU would still
/// stop at a CUDA reference the migration left gets one PRG001 finding on its entry script,
/// naming the places (unless PRG001 is not selected). Counted in the totals.
fn program_findings(
    rules: &RuleSet,
    states: &[super::program::FileState],
    opts: &Options,
    totals: &mut Totals,
    json_all: &mut Vec<serde_json::Value>,
    out: &mut dyn Write,
) -> Result<()> {
    use super::program::Verdict;
    let Some(index) = rules.rules.iter().position(|r| r.id == "PRG001") else {
        return Ok(());
    };
    let rule = &rules.rules[index];
    let required = opts.settings.required();
    for p in super::program::judge(states) {
        match p.verdict {
            Verdict::Whole => totals.programs[0] += 1,
            Verdict::NoCuda => totals.programs[3] += 1,
            // Nothing was ported, or part of it: PRG001 says so on the entry script either way
            // (set Z: unported programs whose `"cuda" if torch.cuda.is_available() else "cpu"`
            // stayed an unsafe fix ran on a TPU VM's CPU with no program-level word).
            Verdict::Blocked { partly } => {
                totals.programs[if partly { 1 } else { 2 }] += 1;
                *totals.counts.found.entry(rule.id.clone()).or_default() += 1;
                *totals.counts.left.entry(rule.id.clone()).or_default() += 1;
                totals.diagnostics += 1;
                if opts.statistics {
                    continue;
                }
                let dir = p.entry.parent().map(Path::to_path_buf).unwrap_or_default();
                let name = |f: &Path| super::program::tree::shown(f, &dir);
                let diags = [super::diagnostic::Diagnostic {
                    rule: index,
                    range: ruff_text_size::TextRange::default(),
                    message: rule.message.replace("{detail}", &p.reason(&name)),
                    fix: None,
                    note: None,
                }];
                let display = p.entry.display().to_string();
                let text = states
                    .iter()
                    .find(|s| s.path == p.entry)
                    .map_or("", |s| s.text.as_str());
                match opts.format {
                    Format::Json => {
                        for d in render::json_diagnostics(&display, text, &diags, rules, required) {
                            json_all.push(serde_json::to_value(d).unwrap_or_default());
                        }
                    }
                    Format::Sarif => json_all.extend(super::sarif::results(
                        &display, text, &diags, rules, required,
                    )),
                    Format::Github => out.write_all(
                        super::github::annotations(&display, text, &diags, rules, required)
                            .as_bytes(),
                    )?,
                    Format::Text if opts.mode != Mode::Diff => out.write_all(
                        render::diagnostics_text_grouped(
                            &display,
                            text,
                            &diags,
                            rules,
                            required,
                            !opts.quiet,
                        )
                        .as_bytes(),
                    )?,
                    Format::Text => {}
                }
            }
        }
    }
    Ok(())
}

/// The one migration of a Python file's text, for every mode (`migrate -i` offers the fixes
/// of this outcome and re-runs it with the person's choice, see [`super::review`]).
pub(crate) fn migrate_text(
    path: &Path,
    source: &files::Source,
    rules: &RuleSet,
    index: &RuleIndex,
    opts: &Options,
) -> Outcome {
    migrate_source_at(&source.text, Some(path), rules, index, opts.settings)
}

/// Write a file's new text (with its BOM back); the issue if that failed.
pub(crate) fn write_output(path: &Path, bom: bool, new: &str) -> Option<FileIssue> {
    let mut bytes = Vec::with_capacity(new.len() + 3);
    if bom {
        bytes.extend_from_slice(b"\xEF\xBB\xBF");
    }
    bytes.extend_from_slice(new.as_bytes());
    files::write_atomic(path, &bytes).err().map(|e| FileIssue {
        path: path.to_path_buf(),
        location: None,
        message: format!("cannot write: {e}; the file was left as it was"),
    })
}

/// [`process`] for a Jupyter notebook (see [`notebook`]).
fn notebook_report(
    path: &Path,
    display: &str,
    source: &files::Source,
    rules: &RuleSet,
    index: &RuleIndex,
    opts: &Options,
) -> FileReport {
    let text_out = opts.format == Format::Text;
    let view = notebook::View {
        json: opts.format == Format::Json,
        findings: text_out && opts.mode != Mode::Diff,
        diff: text_out && matches!(opts.mode, Mode::Preview | Mode::Diff),
        show_source: !opts.quiet,
    };
    let nb = notebook::process(
        path,
        display,
        &source.text,
        rules,
        index,
        opts.settings,
        view,
    );
    let mut report = FileReport {
        outcome: None,
        state: nb.state,
        issues: nb.issues,
        text: nb.text,
        json: nb.json,
        hidden_unsafe: nb.hidden_unsafe,
    };
    let required = opts.settings.required();
    match opts.format {
        Format::Sarif => report.json.extend(super::sarif::results(
            display,
            &source.text,
            &nb.in_file,
            rules,
            required,
        )),
        Format::Github => report.text.push_str(&super::github::annotations(
            display,
            &source.text,
            &nb.in_file,
            rules,
            required,
        )),
        Format::Text | Format::Json => {}
    }
    if opts.mode == Mode::Write
        && let Some(new) = nb.outcome.as_ref().and_then(|o| o.output.as_ref())
    {
        report.issues.extend(write_output(path, source.bom, new));
    }
    report.outcome = nb.outcome;
    report
}

fn summary(w: &mut dyn Write, t: &Totals, opts: &Options, secs: f64) -> std::io::Result<()> {
    let c = &t.counts;
    let fixed: usize = c.fixed.values().sum();
    let left: usize = c.left.values().sum();
    let absorbed: usize = c.absorbed.values().sum();
    let verb = if opts.mode == Mode::Write {
        "changed"
    } else {
        "would change"
    };
    writeln!(w)?;
    writeln!(
        w,
        "tpuport migrate: {} files scanned ({} parsed), {} {verb}, {} with errors, in {:.2}s",
        t.scanned, t.parsed, t.changed, t.errors, secs
    )?;
    if t.ignored > 0 {
        writeln!(w, "  skipped by `# tpuport: ignore-file`: {}", t.ignored)?;
    }
    let [whole, blocked, manual, none] = t.programs;
    let all = whole + blocked + manual + none;
    if all > 0 {
        writeln!(
            w,
            "  programs: {all} entry script{}: {whole} ported whole, {blocked} partly ported and blocked on a TPU (PRG001), {manual} left for manual work, {none} with nothing to port",
            if all == 1 { "" } else { "s" }
        )?;
    }
    if fixed > 0 {
        let word = if opts.mode == Mode::Write {
            "applied"
        } else {
            "to apply"
        };
        writeln!(w, "  fixes {word}: {fixed}  ({})", by_rule(&c.fixed))?;
    }
    if left > 0 {
        writeln!(w, "  left for manual work: {left}  ({})", by_rule(&c.left))?;
    }
    if absorbed > 0 {
        writeln!(
            w,
            "  absorbed by other fixes: {absorbed}  ({})",
            by_rule(&c.absorbed)
        )?;
    }
    if t.hidden_unsafe > 0 && !opts.settings.unsafe_fixes {
        writeln!(
            w,
            "  {} unsafe fixes hidden: review them and enable with --unsafe-fixes",
            t.hidden_unsafe
        )?;
    }
    if t.undeclared_torch > 0 {
        writeln!(
            w,
            "  {} fixes keep the original beside them or stay unsafe: the project declares no torch \
             version (`--min-torch 2.11`, or `torch>=2.11` in its requirements, writes the portable \
             forms alone)",
            t.undeclared_torch
        )?;
    }
    if fixed > 0 && matches!(opts.mode, Mode::Preview | Mode::Check) {
        writeln!(w, "  run with --write to apply the fixes")?;
    }
    Ok(())
}

fn by_rule(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} ×{v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
