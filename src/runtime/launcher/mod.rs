//! The parent side of `tpuport run` (no Python in this process).
//!
//! It spawns the worker (or `python -m tpuport_agent`) in its own process group with three
//! pipes: the script's stdout, its stderr, and the agent's events on fd 3 (`child`, `readers`).
//! It forwards the script's output, writes every event to the events file (one JSON object per
//! line, always ending with `run_end`: `sink`), forwards Ctrl-C (a second Ctrl-C kills) and
//! enforces `--timeout` (`supervise`), and maps how the child ended to an exit code (`exit`).
//! What the user sees while it runs is up to a [`RunObserver`] (`observer`): a line per step,
//! or the dashboard (`ui::live`, which also shows the script's output in its own pane); the
//! command line chooses. The runtime itself knows nothing of the dashboard.

mod child;
mod exit;
mod observer;
mod paths;
mod readers;
mod sink;
mod supervise;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::profile::event::{Event, RunStart};
pub use child::EVENTS_FD;
pub use exit::{EXIT_INTERRUPTED, EXIT_TIMEOUT, EXIT_USAGE, signal_name};
pub use observer::{Control, ObserverChoice, Quiet, RunObserver, StepLines};
pub use paths::{default_events_path, utc_stamp};
use sink::EventSink;
use supervise::Supervisor;

pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, Option<String>>,
    pub events_path: PathBuf,
    pub run_start: RunStart,
    pub timeout: Option<Duration>,
    /// What shows the run: step lines, or an observer started once the events file exists.
    pub observer: ObserverChoice,
    /// Notes to record (and print once).
    pub notes: Vec<String>,
    /// What to tell the user when the script stops at `import torch` (`No module named
    /// 'torch'`): where torch is missing and what to do.
    pub torch_hint: Option<String>,
}

/// Run the child to its end; returns `tpuport run`'s exit code. An error after the child
/// started kills it and still ends the events file with `run_end`.
pub fn launch(l: Launch) -> Result<i32> {
    let start = Instant::now();
    let file = create_events_file(&l.events_path)?;
    let mut sink = EventSink::new(file, &l.events_path, start, l.observer.start());
    for n in &l.notes {
        sink.say(&format!("tpuport: note: {n}"));
    }

    // Ctrl-C belongs to us from here on (the child runs in its own process group).
    let interrupts = Arc::new(AtomicUsize::new(0));
    let _sig = child::count_interrupts(&interrupts);

    let (events_r, events_w) = child::events_pipe()?;
    let passthrough = sink.observer.passthrough();
    let mut child = match child::spawn(&l.program, &l.args, &l.env, events_w, passthrough) {
        Ok(c) => c,
        Err(e) => return not_started(sink, l.run_start, &l.program, e, start),
    };
    let mut run_start = l.run_start;
    run_start.pid = child.id();

    let (tx, rx) = mpsc::channel();
    let (stdout, stderr) = child.take_output();
    let readers = readers::spawn_readers(events_r, stdout, stderr, tx, passthrough);
    let mut run = Supervisor::new(sink, child, run_start, l.timeout, start, interrupts);
    let outcome = match run.supervise(rx, readers) {
        Ok(o) => o,
        Err(e) => {
            let stopped = run.running();
            run.abort(&e);
            return Err(if stopped {
                anyhow::anyhow!("{e:#}; the script was stopped")
            } else {
                e
            });
        }
    };

    // The observer may keep its summary screen until the user leaves (or a signal comes);
    // dropping it gives the terminal back before the summary is printed below.
    let (interrupts, asked) = (run.interrupts, run.observer_interrupts);
    let mut observer = run.sink.observer;
    let finished = observer.finish(&|| interrupts.load(Ordering::SeqCst) > asked);
    let prints = observer.prints_summary();
    drop(observer);
    if let Err(e) = finished {
        eprintln!("tpuport: the dashboard stopped: {e:#}");
    }
    let no_torch = run
        .sink
        .summary
        .run_end
        .as_ref()
        .and_then(|e| e.exception.as_ref())
        .is_some_and(|x| x.kind == "ModuleNotFoundError" && x.message == "No module named 'torch'");
    let end = match (&l.torch_hint, no_torch) {
        (Some(hint), true) => format!(
            "tpuport run: {} stopped at `import torch` (exit {}): {hint}",
            run.run_start.script, outcome.code
        ),
        _ => exit::describe_end(&run.run_start, outcome),
    };
    if !prints {
        // The dashboard showed the exception; what to do about a missing torch is said here.
        if no_torch {
            eprintln!("{end}");
        }
        return Ok(outcome.code);
    }
    eprintln!();
    eprintln!("{end}");
    eprint!("{}", run.sink.summary.render());
    eprintln!("events: {}", l.events_path.display());
    Ok(outcome.code)
}

fn create_events_file(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        anyhow::bail!(
            "cannot create the folder {} for the events file ({}); choose another place with --events PATH",
            dir.display(),
            crate::profile::report::folder_error(dir, &e)
        );
    }
    // Read and write: a failed write cuts the file back to its last whole line (`sink`); a
    // path that can be written but not read is still taken.
    let open = |read: bool| {
        std::fs::OpenOptions::new()
            .read(read)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
    };
    open(true)
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => open(false),
            _ => Err(e),
        })
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot create the events file {} ({e}); choose another place with --events PATH",
                path.display()
            )
        })
}

/// The program could not be started: the events file still gets `run_start` and `run_end`.
fn not_started(
    mut sink: EventSink,
    run_start: RunStart,
    program: &Path,
    err: std::io::Error,
    start: Instant,
) -> Result<i32> {
    let msg = format!("cannot start {}: {err}", program.display());
    sink.write(&Event::RunStart(run_start))?;
    sink.write(&exit::end_event(
        start.elapsed().as_secs_f64(),
        exit::Outcome::runtime_error(),
        None,
        0,
        Some(msg.clone()),
    ))?;
    sink.flush()?;
    anyhow::bail!("{msg}");
}
