//! A multi-process run, rank by rank: one events file per rank (`rank<N>.jsonl` in the run
//! folder), each summed up, side by side, with the ranks that died and how, and the straggler: a
//! rank whose median step is clearly above the others' (TorchTPU runs one process per device, so
//! a slow rank holds every other one at each collective).

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::follow;
use super::skipped::Skipped;
use super::summary::{Summary, bytes, percentile};

/// A rank is a straggler when its median step is this much above the median of the others'.
pub const STRAGGLER_RATIO: f64 = 1.3;

/// One rank's events file, summed up.
#[derive(Debug, Clone)]
pub struct RankRow {
    pub rank: u32,
    pub file: PathBuf,
    pub summary: Summary,
    /// Lines of its file that were skipped (unreadable, unknown event types).
    pub skipped: Skipped,
}

/// One rank's numbers over some of its steps (the whole run at the end; the time window in the
/// dashboard).
#[derive(Debug, Clone, PartialEq)]
pub struct RankStats {
    pub rank: u32,
    /// `run_end.status`; None while the rank runs (or its file was cut short).
    pub status: Option<String>,
    pub steps: u64,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    /// Median over the steady steps of (step time − time in collectives): the rank's own work.
    pub busy_median: Option<f64>,
    /// Median time per step spent in collectives (waiting, mostly).
    pub collective_median: Option<f64>,
    /// Peak device memory, else peak RSS.
    pub peak: Option<u64>,
    /// How the rank died, if it did.
    pub died: Option<String>,
}

impl RankStats {
    /// The numbers of steps `range` (0-based indexes) of a rank's summary; like the summary's
    /// own statistics, the start-up step and the HBM tracker's sampled steps are left out.
    pub fn of(rank: u32, s: &Summary, range: Range<usize>) -> RankStats {
        let steady: Vec<usize> = range
            .filter(|&i| i < s.step_times.len() && s.steady_step(i))
            .collect();
        let collective = |i: usize| s.step_collective.get(i).copied().unwrap_or(0.0) as f64;
        let times: Vec<f64> = steady.iter().map(|&i| s.step_times[i]).collect();
        let busy: Vec<f64> = steady
            .iter()
            .map(|&i| (s.step_times[i] - collective(i)).max(0.0))
            .collect();
        let coll: Vec<f64> = steady.iter().map(|&i| collective(i)).collect();
        RankStats {
            rank,
            status: s.run_end.as_ref().map(|e| e.status.clone()),
            steps: s.steps,
            median: percentile(&times, 0.5),
            p90: percentile(&times, 0.9),
            busy_median: percentile(&busy, 0.5),
            collective_median: percentile(&coll, 0.5),
            peak: s.peak_device.or(s.peak_rss),
            died: died(s),
        }
    }
}

/// How a rank ended, when it was not a clean exit; stopped while waiting in a collective, which
/// one, where, and for how long.
fn died(s: &Summary) -> Option<String> {
    let end = s.run_end.as_ref()?;
    let how = how_it_died(s, end)?;
    Some(match (&s.waiting, end.status.as_str()) {
        (Some(w), "signal" | "timeout" | "interrupted") => format!(
            "{how}, waiting in {} ({}:{}) for {:.1} s",
            w.op,
            std::path::Path::new(&w.file)
                .file_name()
                .map_or(w.file.as_str().into(), |n| n.to_string_lossy()),
            w.line,
            (end.t - w.since).max(0.0)
        ),
        _ => how,
    })
}

fn how_it_died(s: &Summary, end: &crate::profile::event::RunEnd) -> Option<String> {
    match end.status.as_str() {
        "ok" => None,
        "signal" => Some(format!(
            "killed by signal {} after {} steps",
            end.signal.unwrap_or(0),
            s.steps
        )),
        "timeout" => Some(format!(
            "stopped by --timeout (hung?) after {} steps",
            s.steps
        )),
        "exception" => Some(format!(
            "{} after {} steps",
            end.exception
                .as_ref()
                .map(|e| format!("{}: {}", e.kind, e.message.lines().next().unwrap_or("")))
                .unwrap_or_else(|| "an exception".into()),
            s.steps
        )),
        other => Some(format!(
            "{other} (exit {}) after {} steps",
            end.exit_code, s.steps
        )),
    }
}

/// The rank a per-rank events file belongs to: `rank<N>.jsonl`.
pub fn rank_of(path: &Path) -> Option<u32> {
    path.file_name()?
        .to_str()?
        .strip_prefix("rank")?
        .strip_suffix(".jsonl")?
        .parse()
        .ok()
}

