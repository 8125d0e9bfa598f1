//! Where a run's events go: the events file (one JSON object per line, flushed at least five
//! times a second for `tpuport top`), the summary printed at the end, and the run's observer.
//!
//! If the file cannot be written (a full disk), what is still buffered is dropped and the file
//! is cut back to its last complete line, so every line in it stays a whole event; the error
//! says what to do, and the launcher stops the run.

use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use serde_json::{Map, Value};

use super::observer::{Control, RunObserver, StepLines};
use crate::profile::event::{Event, Log};
use crate::profile::summary::Summary;

pub struct EventSink {
    /// `None` once a write failed.
    out: Option<BufWriter<File>>,
    path: PathBuf,
    /// The first write error, as said to the user.
    failed: Option<String>,
    pub summary: Summary,
    last_flush: Instant,
    /// When the run started (for the time of the events tpuport makes itself).
    start: Instant,
    pub observer: Box<dyn RunObserver>,
}

impl EventSink {
    pub fn new(
        file: File,
        path: &Path,
        start: Instant,
        observer: Box<dyn RunObserver>,
    ) -> EventSink {
        EventSink {
            out: Some(BufWriter::new(file)),
            path: path.to_path_buf(),
            failed: None,
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
        let mut line = e.to_line();
        line.push('\n');
        // One write per line: what reaches the file between flushes is whole lines.
        let result = match self.out.as_mut() {
            Some(out) => out.write_all(line.as_bytes()),
            None => return Err(self.failure()),
        };
        if let Err(err) = result {
            return Err(self.broke(err));
        }
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
        let result = match self.out.as_mut() {
            Some(out) => out.flush(),
            None => return Err(self.failure()),
        };
        if let Err(err) = result {
            return Err(self.broke(err));
        }
        self.last_flush = Instant::now();
        Ok(())
    }

    fn failure(&self) -> anyhow::Error {
        anyhow!(
            "{}",
            self.failed
                .clone()
                .unwrap_or_else(|| "the events file is closed".into())
        )
    }

    /// A write failed: drop what is buffered (the writer would retry it when dropped), cut the
    /// file back to its last complete line, and say what to do.
    fn broke(&mut self, err: std::io::Error) -> anyhow::Error {
        if let Some(out) = self.out.take() {
            let (mut file, _unwritten) = out.into_parts();
            let _ = cut_to_last_line(&mut file);
        }
        let full = matches!(
            err.raw_os_error(),
            Some(libc::ENOSPC) | Some(libc::EDQUOT) | Some(libc::EFBIG)
        );
        let todo = if full {
            "free some space there, or write the events elsewhere with --events PATH"
        } else {
            "choose another place with --events PATH"
        };
        let msg = format!(
            "cannot write the events file {}: {err}; {todo} (the file ends at its last complete event)",
            self.path.display()
        );
        self.failed = Some(msg);
        self.failure()
    }
}

/// Cut `file` after its last newline (or to nothing), so that it holds whole lines only.
pub fn cut_to_last_line(file: &mut File) -> std::io::Result<()> {
    let len = file.metadata()?.len();
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|b| *b == b'\n') {
            let keep = start + i as u64 + 1;
            if keep < len {
                file.set_len(keep)?;
            }
            return Ok(());
        }
        end = start;
    }
    file.set_len(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::launcher::Quiet;

    #[test]
    fn a_file_is_cut_back_to_its_last_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.jsonl");
        for (text, kept) in [
            ("{\"a\":1}\n{\"b\":2}\n{\"c\"", "{\"a\":1}\n{\"b\":2}\n"),
            ("{\"a\":1}\n", "{\"a\":1}\n"),
            ("{\"a\"", ""),
        ] {
            std::fs::write(&p, text).unwrap();
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&p)
                .unwrap();
            cut_to_last_line(&mut f).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap(), kept);
        }
        // A long last line, past the reading window.
        let long = format!("{{\"a\":1}}\n{}", "x".repeat(200_000));
        std::fs::write(&p, long).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p)
            .unwrap();
        cut_to_last_line(&mut f).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{\"a\":1}\n");
    }

    /// A full disk, as /dev/full gives it: the error names the file and what to do, and every
    /// later write says the same instead of writing half lines.
    #[test]
    fn a_full_disk_is_one_clear_error() {
        let Ok(file) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            eprintln!("SKIPPED: no /dev/full here");
            return;
        };
        let mut sink = EventSink::new(
            file,
            Path::new("/dev/full"),
            Instant::now(),
            Box::new(Quiet),
        );
        let e = crate::profile::event::Event::Log(Log {
            t: 0.0,
            stream: "stdout".into(),
            line: "x".into(),
            extra: Map::new(),
        });
        sink.record(&e).unwrap();
        let err = format!("{:#}", sink.flush().unwrap_err());
        assert!(
            err.starts_with("cannot write the events file /dev/full: No space left on device"),
            "{err}"
        );
        assert!(
            err.contains("free some space there, or write the events elsewhere with --events PATH"),
            "{err}"
        );
        assert!(!err.contains('\n'));
        let again = format!("{:#}", sink.record(&e).unwrap_err());
        assert_eq!(again, err);
    }
}
