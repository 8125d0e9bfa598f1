//! The parent side of `tpuport run` (no Python in this process).
//!
//! It spawns the worker (or `python -m tpuport_agent`) in its own process group with three
//! pipes: the script's stdout, its stderr, and the agent's events on fd 3. It forwards the
//! script's output, writes every event to the events file (one JSON object per line, always
//! ending with `run_end`), prints a line per step when there is no dashboard, forwards Ctrl-C
//! (a second Ctrl-C kills), enforces `--timeout`, and maps how the child ended to an exit code.
//! With a dashboard ([`crate::ui::live`]) the same events and output lines drive it instead of
//! the step lines, and the script's output goes only to the dashboard's output pane.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use crate::profile::event::{self, Event, ExceptionInfo, Log, RunEnd, RunStart};
use crate::profile::summary::{Summary, bytes};
use crate::ui::app::Action;
use crate::ui::live::Dashboard;

/// Exit codes of `tpuport run` beyond the script's own.
pub const EXIT_TIMEOUT: i32 = 124;
pub const EXIT_INTERRUPTED: i32 = 130;
/// tpuport could not start the script (bad options, no Python): 2, as for other commands.
pub const EXIT_USAGE: i32 = 2;

/// The fd the agent writes events to, in the child.
pub const EVENTS_FD: i32 = 3;

pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, Option<String>>,
    pub events_path: PathBuf,
    pub run_start: RunStart,
    pub timeout: Option<Duration>,
    /// Print a line per step (no dashboard).
    pub step_lines: bool,
    /// Show the dashboard (stdout is a terminal and no --no-tui); falls back to step lines if
    /// the terminal cannot be taken over.
    pub tui: bool,
    /// Notes to record (and print once).
    pub notes: Vec<String>,
}

enum Msg {
    /// A schema event from the agent (parsed once, in the reader thread).
    Typed(Box<Event>),
    /// Anything else from the agent: its hello, exit status, exception, or a malformed line.
    Event(Value),
    Output {
        stream: &'static str,
        line: String,
    },
    EventsClosed,
    OutputClosed,
}

