//! Shared by the integration tests: the repository root, the project venv (created once by
//! `scripts/bootstrap`), a `tpuport` command bound to it, reading an events file, a successful
//! run's stdout, the lines `migrate --output-format json` reports, and the tools venv
//! (`scripts/bootstrap-tools`).

use std::fs;
use std::io::Write as _;
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

/// The lines each diagnostic covers, from `--output-format json`.
pub fn diagnostic_lines(json: &[u8]) -> Vec<usize> {
    let diags: serde_json::Value = serde_json::from_slice(json).unwrap();
    diags
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| {
            let a = d["line"].as_u64().unwrap() as usize;
            let b = d["end_line"].as_u64().unwrap() as usize;
            a..=b
        })
        .collect()
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

/// The tools venv of `scripts/bootstrap-tools` (jsonschema, nbformat) for `what`, or None
/// where it cannot be had outside CI (under CI, or with TPUPORT_REQUIRE_TOOLS=1, it must be).
pub fn tools_venv(what: &str) -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("TPUPORT_TOOLS_VENV").filter(|v| !v.is_empty()) {
        let v = PathBuf::from(v);
        assert!(
            v.join("bin/python").exists(),
            "TPUPORT_TOOLS_VENV={} has no bin/python: unset it or run scripts/bootstrap-tools",
            v.display()
        );
        return Some(v);
    }
    let out = Std::new("bash")
        .arg(repo().join("scripts/bootstrap-tools"))
        .output()
        .expect("bash");
    if out.status.success() {
        let path = String::from_utf8(out.stdout).unwrap();
        return Some(PathBuf::from(path.lines().last().unwrap().trim()));
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"));
    let required = std::env::var("TPUPORT_REQUIRE_TOOLS").is_ok_and(|v| v == "1");
    assert!(
        !ci && !required,
        "scripts/bootstrap-tools failed, and CI or TPUPORT_REQUIRE_TOOLS=1 requires {what} (it \
         needs PyPI once to install python/requirements-tools.txt):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {what}, no tools venv (run `bash scripts/bootstrap-tools`)"
    );
    None
}

/// The step events of an events file.
pub fn steps(path: &Path) -> usize {
    events(path)
        .iter()
        .filter(|e| matches!(e, Event::Step(_)))
        .count()
}

/// A temporary project folder that declares the torch it runs (`requirements.txt`:
/// `torch>=2.11`), so the portable forms are written alone: a project that declares no torch
/// keeps its original beside each of them (tests/integration/portable.rs tests that).
pub fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("requirements.txt"), "torch>=2.11\n").unwrap();
    dir
}
