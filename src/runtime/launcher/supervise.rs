//! The launcher's loop while the child runs: it records what the readers send (holding events
//! back until the agent's hello completes `run_start`), asks the observer for controls, forwards
//! Ctrl-C (a second one kills), enforces `--timeout`, and when the child has exited and its pipes
//! are closed, records `run_end`. On an error it kills the child and still ends the events file
//! with `run_end` ([`Supervisor::abort`]).

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use super::child::ChildGuard;
use super::exit::{Ending, Outcome, classify, end_event};
use super::observer::Control;
use super::readers::Msg;
use super::sink::EventSink;
use crate::profile::event::{Event, ExceptionInfo, RunStart};

/// After `--timeout`'s SIGINT, how long the script has to stop before it is killed.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

pub struct Supervisor {
    pub sink: EventSink,
    child: ChildGuard,
    pub run_start: RunStart,
    timeout: Option<Duration>,
    start: Instant,
    /// Interrupts asked for: our SIGINT/SIGTERM handlers and the observer's controls.
    pub interrupts: Arc<AtomicUsize>,
    /// Interrupts asked for by the observer (q then y, or Ctrl-C as a key in raw mode); any
    /// beyond these came as signals.
    pub observer_interrupts: usize,
    /// The agent said hello: `run_start` is written and events go straight to the sink.
    started: bool,
    pending: Vec<Value>,
    exception: Option<ExceptionInfo>,
    /// The agent's own word on how the script ended.
    exit_status: Option<String>,
    open_streams: usize,
    sent_interrupts: usize,
    timed_out: bool,
    kill_at: Option<Instant>,
    exited: Option<ExitStatus>,
}

impl Supervisor {
    pub fn new(
        sink: EventSink,
        child: ChildGuard,
        run_start: RunStart,
        timeout: Option<Duration>,
        start: Instant,
        interrupts: Arc<AtomicUsize>,
    ) -> Supervisor {
        Supervisor {
            sink,
            child,
            run_start,
            timeout,
            start,
            interrupts,
            observer_interrupts: 0,
            started: false,
            pending: vec![],
            exception: None,
            exit_status: None,
            open_streams: 3,
            sent_interrupts: 0,
            timed_out: false,
            kill_at: None,
            exited: None,
        }
    }

