//! `tpuport top FILE|DIR`: the dashboard over events files written by a job started elsewhere,
//! followed live (notify, with a slow poll as a safety net). A folder holds one file per rank;
//! `n`/`p` switch between them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use notify::{RecursiveMode, Watcher};

use super::app::Action;
use super::live::Dashboard;
use crate::profile::aggregate::Aggregator;
use crate::profile::follow::{Follower, events_files};

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
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf()
    };
    let (tx, rx) = mpsc::channel::<()>();
    let mut watcher = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        let _ = tx.send(());
    })
    .context("cannot watch for file changes (inotify)")?;
    // The folder, not the file: a rotated or re-created file is seen too.
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", dir.display()))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }

    let mut files: Vec<(Follower, Aggregator)> = vec![];
    let mut cur = 0usize;
    let mut dash = Dashboard::start(true)?;
    loop {
        // New per-rank files appear as the job starts.
        for f in events_files(path)? {
            if !files.iter().any(|(fo, _)| fo.path == f) {
                files.push((Follower::new(&f), Aggregator::new()));
            }
        }
        for (i, (fo, agg)) in files.iter_mut().enumerate() {
            let target = if i == cur { &mut dash.agg } else { agg };
            let polled = fo.poll(target)?;
            if polled.restarted && i == cur {
                dash.app.ended = false;
                dash.app.show_summary = false;
            }
        }
        let source = label(&files, cur, path);
        if source != dash.source {
            dash.source = source;
            dash.app.dirty = true;
        }
        if dash.agg.run_end().is_some() {
            dash.app.script_ended();
        }
        for a in dash.tick()? {
            match a {
                Action::Leave | Action::Interrupt => return Ok(0),
                Action::NextFile | Action::PrevFile if files.len() > 1 => {
                    let next = if a == Action::NextFile {
                        (cur + 1) % files.len()
                    } else {
                        (cur + files.len() - 1) % files.len()
                    };
                    std::mem::swap(&mut dash.agg, &mut files[cur].1);
                    std::mem::swap(&mut dash.agg, &mut files[next].1);
                    cur = next;
                    dash.app.ended = dash.agg.run_end().is_some();
                    dash.app.show_summary = dash.app.ended;
                    dash.app.dirty = true;
                }
                _ => {}
            }
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(0);
        }
        // Woken by a file change, or after a while anyway (notify can miss events on some
        // file systems).
        let _ = rx.recv_timeout(Duration::from_millis(100));
        while rx.try_recv().is_ok() {}
    }
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
