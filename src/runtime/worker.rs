//! Which runtime runs the agent: CPython embedded in `tpuport-worker` (its own crate, `worker/`,
//! built per CPython minor version, so that `tpuport` itself never links libpython), or the
//! environment's own `python -m tpuport_agent`. A worker is usable for an environment when one
//! built for its `major.minor` sits next to the `tpuport` executable (`tpuport-worker-3.12`,
//! else plain `tpuport-worker` if it was built for that version: `--describe` says) and the
//! environment's installation has a shared libpython; the worker is then started with that
//! installation's library folder first on `LD_LIBRARY_PATH`, so it loads the environment's own
//! libpython. Otherwise the subprocess runs the same agent, and the user is told why once.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::interpreter::{PythonEnv, Runtime};

/// Exit status of the worker when the agent itself fails (not the script): EX_SOFTWARE.
pub const EXIT_AGENT_FAILURE: i32 = 70;

/// A worker that can embed the environment's CPython.
#[derive(Debug, Clone, PartialEq)]
pub struct Worker {
    pub exe: PathBuf,
    /// The folder holding the environment's `libpython3.X.so.1.0`.
    pub libdir: PathBuf,
}

impl Worker {
    /// `LD_LIBRARY_PATH` for the worker: the environment's library folder first.
    pub fn ld_library_path(&self) -> String {
        library_path(&self.libdir)
    }
}

fn library_path(libdir: &Path) -> String {
    match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{old}", libdir.display()),
        _ => libdir.display().to_string(),
    }
}

/// Every worker next to the running `tpuport` that starts here, with the CPython version it
/// embeds (`tpuport --version`), by version.
pub fn installed() -> Vec<(String, PathBuf)> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return vec![];
    };
    let mut out = vec![];
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let exe = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with("tpuport-worker") || name.ends_with(".d") || !exe.is_file() {
            continue;
        }
        // Its own libpython: the run path it was linked with, or the library path as it is.
        let out_of = Command::new(&exe).arg("--describe").output();
        if let Ok(o) = out_of
            && o.status.success()
            && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&o.stdout)
            && let Some(py) = v.get("python").and_then(|p| p.as_str())
        {
            out.push((py.to_string(), exe));
        }
    }
    out.sort();
    out
}

/// The workers next to the running `tpuport`, in the order they are tried for `version`.
fn candidates(version: &str) -> Vec<PathBuf> {
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    else {
        return vec![];
    };
    [format!("tpuport-worker-{version}"), "tpuport-worker".into()]
        .into_iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect()
}

/// The CPython version a worker was built for (`--describe`), run with `libdir` for its
/// libpython; None when it cannot start (no such libpython: not usable here).
pub fn describe(exe: &Path, libdir: &Path) -> Option<String> {
    let out = Command::new(exe)
        .arg("--describe")
        .env("LD_LIBRARY_PATH", library_path(libdir))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v.get("python")?.as_str()?.to_string())
}

/// Embed when a worker for the environment's Python exists and the installation has a shared
/// libpython; otherwise the subprocess, with the reason.
pub fn choose(env: &PythonEnv) -> (Runtime, Option<Worker>, Option<String>) {
    let libdir = env.base_prefix.join("lib");
    let lib = libdir.join(format!("libpython{}.so.1.0", env.version));
    let why = if !lib.exists() && !libdir.join(format!("libpython{}.so", env.version)).exists() {
        format!(
            "its installation ({}) has no shared libpython{} to embed",
            env.base_prefix.display(),
            env.version
        )
    } else {
        let mut found = vec![];
        for exe in candidates(&env.version) {
            match describe(&exe, &libdir) {
                Some(v) if v == env.version => {
                    return (Runtime::Embedded, Some(Worker { exe, libdir }), None);
                }
                Some(v) => found.push(format!("{} (Python {v})", exe.display())),
                None => found.push(format!("{} (does not start here)", exe.display())),
            }
        }
        if found.is_empty() {
            format!(
                "no tpuport-worker for Python {} next to tpuport",
                env.version
            )
        } else {
            format!(
                "no tpuport-worker for Python {} next to tpuport (found: {})",
                env.version,
                found.join(", ")
            )
        }
    };
    (
        Runtime::Subprocess,
        None,
        Some(format!(
            "{} ({}): {why}, so the agent runs as `{} -m tpuport_agent` (same events and features)",
            env.python.display(),
            env.origin,
            env.python.display()
        )),
    )
}
