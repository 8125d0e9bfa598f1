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
            Event::Step(s) => {
                self.summary.add(e);
                eprintln!("{}", step_line(s, &self.summary));
                return Ok(());
            }
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

/// Steps over which a step line's samples/s and tokens/s are measured: the latest ones, so that
/// the figure follows the run, but enough of them that it does not jump with the batch size of
/// one step (a script that alternates batch sizes has the throughput of their mix).
pub const RATE_STEPS: usize = 100;

/// One step: its time, the throughput over the latest [`RATE_STEPS`] steps (the steady ones, as
/// in the dashboard and the summary), and the compiles and peak memory so far. `summary` has
/// the step already.
fn step_line(s: &event::Step, summary: &Summary) -> String {
    let mut parts = vec![
        format!("step {:>5}", s.step),
        format!("{:>9.1} ms", s.dt * 1e3),
    ];
    let n = summary.step_times.len();
    let rate = summary.throughput_of(n.saturating_sub(RATE_STEPS), n);
    // Only on the lines of steps that report a count (a step that says nothing adds nothing).
    if let Some(r) = rate.samples_per_s.filter(|_| s.samples.is_some()) {
        parts.push(format!("{r:.0} samples/s"));
    }
    if let Some(r) = rate.tokens_per_s.filter(|_| s.tokens.is_some()) {
        parts.push(format!("{r:.0} tokens/s"));
    }
    parts.push(format!("compiles {}", summary.compiles));
    if let Some(p) = summary.peak_device.or(summary.peak_rss) {
        parts.push(format!("mem {}", bytes(p)));
    }
    format!("tpuport: {}", parts.join("  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(n: u64, dt: f64, samples: f64) -> Event {
        Event::Step(event::Step {
            t: n as f64 * dt,
            step: n,
            dt,
            source: "optimizer".into(),
            samples: Some(samples),
            ..Default::default()
        })
    }

    /// The samples/s figure of a step line.
    fn samples_per_s(line: &str) -> f64 {
        let (head, _) = line.split_once(" samples/s").expect(line);
        head.rsplit(' ').next().unwrap().parse().unwrap()
    }

    /// examples/tpu/train_mlp.py: batches of 64 then 32, 32, at a steady 2.1 ms a step after a
    /// slow first step and a recompile. One step's samples over its own time alternated between
    /// ~30 k and ~15 k samples/s; the figure is the run's throughput, 42.7 samples / 2.1 ms.
    #[test]
    fn samples_per_s_is_steady_when_the_batch_size_alternates() {
        let mut lines = StepLines::default();
        let mut rates = vec![];
        for n in 1..=300u64 {
            let dt = match n {
                1 => 8.0,
                2 => 0.77,
                _ => 0.0021,
            };
            let batch = if (n - 1) % 3 == 0 { 64.0 } else { 32.0 };
            lines.summary.add(&step(n, dt, batch));
            let line = step_line(
                &match step(n, dt, batch) {
                    Event::Step(s) => s,
                    _ => unreachable!(),
                },
                &lines.summary,
            );
            rates.push(samples_per_s(&line));
        }
        let steady = 128.0 / 3.0 / 0.0021;
        for (i, r) in rates.iter().enumerate().skip(RATE_STEPS + 2) {
            assert!(
                (r / steady - 1.0).abs() < 0.01,
                "step {}: {r} samples/s, not ~{steady:.0}",
                i + 1
            );
        }
        // The recompile's 0.77 s is in the figure while it is among the latest steps.
        assert!(rates[50] < steady / 2.0, "{}", rates[50]);
    }

    #[test]
    fn a_step_line_says_what_its_step_did() {
        let mut lines = StepLines::default();
        lines.event(&step(1, 0.5, 8.0)).unwrap();
        let s = event::Step {
            step: 2,
            dt: 0.25,
            samples: Some(8.0),
            ..Default::default()
        };
        lines.summary.add(&Event::Step(s.clone()));
        // Two steps: both count (the first is left out from the third on).
        assert_eq!(
            step_line(&s, &lines.summary),
            "tpuport: step     2      250.0 ms  21 samples/s  compiles 0"
        );
    }
}