/// The per-rank files of a run folder (`rank<N>.jsonl`), in rank order.
pub fn read_folder(dir: &Path) -> Result<Vec<RankRow>> {
    let mut rows = vec![];
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = e?.path();
        let Some(rank) = rank_of(&path) else {
            continue;
        };
        let (events, skipped) = follow::read_events(&path)?;
        rows.push(RankRow {
            rank,
            file: path,
            summary: Summary::from_events(&events),
            skipped,
        });
    }
    rows.sort_by_key(|r| r.rank);
    Ok(rows)
}

/// Whole-run numbers of each rank.
pub fn whole_run(rows: &[RankRow]) -> Vec<RankStats> {
    rows.iter()
        .map(|r| RankStats::of(r.rank, &r.summary, 0..r.summary.step_times.len()))
        .collect()
}

/// The straggler, if one rank's own work per step (median of step time minus the time it spent
/// in collectives: a fast rank waits there for the slow one) is clearly above the others':
/// (rank, its median, the others' median).
pub fn straggler(stats: &[RankStats]) -> Option<(u32, f64, f64)> {
    let medians: Vec<(u32, f64)> = stats
        .iter()
        .filter_map(|r| Some((r.rank, r.busy_median?)))
        .collect();
    if medians.len() < 2 {
        return None;
    }
    let (rank, slowest) = medians.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let mut others: Vec<f64> = medians
        .iter()
        .filter(|(r, _)| *r != rank)
        .map(|m| m.1)
        .collect();
    others.sort_by(f64::total_cmp);
    let typical = others[others.len() / 2];
    (typical > 0.0 && slowest > STRAGGLER_RATIO * typical).then_some((rank, slowest, typical))
}

/// `rank 1 is a straggler: ...` for the straggler, if any.
pub fn straggler_line(stats: &[RankStats]) -> Option<String> {
    let (rank, slow, typical) = straggler(stats)?;
    Some(format!(
        "rank {rank} is a straggler: its own work takes {:.1} ms a step (step time less time in collectives) against {:.1} ms for the others (×{:.1}); they wait for it in every collective",
        slow * 1e3,
        typical * 1e3,
        slow / typical
    ))
}

/// When the job ended with some ranks waiting in a collective and others not (stopped by
/// `--timeout` or a signal outside any collective): those others are the ranks waited for.
pub fn awaited_line(rows: &[RankRow], stats: &[RankStats]) -> Option<String> {
    let stopped: Vec<(u32, bool)> = rows
        .iter()
        .zip(stats)
        .filter(|(_, st)| st.died.is_some())
        .map(|(r, st)| (st.rank, r.summary.waiting.is_some()))
        .collect();
    let list = |waiting: bool| -> Vec<String> {
        stopped
            .iter()
            .filter(|s| s.1 == waiting)
            .map(|s| s.0.to_string())
            .collect()
    };
    let (waited, awaited) = (list(true), list(false));
    let ranks = |l: &[String]| {
        format!(
            "rank{} {}",
            if l.len() > 1 { "s" } else { "" },
            l.join(", ")
        )
    };
    (!waited.is_empty() && !awaited.is_empty()).then(|| {
        format!(
            "{} {} outside any collective when stopped, while {} waited in one: look at {} (hung, or too slow)",
            ranks(&awaited),
            if awaited.len() > 1 { "were" } else { "was" },
            ranks(&waited),
            ranks(&awaited),
        )
    })
}

