//! The child process: spawned in its own process group with the events pipe as fd 3, held in a
//! [`ChildGuard`] that kills the whole group and reaps the child if the launcher stops early
//! (std's `Child` does not kill on drop), and signalled as a group. Also the handlers that
//! count our own Ctrl-C/SIGTERM, which the launcher forwards.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};

/// The fd the agent writes events to, in the child.
pub const EVENTS_FD: i32 = 3;

/// A pipe whose ends close on exec (the child gets the write end as fd 3 by `dup2`).
pub fn events_pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("cannot create the events pipe");
    }
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Start `program args` in a new process group, stdout and stderr piped, `events_w` as fd 3;
/// stdin is ours only if `inherit_stdin` (with a dashboard the terminal's keys are its own).
pub fn spawn(
    program: &Path,
    args: &[String],
    env: &BTreeMap<String, Option<String>>,
    events_w: OwnedFd,
    inherit_stdin: bool,
) -> std::io::Result<ChildGuard> {
    let mut cmd = Command::new(program);
    let stdin = if inherit_stdin {
        Stdio::inherit()
    } else {
        Stdio::null()
    };
    cmd.args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (k, v) in env {
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
    // Only the child writes events: our copy of the write end goes, so EOF comes when it exits.
    drop(events_w);
    let child = child?;
    Ok(ChildGuard {
        pgid: child.id() as i32,
        child,
        reaped: false,
    })
}

/// The running child. Dropped before it was reaped, it kills the child's process group
/// (SIGKILL) and reaps the child, so no early return leaves the script running.
pub struct ChildGuard {
    child: Child,
    pgid: i32,
    reaped: bool,
}

impl ChildGuard {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child's stdout and stderr pipes (once).
    pub fn take_output(&mut self) -> (Option<ChildStdout>, Option<ChildStderr>) {
        (self.child.stdout.take(), self.child.stderr.take())
    }

    /// Send `sig` to the child's process group (the script and anything it started).
    pub fn signal_group(&self, sig: i32) {
        unsafe {
            libc::kill(-self.pgid, sig);
        }
    }

    /// The child's exit status if it has exited (it is then reaped).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Kill the child's process group and reap the child, unless it was already reaped.
    pub fn kill(&mut self) {
        if !self.reaped {
            self.signal_group(libc::SIGKILL);
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Count SIGINT and SIGTERM in `count` instead of dying of them: Ctrl-C belongs to us (the
/// child runs in its own process group) and is forwarded by the launcher.
pub fn count_interrupts(count: &Arc<AtomicUsize>) -> Vec<signal_hook::SigId> {
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
