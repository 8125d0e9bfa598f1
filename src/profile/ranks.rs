//! A multi-process run, rank by rank: one events file per rank (`rank<N>.jsonl` in the run
//! folder), each summed up, side by side, with the ranks that died and how, and the straggler: a
//! rank whose median step is clearly above the others' (TorchTPU runs one process per device, so
//! a slow rank holds every other one at each collective).

use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::event::Event;
use super::summary::{Summary, bytes, percentile};

/// A rank is a straggler when its median step is this much above the median of the others'.
pub const STRAGGLER_RATIO: f64 = 1.3;

/// One rank's events file, summed up.
#[derive(Debug, Clone)]
pub struct RankRow {
    pub rank: u32,
    pub file: PathBuf,
    pub summary: Summary,
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

/// How a rank ended, when it was not a clean exit.
fn died(s: &Summary) -> Option<String> {
    let end = s.run_end.as_ref()?;
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
        let text = std::fs::read_to_string(&path)?;
        let events: Vec<Event> = text.lines().filter_map(|l| Event::parse(l).ok()).collect();
        rows.push(RankRow {
            rank,
            file: path,
            summary: Summary::from_events(&events),
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
    if let Some(line) = straggler_line(&stats) {
        s += &line;
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::{RunEnd, Step};

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
}
