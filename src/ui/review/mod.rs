//! `tpuport migrate -i`: the review screen, one proposed fix at a time. The fixes on offer,
//! their diffs and the writing come from [`crate::port::review`]; [`app`] is the state and what
//! keys do, [`draw`] the widgets; this module drives them: the terminal, the keys, `$EDITOR`,
//! and at the end writing the accepted fixes (each changed file atomically, once the review is
//! over) and printing the summary.

pub mod app;
pub mod draw;

use std::collections::{BTreeMap, HashMap};
use std::io::{IsTerminal, Write};
use std::process::Command;

use anyhow::{Context, Result, bail};
use crossterm::event::{self, Event, KeyEventKind};

use self::app::{Action, Review};
use self::draw::View;
use super::terminal::TerminalGuard;
use crate::port::driver::Options;
use crate::port::edit::Fix;
use crate::port::review::{self, FileResult, Plan, Reviewer};
use crate::port::rules::RuleSet;

/// Review the fixes of `opts.paths` (as `--write` would apply them), write the accepted ones,
/// print the summary; the exit code is `--write`'s.
pub fn run(rules: &RuleSet, opts: &Options) -> Result<u8> {
    if !std::io::stdout().is_terminal() {
        bail!(
            "-i/--interactive shows a review screen and needs a terminal (stdout is not one); use --diff to see the fixes or --write to apply them"
        );
    }
    let reviewer = Reviewer::new(rules, opts);
    let plan = reviewer.plan();
    let mut app = Review::new(plan.proposals.iter().map(|p| p.rule.clone()).collect());
    let mut edited: BTreeMap<usize, Fix> = BTreeMap::new();
    if !plan.proposals.is_empty() {
        screen(&reviewer, &plan, &mut app, &mut edited)?;
    }
    let choices = review::choices(&plan, &app.decisions, &edited);
    let results: Vec<FileResult> = plan
        .files
        .iter()
        .zip(&choices)
        .map(|(f, c)| reviewer.finish_file(f, c))
        .collect();
    let mut out = std::io::stdout().lock();
    if !opts.quiet {
        for w in &plan.warnings {
            writeln!(out, "warning: {w}")?;
        }
    }
    if plan.proposals.is_empty() {
        writeln!(out, "no fixes to review")?;
    } else if app.quit {
        writeln!(out, "review ended with q: the remaining fixes were skipped")?;
    }
    let (text, code) = review::summary(&plan, &app.decisions, &results);
    out.write_all(text.as_bytes())?;
    Ok(code)
}

/// The screen until every fix is decided or `q`; the terminal is given back on every way out.
fn screen(
    reviewer: &Reviewer,
    plan: &Plan,
    app: &mut Review,
    edited: &mut BTreeMap<usize, Fix>,
) -> Result<()> {
    let mut diffs: HashMap<usize, String> = HashMap::new();
    let mut docs: HashMap<String, String> = HashMap::new();
    let mut guard = enter()?;
    loop {
        let i = app.current;
        let p = &plan.proposals[i];
        let file = &plan.files[p.file];
        let diff = diffs
            .entry(i)
            .or_insert_with(|| reviewer.preview(file, p.diag, edited.get(&i)));
        let doc = docs
            .entry(p.rule.clone())
            .or_insert_with(|| reviewer.doc(&p.rule));
        let view = View::of(plan, p, diff, doc, edited.contains_key(&i));
        guard.terminal.draw(|f| draw::draw(f, app, &view))?;
        let key = match event::read().context("cannot read the keyboard")? {
            Event::Key(k) if k.kind != KeyEventKind::Release => k,
            _ => continue,
        };
        match app.key(key) {
            Action::Redraw => {}
            Action::Done => return Ok(()),
            Action::Edit(i) => {
                drop(guard);
                let saved = edit(plan, i, edited.get(&i));
                guard = enter()?;
                match saved {
                    Ok(Some(fix)) => {
                        edited.insert(i, fix);
                        diffs.remove(&i);
                        if app.edited(i) == Action::Done {
                            return Ok(());
                        }
                    }
                    Ok(None) => app.note = Some("not edited (the file was not saved)".into()),
                    Err(e) => app.note = Some(format!("cannot edit: {e:#}")),
                }
            }
        }
    }
}

fn enter() -> Result<TerminalGuard> {
    TerminalGuard::enter().context("tpuport migrate -i needs a terminal; use --diff or --write")
}

/// Put the lines fix `i` touches, fixed, in a temp file, open `$VISUAL`/`$EDITOR` (else `vi`)
/// on it, and make the fix that writes what was saved; None when it was not saved.
fn edit(plan: &Plan, i: usize, current: Option<&Fix>) -> Result<Option<Fix>> {
    let p = &plan.proposals[i];
    let file = &plan.files[p.file];
    let original = review::fix_of(plan, p).context("no fix")?;
    let (span, mut text) = review::edit_span(file, current.unwrap_or(original));
    if let Some(c) = current {
        text = c.edits.first().map(|e| e.content.clone()).unwrap_or(text);
    }
    text.push('\n');
    let mut tmp = tempfile::Builder::new()
        .prefix("tpuport-fix-")
        .suffix(".py")
        .tempfile()?;
    tmp.write_all(text.as_bytes())?;
    tmp.flush()?;
    let before = std::fs::metadata(tmp.path())?.modified().ok();
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(tmp.path())
        .status()
        .with_context(|| format!("cannot start the editor `{editor}`"))?;
    if !status.success() {
        bail!("the editor `{editor}` exited with {status}");
    }
    let saved = std::fs::read_to_string(tmp.path())?;
    let after = std::fs::metadata(tmp.path())?.modified().ok();
    if saved == text && before == after {
        return Ok(None);
    }
    Ok(Some(review::edited_fix(original, span, &saved)))
}
