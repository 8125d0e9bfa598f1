//! The launcher with `/bin/sh` as the child: an error after the child started leaves no child
//! process and a complete events file; an observer that breaks gives way to step lines; a
//! program that cannot start still gets its `run_start` and `run_end`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Result, bail};

use super::{Control, Launch, ObserverChoice, RunObserver, launch};
use crate::profile::event::{Event, RunStart};

/// Remembers the child's pid (from `run_start`) and fails where it is told to.
struct Failing {
    pid: Arc<AtomicU32>,
    in_event: bool,
    in_tick: bool,
}

impl RunObserver for Failing {
    fn event(&mut self, e: &Event) -> Result<()> {
        if let Event::RunStart(s) = e {
            self.pid.store(s.pid, Ordering::SeqCst);
        }
        if self.in_event {
            bail!("the observer broke");
        }
        Ok(())
    }

    fn note(&mut self, _msg: &str) {}

    fn tick(&mut self) -> Result<Vec<Control>> {
        if self.in_tick {
            bail!("the terminal went away");
        }
        Ok(vec![])
    }
}

fn sh(script: &str, events: &Path, observer: Failing) -> Launch {
    Launch {
        program: PathBuf::from("/bin/sh"),
        args: vec!["-c".into(), script.into()],
        env: BTreeMap::new(),
        events_path: events.to_path_buf(),
        run_start: RunStart {
            script: "test.sh".into(),
            target: "host".into(),
            ..RunStart::default()
        },
        timeout: None,
        observer: ObserverChoice::Start(Box::new(move || Box::new(observer))),
        notes: vec![],
        torch_hint: None,
    }
}

fn events(path: &Path) -> Vec<Event> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| Event::parse(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn run_end(events: &[Event]) -> &crate::profile::event::RunEnd {
    match events.last() {
        Some(Event::RunEnd(e)) => e,
        other => panic!("the events file ends with {other:?}, not run_end"),
    }
}

#[test]
fn an_error_after_spawn_kills_the_child_and_ends_the_events_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let pid = Arc::new(AtomicU32::new(0));
    let observer = Failing {
        pid: Arc::clone(&pid),
        in_event: true,
        in_tick: false,
    };
    // The agent's hello makes the launcher write run_start, which the observer fails on.
    let script = r#"echo '{"type": "hello"}' >&3; exec sleep 30"#;
    let err = launch(sh(script, &path, observer)).expect_err("the observer's error");
    assert!(format!("{err:#}").contains("the observer broke"), "{err:#}");

    let pid = pid.load(Ordering::SeqCst) as i32;
    assert!(pid > 0, "run_start carried the child's pid");
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    let errno = std::io::Error::last_os_error().raw_os_error();
    assert!(
        !alive && errno == Some(libc::ESRCH),
        "child {pid} still exists"
    );

    let events = events(&path);
    assert!(matches!(events.first(), Some(Event::RunStart(s)) if s.pid == pid as u32));
    assert_eq!(events.len(), 2, "{events:?}");
    let end = run_end(&events);
    assert_eq!((end.status.as_str(), end.exit_code), ("runtime_error", 2));
    let error = end
        .extra
        .get("error")
        .and_then(|e| e.as_str())
        .unwrap_or("");
    assert!(error.contains("the observer broke"), "{error}");
}

#[test]
fn a_broken_observer_gives_way_to_step_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let observer = Failing {
        pid: Arc::new(AtomicU32::new(0)),
        in_event: false,
        in_tick: true,
    };
    let code = launch(sh("echo out; exit 3", &path, observer)).unwrap();
    assert_eq!(code, 3);
    let events = events(&path);
    assert!(matches!(events.first(), Some(Event::RunStart(_))));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Log(l) if l.stream == "stdout" && l.line == "out"))
    );
    let end = run_end(&events);
    assert_eq!((end.status.as_str(), end.exit_code), ("exit", 3));
}

#[test]
fn a_program_that_cannot_start_still_gets_run_start_and_run_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let mut l = sh(
        "true",
        &path,
        Failing {
            pid: Arc::new(AtomicU32::new(0)),
            in_event: false,
            in_tick: false,
        },
    );
    l.program = dir.path().join("no-such-program");
    let err = launch(l).expect_err("nothing to start");
    assert!(format!("{err:#}").starts_with("cannot start "), "{err:#}");
    let events = events(&path);
    assert!(matches!(events.first(), Some(Event::RunStart(_))));
    assert_eq!(run_end(&events).status, "runtime_error");
}