pub fn launch(l: Launch) -> Result<i32> {
    let start = Instant::now();
    let t = || start.elapsed().as_secs_f64();
    if let Some(dir) = l.events_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {} for the events file", dir.display()))?;
    }
    let file = File::create(&l.events_path).with_context(|| {
        format!(
            "cannot create the events file {}: choose another with --events",
            l.events_path.display()
        )
    })?;
    let dash = if l.tui {
        match Dashboard::start(false) {
            Ok(d) => Some(d),
            Err(e) => {
                eprintln!("tpuport: note: {e:#}; showing one line per step instead");
                None
            }
        }
    } else {
        None
    };
    let mut sink = EventSink {
        out: BufWriter::new(file),
        summary: Summary::default(),
        last_flush: Instant::now(),
        step_lines: l.step_lines || (l.tui && dash.is_none()),
        dash,
    };

    let mut run_start = l.run_start.clone();
    for n in &l.notes {
        sink.say(&format!("tpuport: note: {n}"));
    }

    // Ctrl-C belongs to us from here on (the child runs in its own process group).
    let interrupts = Arc::new(AtomicUsize::new(0));
    let _sig = register_signals(&interrupts);

    // Pipe for events: the child gets the write end as fd 3.
    let (events_r, events_w) = pipe()?;
    let mut cmd = Command::new(&l.program);
    // With a dashboard the terminal's keys are the dashboard's.
    let stdin = if sink.dash.is_some() {
        Stdio::null()
    } else {
        Stdio::inherit()
    };
    cmd.args(&l.args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in &l.env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let w = events_w.as_raw_fd();
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(w, EVENTS_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn();
    drop(events_w);
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot start {}: {e}", l.program.display());
            sink.write(&Event::RunStart(run_start))?;
            sink.write(&end_event(
                t(),
                EXIT_USAGE,
                "runtime_error",
                None,
                None,
                0,
                Some(msg.clone()),
            ))?;
            sink.flush()?;
            anyhow::bail!("{msg}");
        }
    };
    let pgid = child.id() as i32;
    run_start.pid = child.id();

    let (tx, rx) = mpsc::channel::<Msg>();
    let readers = spawn_readers(&mut child, events_r, tx, sink.dash.is_none());

    // Hold run_start until the agent says hello (python/torch versions), briefly.
    let mut started = false;
    let mut pending: Vec<Value> = vec![];
    let mut exception: Option<ExceptionInfo> = None;
    let mut exit_status: Option<String> = None;
    let mut open_streams = 3usize;
    let mut sent_interrupts = 0usize;
    let mut timed_out = false;
    let mut kill_at: Option<Instant> = None;
    let mut exited: Option<std::process::ExitStatus> = None;
    // Interrupts asked for from the dashboard (q then y, or Ctrl-C as a key in raw mode); any
    // beyond these came as signals.
    let mut ui_interrupts = 0usize;

    loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Msg::Event(v)) => match v.get("type").and_then(Value::as_str) {
                Some("hello") => {
                    run_start.python = v.get("python").and_then(Value::as_str).map(str::to_string);
                    sink.write(&Event::RunStart(run_start.clone()))?;
                    started = true;
                    for p in pending.drain(..) {
                        sink.write_value(p, &l, start)?;
                    }
                }
                Some("exception") => {
                    exception =
                        serde_json::from_value(v.get("exception").cloned().unwrap_or_default())
                            .ok();
                }
                Some("exit_status") => {
                    exit_status = v.get("status").and_then(Value::as_str).map(str::to_string);
                }
                _ if !started => pending.push(v),
                _ => sink.write_value(v, &l, start)?,
            },
            Ok(Msg::Typed(e)) => {
                if started {
                    sink.write_event(*e, &l)?;
                } else {
                    pending.push(serde_json::to_value(&e)?);
                }
            }
            Ok(Msg::Output { stream, line }) => {
                let v = json!({"type": "log", "t": t(), "stream": stream, "line": line});
                if started {
                    sink.write_value(v, &l, start)?;
                } else {
                    pending.push(v);
                }
            }
            Ok(Msg::EventsClosed) | Ok(Msg::OutputClosed) => {
                open_streams = open_streams.saturating_sub(1)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => open_streams = 0,
        }
        if let Some(d) = sink.dash.as_mut() {
            match d.tick() {
                Ok(actions) => {
                    for a in actions {
                        if a == Action::Interrupt && exited.is_none() {
                            ui_interrupts += 1;
                            interrupts.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                }
                // The terminal went away or broke: keep running the script, without a dashboard.
                Err(e) => {
                    sink.dash = None;
                    sink.step_lines = true;
                    eprintln!(
                        "tpuport: the dashboard stopped ({e:#}); one line per step from here"
                    );
                }
            }
        }
        // Ctrl-C: forward once as SIGINT (KeyboardInterrupt in the script); again = kill.
        let n = interrupts.load(Ordering::SeqCst);
        if n > sent_interrupts && exited.is_none() {
            sent_interrupts = n;
            if n == 1 {
                sink.say("tpuport: interrupting the script (Ctrl-C again to kill it)");
                signal_group(pgid, libc::SIGINT);
            } else {
                signal_group(pgid, libc::SIGKILL);
            }
        }
        if let Some(limit) = l.timeout
            && !timed_out
            && exited.is_none()
            && start.elapsed() > limit
        {
            timed_out = true;
            sink.say(&format!(
                "tpuport: --timeout {:.0}s reached: interrupting the script",
                limit.as_secs_f64()
            ));
            signal_group(pgid, libc::SIGINT);
            kill_at = Some(Instant::now() + Duration::from_secs(5));
        }
        if let Some(at) = kill_at
            && exited.is_none()
            && Instant::now() > at
        {
            signal_group(pgid, libc::SIGKILL);
            kill_at = None;
        }
        if exited.is_none() {
            exited = child.try_wait()?;
            if exited.is_some() {
                // Anything the script left running in its group goes too (pipes would stay open).
                signal_group(pgid, libc::SIGKILL);
            }
        }
        if exited.is_some() && open_streams == 0 {
            break;
        }
    }
    for r in readers {
        let _ = r.join();
    }
    let status = exited.expect("loop ends after exit");
    if !started {
        sink.write(&Event::RunStart(run_start.clone()))?;
        for p in pending.drain(..) {
            sink.write_value(p, &l, start)?;
        }
    }
    let steps = sink.summary.steps;
    let (code, status_name, signal) = match (status.code(), status.signal()) {
        (_, Some(sig)) if timed_out => (EXIT_TIMEOUT, "timeout", Some(sig)),
        (_, Some(sig)) if sent_interrupts > 0 => (128 + sig, "interrupted", Some(sig)),
        (_, Some(sig)) => (128 + sig, "signal", Some(sig)),
        (Some(c), _) if timed_out => (if c == 0 { 0 } else { EXIT_TIMEOUT }, "timeout", None),
        (Some(0), _) => (0, "ok", None),
        (Some(c), _) if exception.is_some() => (c, "exception", None),
        (Some(c), _) if c == EXIT_INTERRUPTED || exit_status.as_deref() == Some("interrupted") => {
            (c, "interrupted", None)
        }
        (Some(c), _) if c == super::worker::EXIT_AGENT_FAILURE && exit_status.is_none() => {
            (c, "runtime_error", None)
        }
        (Some(c), _) => (c, "exit", None),
        (None, None) => (1, "exit", None),
    };
    let mut end = end_event(t(), code, status_name, signal, exception, steps, None);
    if let (Event::RunEnd(e), Some(sig)) = (&mut end, signal) {
        e.extra
            .insert("signal_name".into(), Value::String(signal_name(sig).into()));
    }
    sink.write(&end)?;
    sink.flush()?;
    if let Some(mut d) = sink.dash.take() {
        // The summary screen stays until the user leaves (or a signal comes); dropping the
        // dashboard gives the terminal back before the summary is printed below.
        if let Err(e) = d.wait_until_leave(|| interrupts.load(Ordering::SeqCst) > ui_interrupts) {
            drop(d);
            eprintln!("tpuport: the dashboard stopped: {e:#}");
        }
    }
    eprintln!();
    eprintln!("{}", describe_end(&run_start, code, status_name, signal));
    eprint!("{}", sink.summary.render());
    eprintln!("events: {}", l.events_path.display());
    Ok(code)
}

