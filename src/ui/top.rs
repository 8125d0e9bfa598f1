//! `tpuport top FILE|DIR`: the dashboard over events files written by a job started elsewhere,
//! followed live (notify, with a slow poll as a safety net). A folder holds one file per rank;
//! `n`/`p` switch between them, and a ranks pane shows every rank at once. [`Follow`] is also
//! what `tpuport run --nproc` shows while its job runs.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use notify::{RecursiveMode, Watcher};

use super::app::Action;
use super::live::Dashboard;
use crate::profile::aggregate::Aggregator;
use crate::profile::follow::{Follower, events_files};
use crate::profile::ranks::RankStats;
use crate::runtime::ranks::RanksObserver;

pub fn run(path: &Path) -> Result<i32> {
    // A file that does not exist yet is waited for (the job may not have started), as long as
    // its folder exists.
    let parent_exists = path
        .parent()
        .map(|p| p.as_os_str().is_empty() || p.is_dir())
        .unwrap_or(false);
    if !path.exists() && !parent_exists {
        bail!(
            "{}: no such file or folder; pass an events file (runs/*.jsonl) or a folder of them",
            path.display()
        );
    }
    if !std::io::stdout().is_terminal() {
        bail!(
            "tpuport top draws a dashboard and needs a terminal; for a file, use `tpuport report {}`",
            path.display()
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let mut follow = Follow::start(path, true)?;
    loop {
        if follow.poll()?.is_some() || stop.load(Ordering::SeqCst) {
            return Ok(0);
        }
        follow.wait();
    }
}

/// The dashboard following a file or a folder of per-rank files: `tpuport top`, and the view of
/// `tpuport run --nproc` while its job runs.
pub struct Follow {
    path: PathBuf,
    // Kept alive: it feeds `rx`.
    _watcher: notify::RecommendedWatcher,
    rx: mpsc::Receiver<()>,
    /// In rank order (`rank<N>.jsonl`; other files after them, as found).
    files: Vec<(Follower, Aggregator)>,
    cur: usize,
    /// The user chose a file (`n`/`p`); until then the view follows the lowest rank.
    chosen: bool,
    dash: Dashboard,
    ranks_at: Option<Instant>,
    ranks_generation: u64,
    /// `run --nproc`: the job still runs, so a rank that ended does not end the view (`q` asks
    /// to stop the job, not to leave).
    job_running: bool,
}

impl Follow {
    /// Watch `path` (a file, or a folder of `*.jsonl`) and take over the terminal. `attached`:
    /// there is no job to stop (`tpuport top`), `q` leaves at once.
    pub fn start(path: &Path, attached: bool) -> Result<Follow> {
        let dir = if path.is_dir() {
            path.to_path_buf()
        } else {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        };
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
                let _ = tx.send(());
            })
            .context("cannot watch for file changes (inotify)")?;
        // The folder, not the file: a rotated or re-created file is seen too.
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .with_context(|| format!("cannot watch {}", dir.display()))?;
        Ok(Follow {
            path: path.to_path_buf(),
            _watcher: watcher,
            rx,
            files: vec![],
            cur: 0,
            chosen: false,
            dash: Dashboard::start(attached)?,
            ranks_at: None,
            ranks_generation: u64::MAX,
            job_running: !attached,
        })
    }

    /// Read what the files gained, handle the keys, redraw if due. Returns Leave or Interrupt
    /// when the user asked for it.
    pub fn poll(&mut self) -> Result<Option<Action>> {
        // New per-rank files appear as the job starts.
        // They keep rank order whichever file appears first; until the user picks one, the view
        // shows the lowest rank.
        for f in events_files(&self.path)? {
            if !self.files.iter().any(|(fo, _)| fo.path == f) {
                let key = |p: &Path| crate::profile::ranks::rank_of(p).unwrap_or(u32::MAX);
                let at = self
                    .files
                    .iter()
                    .position(|(fo, _)| key(&fo.path) > key(&f))
                    .unwrap_or(self.files.len());
                self.files
                    .insert(at, (Follower::new(&f), Aggregator::new()));
                if self.files.len() > 1 && at <= self.cur {
                    self.cur += 1;
                    if !self.chosen {
                        self.show(0);
                    }
                }
            }
        }
        let cur = self.cur;
        let dash = &mut self.dash;
        for (i, (fo, agg)) in self.files.iter_mut().enumerate() {
            let target = if i == cur { &mut dash.agg } else { agg };
            let polled = fo.poll(target)?;
            if polled.restarted && i == cur {
                dash.app.ended = false;
                dash.app.show_summary = false;
            }
        }
        self.update_ranks();
        let source = label(&self.files, self.cur, &self.path);
        if source != self.dash.source {
            self.dash.source = source;
            self.dash.app.dirty = true;
        }
        if self.dash.agg.run_end().is_some() && !self.job_running {
            self.dash.app.script_ended();
        }
        for a in self.dash.tick()? {
            match a {
                Action::Leave | Action::Interrupt => return Ok(Some(a)),
                Action::NextFile | Action::PrevFile if self.files.len() > 1 => {
                    let n = self.files.len();
                    let next = if a == Action::NextFile {
                        (self.cur + 1) % n
                    } else {
                        (self.cur + n - 1) % n
                    };
                    self.chosen = true;
                    self.show(next);
                }
                _ => {}
            }
        }
        Ok(None)
    }

    /// Show file `next`: the dashboard's aggregator goes back to the current file's slot and
    /// takes the next one's.
    fn show(&mut self, next: usize) {
        std::mem::swap(&mut self.dash.agg, &mut self.files[self.cur].1);
        std::mem::swap(&mut self.dash.agg, &mut self.files[next].1);
        self.cur = next;
        self.dash.app.ended = self.dash.agg.run_end().is_some() && !self.job_running;
        self.dash.app.show_summary = self.dash.app.ended;
        self.dash.app.dirty = true;
    }

    /// The ranks table costs a sort of each rank's window: at most twice a second, and only
    /// when a file moved.
    fn update_ranks(&mut self) {
        let generations: u64 = self.files.iter().map(|(_, a)| a.generation).sum::<u64>()
            + self.dash.agg.generation
            + self.cur as u64;
        let due = self
            .ranks_at
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(500));
        if !due || generations == self.ranks_generation {
            return;
        }
        self.ranks_at = Some(Instant::now());
        self.ranks_generation = generations;
        let ranks = rank_stats(&self.files, self.cur, &self.dash.agg, &self.dash.app);
        if ranks != self.dash.ranks {
            self.dash.ranks = ranks;
            self.dash.current_rank = self
                .files
                .get(self.cur)
                .map(|(fo, _)| rank_number(&fo.path, self.cur));
            self.dash.app.dirty = true;
        }
    }

    /// Wait for a file change, or a while anyway (notify can miss events on some file systems).
    pub fn wait(&self) {
        let _ = self.rx.recv_timeout(Duration::from_millis(100));
        while self.rx.try_recv().is_ok() {}
    }

    /// The job has ended: the summary screen stays until the user leaves (or `stop` says so).
    pub fn wait_until_leave(&mut self, stop: impl Fn() -> bool) -> Result<()> {
        // A last read: the ranks' final events.
        self.job_running = false;
        self.ranks_at = None;
        self.poll()?;
        self.dash.wait_until_leave(stop)
    }
}

