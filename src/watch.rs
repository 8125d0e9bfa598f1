//! Change notification for `--watch` (`tpuport migrate --watch`, `tpuport run --watch`): the
//! Python files under some paths, through `notify` (inotify), debounced so that an editor's
//! burst of writes (temp file, rename, chmod) is one change, with `__pycache__` and anything
//! that is not a `.py` file (events files, checkpoints, logs) left out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use notify::{EventKind, RecursiveMode, Watcher};

/// How long the files must stay quiet before a change is reported.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

pub struct Changes {
    rx: mpsc::Receiver<PathBuf>,
    // Kept alive: it feeds `rx`.
    _watcher: notify::RecommendedWatcher,
    /// Files that count even though they are not `.py` (a script named without the suffix).
    extra: BTreeSet<PathBuf>,
    pending: BTreeSet<PathBuf>,
    last: Option<Instant>,
}

impl Changes {
    /// Watch `paths`: a folder with everything under it (`recursive`) or only its own files, a
    /// file through its folder (an editor that replaces the file is seen too).
    pub fn new(paths: &[PathBuf], recursive: bool) -> Result<Changes> {
        let (tx, rx) = mpsc::channel::<PathBuf>();
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(e) = res
                && !matches!(e.kind, EventKind::Access(_))
            {
                for p in e.paths {
                    let _ = tx.send(p);
                }
            }
        })
        .context("cannot watch for file changes (inotify)")?;
        let mut extra = BTreeSet::new();
        for p in paths {
            let (dir, mode) = if p.is_dir() {
                let mode = if recursive {
                    RecursiveMode::Recursive
                } else {
                    RecursiveMode::NonRecursive
                };
                (p.clone(), mode)
            } else {
                extra.insert(absolute(p));
                let dir = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                (dir.to_path_buf(), RecursiveMode::NonRecursive)
            };
            watcher
                .watch(&dir, mode)
                .with_context(|| format!("cannot watch {} for changes (--watch)", dir.display()))?;
        }
        Ok(Changes {
            rx,
            _watcher: watcher,
            extra,
            pending: BTreeSet::new(),
            last: None,
        })
    }

    fn counts(&self, p: &Path) -> bool {
        if p.components().any(|c| c.as_os_str() == "__pycache__") {
            return false;
        }
        p.extension().is_some_and(|e| e == "py") || self.extra.contains(&absolute(p))
    }

    /// The Python files that changed, once they have been quiet for [`DEBOUNCE`]; waits at most
    /// `timeout` (empty: nothing yet).
    pub fn wait(&mut self, timeout: Duration) -> Vec<PathBuf> {
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            let until = match self.last {
                Some(t) => (t + DEBOUNCE).min(deadline),
                None => deadline,
            };
            match self.rx.recv_timeout(until.saturating_duration_since(now)) {
                Ok(p) => {
                    if self.counts(&p) {
                        self.pending.insert(p);
                        self.last = Some(Instant::now());
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => return vec![],
            }
            let now = Instant::now();
            if self.last.is_some_and(|t| now >= t + DEBOUNCE) {
                self.last = None;
                return std::mem::take(&mut self.pending).into_iter().collect();
            }
            if now >= deadline {
                return vec![];
            }
        }
    }

    /// Forget what changed so far (the files a run itself writes, before it is re-run).
    pub fn clear(&mut self) {
        while self.rx.try_recv().is_ok() {}
        self.pending.clear();
        self.last = None;
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_writes_is_one_change_and_other_files_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let py = dir.path().join("train.py");
        std::fs::write(&py, "x = 1\n").unwrap();
        let mut c = Changes::new(&[dir.path().to_path_buf()], true).unwrap();
        assert!(c.wait(Duration::from_millis(50)).is_empty());
        for i in 0..5 {
            std::fs::write(&py, format!("x = {i}\n")).unwrap();
        }
        std::fs::write(dir.path().join("events.jsonl"), "{}\n").unwrap();
        std::fs::create_dir(dir.path().join("__pycache__")).unwrap();
        std::fs::write(dir.path().join("__pycache__/train.cpython-311.pyc"), "").unwrap();
        let changed = c.wait(Duration::from_secs(5));
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert!(changed[0].ends_with("train.py"));
        assert!(c.wait(Duration::from_millis(500)).is_empty());
    }
}
