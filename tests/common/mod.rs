//! Shared by the integration tests that start real Python: the repository root, the project
//! venv (created once by `scripts/bootstrap`), a `tpuport` command bound to it, reading an events
//! file, and a successful run's stdout.
#![allow(dead_code)] // each test crate uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command as Std, Output};
use std::time::Duration;

use assert_cmd::Command;
use tpuport::profile::event::Event;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The project venv, created (once) by scripts/bootstrap.
pub fn venv() -> PathBuf {
    let out = Std::new("bash")
        .arg(repo().join("scripts/bootstrap"))
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "scripts/bootstrap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(path.lines().last().unwrap().trim())
}

/// `tpuport` with the venv as the script's environment.
pub fn tpuport(venv: &Path, timeout_secs: u64) -> Command {
    let mut c = Command::cargo_bin("tpuport").unwrap();
    c.env("VIRTUAL_ENV", venv)
        .env_remove("PYTHONPATH")
        .timeout(Duration::from_secs(timeout_secs));
    c
}

/// Every line is a valid event; the first is run_start and the last run_end.
pub fn events(path: &Path) -> Vec<Event> {
    let text = fs::read_to_string(path).unwrap();
    let evs: Vec<Event> = text
        .lines()
        .map(|l| Event::parse(l).unwrap_or_else(|e| panic!("invalid event line ({e}): {l}")))
        .collect();
    assert!(
        matches!(evs.first(), Some(Event::RunStart(_))),
        "first event is not run_start"
    );
    assert!(
        matches!(evs.last(), Some(Event::RunEnd(_))),
        "last event is not run_end"
    );
    evs
}

/// The stdout of a run that must have succeeded (both streams shown if it did not).
pub fn success(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
