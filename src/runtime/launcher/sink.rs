//! Where a run's events go: the events file (one JSON object per line, flushed at least five
//! times a second for `tpuport top`), the summary printed at the end, and the run's observer.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Map, Value};

use super::observer::{Control, RunObserver, StepLines};
use crate::profile::event::{Event, Log};
use crate::profile::summary::Summary;

pub struct EventSink {
    out: BufWriter<File>,
    pub summary: Summary,
    last_flush: Instant,
    /// When the run started (for the time of the events tpuport makes itself).
    start: Instant,
    pub observer: Box<dyn RunObserver>,
}

impl EventSink {
    pub fn new(file: File, start: Instant, observer: Box<dyn RunObserver>) -> EventSink {
        EventSink {
            out: BufWriter::new(file),
            summary: Summary::default(),
            last_flush: Instant::now(),
            start,
            observer,
        }
    }

    /// A message of tpuport's own: on stderr, or wherever the observer shows it.
    pub fn say(&mut self, msg: &str) {
        self.observer.note(msg);
    }

    /// Record an event (file and summary), then show it.
    pub fn write(&mut self, e: &Event) -> Result<()> {
        self.record(e)?;
        self.observer.event(e)
    }

    /// Record an event in the file and the summary only (not shown).
    pub fn record(&mut self, e: &Event) -> Result<()> {
        self.summary.add(e);
        writeln!(self.out, "{}", e.to_line())?;
        self.maybe_flush()
    }

    /// An event from the agent: validated against the schema; kept as a `log` line if it is not.
    pub fn write_value(&mut self, v: Value) -> Result<()> {
        match serde_json::from_value::<Event>(v.clone()) {
            Ok(e) => self.write(&e),
            Err(err) => self.write(&Event::Log(Log {
                t: self.start.elapsed().as_secs_f64(),
                stream: "tpuport".into(),
                line: format!("malformed agent event ({err}): {v}"),
                extra: Map::new(),
            })),
        }
    }

    /// Check on the observer; if it broke (the terminal went away), go on with step lines.
    pub fn tick(&mut self) -> Vec<Control> {
        match self.observer.tick() {
            Ok(controls) => controls,
            Err(e) => {
                // The old observer goes first (a dashboard gives the terminal back).
                self.observer = Box::new(StepLines::resume(self.summary.clone()));
                eprintln!("tpuport: the dashboard stopped ({e:#}); one line per step from here");
                vec![]
            }
        }
    }

    fn maybe_flush(&mut self) -> Result<()> {
        // Readers (tpuport top) follow the file live: flush at least 5 times a second.
        if self.last_flush.elapsed() > Duration::from_millis(200) {
            self.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        self.last_flush = Instant::now();
        Ok(())
    }
}