fn end_event(
    t: f64,
    code: i32,
    status: &str,
    signal: Option<i32>,
    exception: Option<ExceptionInfo>,
    steps: u64,
    error: Option<String>,
) -> Event {
    let mut extra = Map::new();
    if let Some(e) = error {
        extra.insert("error".into(), Value::String(e));
    }
    Event::RunEnd(RunEnd {
        t,
        exit_code: code,
        status: status.to_string(),
        signal,
        exception,
        steps,
        duration: t,
        extra,
    })
}

fn describe_end(rs: &RunStart, code: i32, status: &str, signal: Option<i32>) -> String {
    let what = match (status, signal) {
        ("ok", _) => "finished".to_string(),
        ("exception", _) => "raised an exception".to_string(),
        ("interrupted", _) => "was interrupted".to_string(),
        ("timeout", _) => "timed out".to_string(),
        (_, Some(libc::SIGKILL)) => {
            "was killed (SIGKILL: out of memory, or killed by hand)".to_string()
        }
        (_, Some(sig)) => format!("crashed ({})", signal_name(sig)),
        ("runtime_error", _) => "could not be run by tpuport".to_string(),
        _ => format!("exited with {code}"),
    };
    let chip = rs
        .chip
        .as_deref()
        .map(|c| format!(", {c}"))
        .unwrap_or_default();
    format!(
        "tpuport run: {} {what} (exit {code}) on the {} target{chip}, mode {}",
        rs.script, rs.target, rs.mode
    )
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        _ => "signal",
    }
}

struct EventSink {
    out: BufWriter<File>,
    summary: Summary,
    last_flush: Instant,
    step_lines: bool,
    dash: Option<Dashboard>,
}

impl EventSink {
    /// A message of tpuport's own: on stderr, or in the dashboard's output pane.
    fn say(&mut self, msg: &str) {
        match self.dash.as_mut() {
            Some(d) => d.note(msg),
            None => eprintln!("\n{msg}"),
        }
    }

    fn write(&mut self, e: &Event) -> Result<()> {
        self.summary.add(e);
        if let Some(d) = self.dash.as_mut() {
            d.event(e);
        }
        writeln!(self.out, "{}", e.to_line())?;
        self.maybe_flush()
    }

    /// An event from the agent: validated against the schema; kept as a `log` line if it is not.
    fn write_value(&mut self, v: Value, l: &Launch, start: Instant) -> Result<()> {
        match serde_json::from_value::<Event>(v.clone()) {
            Ok(e) => self.write_event(e, l),
            Err(err) => self.write(&Event::Log(Log {
                t: start.elapsed().as_secs_f64(),
                stream: "tpuport".into(),
                line: format!("malformed agent event ({err}): {v}"),
                extra: Map::new(),
            })),
        }
    }