    fn t(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Run until the child has exited and its pipes are closed; record `run_end`.
    pub fn supervise(
        &mut self,
        rx: Receiver<Msg>,
        readers: Vec<JoinHandle<()>>,
    ) -> Result<Outcome> {
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(msg) => self.on_msg(msg)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.open_streams = 0,
            }
            self.on_controls();
            self.forward_interrupts();
            self.enforce_timeout();
            self.poll_exit()?;
            if self.exited.is_some() && self.open_streams == 0 {
                break;
            }
        }
        for r in readers {
            let _ = r.join();
        }
        self.end()
    }

    fn on_msg(&mut self, msg: Msg) -> Result<()> {
        match msg {
            Msg::Event(v) => self.on_agent_value(v),
            Msg::Typed(e) if self.started => self.sink.write(&e),
            Msg::Typed(e) => {
                self.pending.push(serde_json::to_value(&e)?);
                Ok(())
            }
            Msg::Output { stream, line } => {
                let v = json!({"type": "log", "t": self.t(), "stream": stream, "line": line});
                self.write_or_hold(v)
            }
            Msg::EventsClosed | Msg::OutputClosed => {
                self.open_streams = self.open_streams.saturating_sub(1);
                Ok(())
            }
        }
    }

    /// What the agent sends beside the schema events: its hello (which completes and writes
    /// `run_start`), the script's exception and its exit status.
    fn on_agent_value(&mut self, v: Value) -> Result<()> {
        match v.get("type").and_then(Value::as_str) {
            Some("hello") => {
                self.run_start.python = v.get("python").and_then(Value::as_str).map(str::to_string);
                self.sink.write(&Event::RunStart(self.run_start.clone()))?;
                self.started = true;
                self.write_pending()?;
            }
            Some("exception") => {
                self.exception =
                    serde_json::from_value(v.get("exception").cloned().unwrap_or_default()).ok();
            }
            Some("exit_status") => {
                self.exit_status = v.get("status").and_then(Value::as_str).map(str::to_string);
            }
            _ => self.write_or_hold(v)?,
        }
        Ok(())
    }

    fn write_or_hold(&mut self, v: Value) -> Result<()> {
        if self.started {
            self.sink.write_value(v)
        } else {
            self.pending.push(v);
            Ok(())
        }
    }

    fn write_pending(&mut self) -> Result<()> {
        for p in std::mem::take(&mut self.pending) {
            self.sink.write_value(p)?;
        }
        Ok(())
    }

    fn on_controls(&mut self) {
        for c in self.sink.tick() {
            if c == Control::Interrupt && self.exited.is_none() {
                self.observer_interrupts += 1;
                self.interrupts.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// Ctrl-C: forward once as SIGINT (KeyboardInterrupt in the script); again = kill.
    fn forward_interrupts(&mut self) {
        let n = self.interrupts.load(Ordering::SeqCst);
        if n > self.sent_interrupts && self.exited.is_none() {
            self.sent_interrupts = n;
            if n == 1 {
                self.sink
                    .say("tpuport: interrupting the script (Ctrl-C again to kill it)");
                self.child.signal_group(libc::SIGINT);
            } else {
                self.child.signal_group(libc::SIGKILL);
            }
        }
    }

    /// `--timeout`: SIGINT when it is reached, SIGKILL if the script is still there 5 s later.
    fn enforce_timeout(&mut self) {
        if let Some(limit) = self.timeout
            && !self.timed_out
            && self.exited.is_none()
            && self.start.elapsed() > limit
        {
            self.timed_out = true;
            self.sink.say(&format!(
                "tpuport: --timeout {:.0}s reached: interrupting the script",
                limit.as_secs_f64()
            ));
            self.child.signal_group(libc::SIGINT);
            self.kill_at = Some(Instant::now() + TIMEOUT_GRACE);
        }
        if let Some(at) = self.kill_at
            && self.exited.is_none()
            && Instant::now() > at
        {
            self.child.signal_group(libc::SIGKILL);
            self.kill_at = None;
        }
    }

    fn poll_exit(&mut self) -> Result<()> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait()?;
            if self.exited.is_some() {
                // Anything the script left running in its group goes too (pipes would stay open).
                self.child.signal_group(libc::SIGKILL);
            }
        }
        Ok(())
    }

    /// The child has been reaped: write what was held back and `run_end`.
    fn end(&mut self) -> Result<Outcome> {
        let status = self.exited.expect("the loop ends after the exit");
        if !self.started {
            self.sink.write(&Event::RunStart(self.run_start.clone()))?;
            self.write_pending()?;
        }
        let outcome = classify(&Ending {
            code: status.code(),
            signal: status.signal(),
            timed_out: self.timed_out,
            interrupted: self.sent_interrupts > 0,
            exception: self.exception.is_some(),
            agent_status: self.exit_status.as_deref(),
        });
        let steps = self.sink.summary.steps;
        let end = end_event(self.t(), outcome, self.exception.take(), steps, None);
        self.sink.write(&end)?;
        self.sink.flush()?;
        Ok(outcome)
    }

    /// Whether the child has not exited yet (as far as the loop saw).
    pub fn running(&self) -> bool {
        self.exited.is_none()
    }

    /// tpuport itself failed while the child ran: kill the child's group (and reap it), and
    /// finish the events file anyway, `run_end` with status `runtime_error` and the error.
    pub fn abort(&mut self, err: &anyhow::Error) {
        self.child.kill();
        if self.sink.summary.run_start.is_none() {
            let _ = self.sink.record(&Event::RunStart(self.run_start.clone()));
        }
        if self.sink.summary.run_end.is_none() {
            let outcome = Outcome::runtime_error();
            let steps = self.sink.summary.steps;
            let error = Some(format!("{err:#}"));
            let _ = self
                .sink
                .record(&end_event(self.t(), outcome, None, steps, error));
        }
        let _ = self.sink.flush();
    }
}