impl RanksObserver for Follow {
    fn tick(&mut self) -> Result<bool> {
        let interrupt = matches!(self.poll()?, Some(Action::Interrupt | Action::Leave));
        self.wait();
        Ok(interrupt)
    }

    fn finish(&mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        self.wait_until_leave(stop)
    }
}

/// A file's rank: `rank<N>.jsonl`, else its place in the folder.
fn rank_number(path: &Path, i: usize) -> u32 {
    crate::profile::ranks::rank_of(path).unwrap_or(i as u32)
}

/// Every rank's numbers over the dashboard's time window (each rank's own clock), when the
/// folder holds more than one file. The file on screen lives in the dashboard's aggregator.
pub fn rank_stats(
    files: &[(Follower, Aggregator)],
    cur: usize,
    shown: &Aggregator,
    app: &super::app::App,
) -> Vec<RankStats> {
    if files.len() < 2 {
        return vec![];
    }
    let mut out: Vec<RankStats> = files
        .iter()
        .enumerate()
        .map(|(i, (fo, agg))| {
            let agg = if i == cur { shown } else { agg };
            let (from, to) = app.view(agg.last_t);
            let range = agg.step_index_at(from)..agg.step_t.partition_point(|&x| x <= to);
            RankStats::of(rank_number(&fo.path, i), &agg.summary, range)
        })
        .collect();
    out.sort_by_key(|r| r.rank);
    out
}

fn label(files: &[(Follower, Aggregator)], cur: usize, root: &Path) -> Option<String> {
    let name = |p: &PathBuf| {
        p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default()
    };
    match files.len() {
        0 => Some(format!("waiting for *.jsonl in {}", root.display())),
        1 => Some(name(&files[0].0.path)),
        n => Some(format!("{} ({}/{n})", name(&files[cur].0.path), cur + 1)),
    }
}