/// The table printed at the end of a multi-process run.
pub fn render(rows: &[RankRow]) -> String {
    let ms = |s: Option<f64>| {
        s.map(|v| format!("{:.1} ms", v * 1e3))
            .unwrap_or_else(|| "–".into())
    };
    let stats = whole_run(rows);
    let mut s = format!(
        "{:<5} {:<10} {:>6} {:>11} {:>11} {:>13} {:>12}  {}\n",
        "rank", "status", "steps", "median", "p90", "collectives", "peak memory", "events"
    );
    for (r, st) in rows.iter().zip(&stats) {
        s += &format!(
            "{:<5} {:<10} {:>6} {:>11} {:>11} {:>13} {:>12}  {}\n",
            st.rank,
            st.status.as_deref().unwrap_or("running?"),
            st.steps,
            ms(st.median),
            ms(st.p90),
            ms(st.collective_median),
            st.peak.map(bytes).unwrap_or_else(|| "–".into()),
            r.file.display()
        );
    }
    for st in &stats {
        if let Some(why) = &st.died {
            s += &format!("rank {} died: {why}\n", st.rank);
        }
    }
    for r in rows {
        if let Some(d) = r.skipped.describe() {
            s += &format!("rank {}: {}: {d}\n", r.rank, r.file.display());
        }
    }
    if let Some(line) = awaited_line(rows, &stats) {
        s += &line;
        s.push('\n');
    }
    if let Some(line) = straggler_line(&stats) {
        s += &line;
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::{Event, RunEnd, Step};

    fn rank(r: u32, steps: &[(f64, f64)], status: &str) -> RankRow {
        let mut s = Summary::default();
        for (i, (dt, coll)) in steps.iter().enumerate() {
            let mut step = Step {
                step: i as u64 + 1,
                dt: *dt,
                ..Default::default()
            };
            step.extra.insert("collective_s".into(), (*coll).into());
            s.add(&Event::Step(step));
        }
        s.add(&Event::RunEnd(RunEnd {
            status: status.into(),
            signal: (status == "signal").then_some(9),
            exit_code: if status == "ok" { 0 } else { 137 },
            ..Default::default()
        }));
        RankRow {
            rank: r,
            file: PathBuf::from(format!("rank{r}.jsonl")),
            summary: s,
            skipped: Skipped::default(),
        }
    }

    #[test]
    fn the_slow_rank_is_the_straggler_and_the_dead_one_is_named() {
        // Every rank's step takes as long (they wait for each other in the collectives); the
        // slow one's own work is what differs.
        let rows = vec![
            rank(
                0,
                &[(0.5, 0.0), (0.060, 0.050), (0.061, 0.050), (0.060, 0.049)],
                "ok",
            ),
            rank(
                1,
                &[(0.5, 0.0), (0.060, 0.001), (0.062, 0.002), (0.061, 0.001)],
                "ok",
            ),
            rank(
                2,
                &[(0.5, 0.0), (0.061, 0.050), (0.060, 0.049), (0.061, 0.050)],
                "signal",
            ),
        ];
        let stats = whole_run(&rows);
        assert!((stats[0].median.unwrap() - 0.060).abs() < 1e-9);
        let (r, slow, typical) = straggler(&stats).unwrap();
        assert_eq!(r, 1);
        assert!(slow > 0.05 && typical < 0.02, "{slow} {typical}");
        let text = render(&rows);
        assert!(text.contains("rank 1 is a straggler"), "{text}");
        assert!(
            text.contains("rank 2 died: killed by signal 9 after 4 steps"),
            "{text}"
        );
        // Over a range (the dashboard's window): the first step is not steady, the rest count.
        let w = RankStats::of(1, &rows[1].summary, 2..4);
        assert!((w.median.unwrap() - 0.0615).abs() < 1e-9, "{w:?}");
        // Even ranks: no straggler.
        let even = whole_run(&[
            rank(0, &[(0.5, 0.0), (0.010, 0.0), (0.011, 0.0)], "ok"),
            rank(1, &[(0.5, 0.0), (0.011, 0.0), (0.012, 0.0)], "ok"),
        ]);
        assert!(straggler(&even).is_none());
        assert_eq!(rank_of(Path::new("runs/x/rank12.jsonl")), Some(12));
        assert_eq!(rank_of(Path::new("runs/x/a.jsonl")), None);
    }

    /// A job stopped by `--timeout`: the rank that waited in a collective says so (a
    /// `CollectiveWait` warning after its last step), and the rank outside any is named.
    #[test]
    fn the_rank_the_others_waited_for_is_named() {
        use crate::profile::event::Warning;
        let mut waiting = rank(0, &[(0.5, 0.0), (0.06, 0.05)], "timeout");
        let end = waiting
            .summary
            .run_end
            .clone()
            .map(|e| RunEnd { t: 20.0, ..e });
        waiting.summary.run_end = None;
        let mut w = Warning {
            t: 3.0,
            category: "CollectiveWait".into(),
            file: "/x/ranks.py".into(),
            line: 24,
            ..Default::default()
        };
        w.extra.insert("op".into(), "all_reduce".into());
        w.extra.insert("since".into(), 1.0.into());
        waiting.summary.add(&Event::Warning(w));
        waiting.summary.add(&Event::RunEnd(end.unwrap()));
        let hung = rank(1, &[(0.5, 0.0), (0.06, 0.001)], "timeout");
        let text = render(&[waiting.clone(), hung]);
        assert!(
            text.contains(
                "rank 0 died: stopped by --timeout (hung?) after 2 steps, waiting in all_reduce (ranks.py:24) for 19.0 s"
            ),
            "{text}"
        );
        assert!(
            text.contains("rank 1 died: stopped by --timeout (hung?) after 2 steps\n"),
            "{text}"
        );
        assert!(
            text.contains("rank 1 was outside any collective when stopped, while rank 0 waited in one: look at rank 1"),
            "{text}"
        );
        // A wait that ended (a step came after it) is no longer a wait.
        waiting.summary.add(&Event::Step(Step {
            step: 3,
            dt: 0.06,
            ..Default::default()
        }));
        assert!(waiting.summary.waiting.is_none());
    }
}
