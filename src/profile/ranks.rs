//! A multi-process run, rank by rank: one events file per rank (`rank<N>.jsonl` in the run
//! folder), each summed up, side by side, with the ranks that died and how, and the straggler: a
//! rank whose median step is clearly above the others' (TorchTPU runs one process per device, so
//! a slow rank holds every other one at each collective).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::event::Event;
use super::summary::{Summary, bytes};

/// A rank is a straggler when its median step is this much above the median of the others'.
pub const STRAGGLER_RATIO: f64 = 1.3;

#[derive(Debug, Clone)]
pub struct RankRow {
    pub rank: u32,
    pub file: PathBuf,
    pub summary: Summary,
    /// Median over the steps after the first of (step time − time in collectives).
    pub busy_median: Option<f64>,
    /// Median time per step spent in collectives (waiting, mostly).
    pub collective_median: Option<f64>,
}

/// (busy, collective) medians from the step events, the first step left out when there are more.
fn busy(events: &[Event]) -> (Option<f64>, Option<f64>) {
    let steps: Vec<(f64, f64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Step(s) => {
                let c = s
                    .extra
                    .get("collective_s")
                    .and_then(|v| v.as_f64())
                    .unwrap_or(0.0);
                Some(((s.dt - c).max(0.0), c))
            }
            _ => None,
        })
        .collect();
    let steps = if steps.len() > 2 {
        &steps[1..]
    } else {
        &steps[..]
    };
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    (
        median(steps.iter().map(|s| s.0).collect()),
        median(steps.iter().map(|s| s.1).collect()),
    )
}

impl RankRow {
    pub fn died(&self) -> Option<String> {
        let end = self.summary.run_end.as_ref()?;
        match end.status.as_str() {
            "ok" => None,
            "signal" => Some(format!(
                "killed by signal {} after {} steps",
                end.signal.unwrap_or(0),
                self.summary.steps
            )),
            "exception" => Some(format!(
                "{} after {} steps",
                end.exception
                    .as_ref()
                    .map(|e| format!("{}: {}", e.kind, e.message.lines().next().unwrap_or("")))
                    .unwrap_or_else(|| "an exception".into()),
                self.summary.steps
            )),
            other => Some(format!(
                "{other} (exit {}) after {} steps",
                end.exit_code, self.summary.steps
            )),
        }
    }
}

/// The per-rank files of a run folder (`rank<N>.jsonl`), in rank order.
pub fn read_folder(dir: &Path) -> Result<Vec<RankRow>> {
    let mut rows = vec![];
    for e in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = e?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let Some(rank) = name
            .strip_prefix("rank")
            .and_then(|r| r.strip_suffix(".jsonl"))
            .and_then(|r| r.parse::<u32>().ok())
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path)?;
        let events: Vec<Event> = text.lines().filter_map(|l| Event::parse(l).ok()).collect();
        let (busy_median, collective_median) = busy(&events);
        rows.push(RankRow {
            rank,
            file: path,
            summary: Summary::from_events(&events),
            busy_median,
            collective_median,
        });
    }
    rows.sort_by_key(|r| r.rank);
    Ok(rows)
}

/// The straggler, if one rank's own work per step (median of step time minus the time it spent
/// in collectives: a fast rank waits there for the slow one) is clearly above the others':
/// (rank, its median, the others' median).
pub fn straggler(rows: &[RankRow]) -> Option<(u32, f64, f64)> {
    let medians: Vec<(u32, f64)> = rows
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

/// The table printed at the end of a multi-process run.
pub fn render(rows: &[RankRow]) -> String {
    let ms = |s: Option<f64>| {
        s.map(|v| format!("{:.1} ms", v * 1e3))
            .unwrap_or_else(|| "–".into())
    };
    let mut s = format!(
        "{:<5} {:<10} {:>6} {:>11} {:>11} {:>13} {:>12}  {}\n",
        "rank", "status", "steps", "median", "p90", "collectives", "peak memory", "events"
    );
    for r in rows {
        let status = r
            .summary
            .run_end
            .as_ref()
            .map(|e| e.status.clone())
            .unwrap_or_else(|| "running?".into());
        s += &format!(
            "{:<5} {:<10} {:>6} {:>11} {:>11} {:>13} {:>12}  {}\n",
            r.rank,
            status,
            r.summary.steps,
            ms(r.summary.median_step()),
            ms(r.summary.p90_step()),
            ms(r.collective_median),
            r.summary
                .peak_device
                .or(r.summary.peak_rss)
                .map(bytes)
                .unwrap_or_else(|| "–".into()),
            r.file.display()
        );
    }
    for r in rows {
        if let Some(why) = r.died() {
            s += &format!("rank {} died: {why}\n", r.rank);
        }
    }
    if let Some((rank, slow, typical)) = straggler(rows) {
        s += &format!(
            "rank {rank} is a straggler: its own work takes {:.1} ms a step (step time less time in collectives) against {:.1} ms for the others (×{:.1}); they wait for it in every collective\n",
            slow * 1e3,
            typical * 1e3,
            slow / typical
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rank(r: u32, dts: &[f64], status: &str) -> RankRow {
        let mut s = Summary::default();
        for (i, dt) in dts.iter().enumerate() {
            s.add(&Event::Step(crate::profile::event::Step {
                step: i as u64 + 1,
                dt: *dt,
                ..Default::default()
            }));
        }
        s.add(&Event::RunEnd(crate::profile::event::RunEnd {
            status: status.into(),
            signal: (status == "signal").then_some(9),
            exit_code: if status == "ok" { 0 } else { 137 },
            ..Default::default()
        }));
        let events: Vec<Event> = dts
            .iter()
            .map(|dt| {
                Event::Step(crate::profile::event::Step {
                    dt: *dt,
                    ..Default::default()
                })
            })
            .collect();
        let (busy_median, collective_median) = busy(&events);
        RankRow {
            rank: r,
            file: PathBuf::from(format!("rank{r}.jsonl")),
            summary: s,
            busy_median,
            collective_median,
        }
    }

    #[test]
    fn the_slow_rank_is_the_straggler_and_the_dead_one_is_named() {
        let rows = vec![
            rank(0, &[0.5, 0.010, 0.011, 0.010], "ok"),
            rank(1, &[0.5, 0.060, 0.058, 0.061], "ok"),
            rank(2, &[0.5, 0.012, 0.010, 0.011], "signal"),
        ];
        let (r, slow, typical) = straggler(&rows).unwrap();
        assert_eq!(r, 1);
        assert!(slow > 0.05 && typical < 0.02);
        let text = render(&rows);
        assert!(text.contains("rank 1 is a straggler"), "{text}");
        assert!(
            text.contains("rank 2 died: killed by signal 9 after 4 steps"),
            "{text}"
        );
        // Even ranks: no straggler.
        let even = vec![
            rank(0, &[0.5, 0.010, 0.011], "ok"),
            rank(1, &[0.5, 0.011, 0.012], "ok"),
        ];
        assert!(straggler(&even).is_none());
    }
}