    /// A schema event from the agent: recorded, and shown as a step line where wanted.
    fn write_event(&mut self, e: Event, _l: &Launch) -> Result<()> {
        if self.step_lines
            && let Event::Step(s) = &e
        {
            eprintln!("{}", step_line(s, &self.summary));
        }
        if let Event::Compile(c) = &e
            && c.status == "limit_hit"
            && self.step_lines
        {
            eprintln!(
                "tpuport: recompile limit hit in {} ({}:{}): it now runs eagerly; last reason: {}",
                c.function,
                c.file,
                c.line,
                c.reason.as_deref().unwrap_or("?")
            );
        }
        self.write(&e)
    }

    fn maybe_flush(&mut self) -> Result<()> {
        // Readers (tpuport top) follow the file live: flush at least 5 times a second.
        if self.last_flush.elapsed() > Duration::from_millis(200) {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        self.last_flush = Instant::now();
        Ok(())
    }
}

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

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot create the events pipe");
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn spawn_readers(
    child: &mut Child,
    events: OwnedFd,
    tx: Sender<Msg>,
    passthrough: bool,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut handles = vec![];
    let ev_tx = tx.clone();
    handles.push(std::thread::spawn(move || {
        let reader = BufReader::new(File::from(events));
        for line in reader.split(b'\n') {
            let Ok(line) = line else { break };
            let msg = match serde_json::from_slice::<Event>(&line) {
                Ok(e) => Msg::Typed(Box::new(e)),
                Err(_) => {
                    let text = String::from_utf8_lossy(&line);
                    Msg::Event(serde_json::from_str::<Value>(&text).unwrap_or_else(|_| {
                        json!({"type": "log", "t": 0.0, "stream": "tpuport", "line": format!("malformed agent event: {text}")})
                    }))
                }
            };
            if ev_tx.send(msg).is_err() {
                break;
            }
        }
        let _ = ev_tx.send(Msg::EventsClosed);
    }));
    if let Some(out) = child.stdout.take() {
        handles.push(forward(out, "stdout", tx.clone(), passthrough));
    }
    if let Some(err) = child.stderr.take() {
        handles.push(forward(err, "stderr", tx, passthrough));
    }
    handles
}

/// Copy the script's output to ours as it comes (unless a dashboard shows it), and send each
/// line as a log event.
fn forward(
    mut src: impl Read + Send + 'static,
    stream: &'static str,
    tx: Sender<Msg>,
    passthrough: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        let mut line: Vec<u8> = vec![];
        loop {
            let n = match src.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = &buf[..n];
            let _ = if !passthrough {
                Ok(())
            } else if stream == "stdout" {
                let mut o = std::io::stdout().lock();
                o.write_all(chunk).and_then(|_| o.flush())
            } else {
                let mut o = std::io::stderr().lock();
                o.write_all(chunk).and_then(|_| o.flush())
            };
            for &b in chunk {
                if b == b'\n' {
                    let text = String::from_utf8_lossy(&line)
                        .trim_end_matches('\r')
                        .to_string();
                    let _ = tx.send(Msg::Output { stream, line: text });
                    line.clear();
                } else if line.len() < 64 * 1024 {
                    line.push(b);
                }
            }
        }
        if !line.is_empty() {
            let _ = tx.send(Msg::Output {
                stream,
                line: String::from_utf8_lossy(&line).to_string(),
            });
        }
        let _ = tx.send(Msg::OutputClosed);
    })
}

fn register_signals(count: &Arc<AtomicUsize>) -> Vec<signal_hook::SigId> {
    let mut ids = vec![];
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let c = Arc::clone(count);
        if let Ok(id) = unsafe {
            signal_hook::low_level::register(sig, move || {
                c.fetch_add(1, Ordering::SeqCst);
            })
        } {
            ids.push(id);
        }
    }
    ids
}

fn signal_group(pgid: i32, sig: i32) {
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// `runs/20261202-173000-train-4242.jsonl` (`-rank1` before the pid under torchrun).
pub fn default_events_path(script: &Path) -> PathBuf {
    let stem = script
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "run".into());
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Under torchrun every rank runs its own tpuport: the rank in the name keeps them apart.
    let rank = std::env::var("RANK")
        .ok()
        .filter(|r| r.chars().all(|c| c.is_ascii_digit()) && !r.is_empty())
        .map(|r| format!("-rank{r}"))
        .unwrap_or_default();
    PathBuf::from("runs").join(format!(
        "{}-{stem}{rank}-{}.jsonl",
        utc_stamp(secs),
        std::process::id()
    ))
}

/// `YYYYmmdd-HHMMSS` in UTC.
pub fn utc_stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_796_229_000), "20261202-163000");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }
}
