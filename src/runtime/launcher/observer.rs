//! Who watches a run: the [`RunObserver`] interface between the launcher and whatever shows the
//! run (events in; controls such as an interrupt out), and its plain implementation,
//! [`StepLines`]: a line per step on stderr. The dashboard implements it in `ui::live`;
//! the command line chooses which one a run gets ([`ObserverChoice`]).

use anyhow::Result;

use crate::profile::event::{self, Event};
use crate::profile::summary::{Summary, bytes};

/// What an observer asks of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Stop the running script (as a Ctrl-C would: SIGINT first, a second one kills).
    Interrupt,
}

/// Shows a run as it happens. The launcher calls it from its loop only (one thread).
pub trait RunObserver {
    /// Whether the script's output goes straight to our stdout/stderr and it reads our stdin.
    /// False when the observer shows the output itself (and owns the terminal's keys).
    fn passthrough(&self) -> bool {
        true
    }

    /// An event, after it was recorded in the events file. An error stops the run (the child
    /// is killed and the events file ends with a `runtime_error` `run_end`).
    fn event(&mut self, e: &Event) -> Result<()>;

    /// A message of tpuport's own (a note, "interrupting the script", ...).
    fn note(&mut self, msg: &str);

    /// Called about 20 times a second: handle input, redraw, and say what the run should do.
    /// An error means the observer cannot go on: the launcher shows step lines from then on.
    fn tick(&mut self) -> Result<Vec<Control>> {
        Ok(vec![])
    }

    /// The run has ended and its end recorded: wait (e.g. on a summary screen) until the user
    /// leaves or `stop` says to (a signal arrived). The observer is dropped right after.
    fn finish(&mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        let _ = stop;
        Ok(())
    }

    /// Whether the launcher prints the run's end and summary on stderr when it is over.
    fn prints_summary(&self) -> bool {
        true
    }

    /// The same observer shows a new run of the script (`run --watch`): forget the last one.
    fn restart(&mut self) {}
}

/// Shows nothing: the script's output and the run's end go to the events file only (a run that
/// another command reads back, such as `tpuport check`'s two runs).
pub struct Quiet;

impl RunObserver for Quiet {
    fn passthrough(&self) -> bool {
        false
    }

    fn event(&mut self, _e: &Event) -> Result<()> {
        Ok(())
    }

    fn note(&mut self, _msg: &str) {}

    fn prints_summary(&self) -> bool {
        false
    }
}

/// The observer a run gets, chosen by the caller.
pub enum ObserverChoice {
    /// A line per step on stderr, the script's output passed through.
    StepLines,
    /// Started by the launcher once the events file exists (so a dashboard takes the terminal
    /// over only when the run really starts); it may itself fall back to [`StepLines`].
    Start(Box<dyn FnOnce() -> Box<dyn RunObserver>>),
}

impl ObserverChoice {
    pub fn start(self) -> Box<dyn RunObserver> {
        match self {
            ObserverChoice::StepLines => Box::new(StepLines::default()),
            ObserverChoice::Start(f) => f(),
        }
    }
}

/// A line per step on stderr (`tpuport: step 12  31.0 ms  ...`), and a line when the recompile
/// limit is hit; tpuport's notes on stderr too.
#[derive(Default)]
pub struct StepLines {
    /// The events so far, for the compiles and memory shown on each step line.
    summary: Summary,
}

impl StepLines {
    /// Step lines for a run already under way (after the dashboard stopped).
    pub fn resume(summary: Summary) -> StepLines {
        StepLines { summary }
    }
}

impl RunObserver for StepLines {
    fn restart(&mut self) {
        self.summary = Summary::default();
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        match e {
            Event::Step(s) => eprintln!("{}", step_line(s, &self.summary)),
            Event::Compile(c) if c.status == "limit_hit" => eprintln!(
                "tpuport: recompile limit hit in {} ({}:{}): it now runs eagerly; last reason: {}",
                c.function,
                c.file,
                c.line,
                c.reason.as_deref().unwrap_or("?")
            ),
            _ => {}
        }
        self.summary.add(e);
        Ok(())
    }

    fn note(&mut self, msg: &str) {
        eprintln!("\n{msg}");
    }
}

/// One step: its time, throughput, and the compiles and peak memory before it.
fn step_line(s: &event::Step, before: &Summary) -> String {
    let mut parts = vec![
        format!("step {:>5}", s.step),
        format!("{:>9.1} ms", s.dt * 1e3),
    ];
    if let Some(n) = s.samples.filter(|_| s.dt > 0.0) {
        parts.push(format!("{:.0} samples/s", n / s.dt));
    }
    if let Some(n) = s.tokens.filter(|_| s.dt > 0.0) {
        parts.push(format!("{:.0} tokens/s", n / s.dt));
    }
    parts.push(format!("compiles {}", before.compiles));
    if let Some(p) = before.peak_device.or(before.peak_rss) {
        parts.push(format!("mem {}", bytes(p)));
    }
    format!("tpuport: {}", parts.join("  "))
}
