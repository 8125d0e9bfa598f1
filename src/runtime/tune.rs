//! `tpuport tune SCRIPT`: which TorchTPU setting runs this script best? The first N steps under
//! each eager mode (strict, debug, defer-fuse) and, with `--precision`, each float32 matmul
//! precision, one run after another; median step time, peak memory, compiles and host syncs per
//! step side by side (all from each run's events file), and one recommendation with the numbers
//! that decided it. On the sim target the times are the host's: the modes' real difference shows
//! on a TPU (defer-fuse gains where few host syncs end its fused regions).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::launcher::{ObserverChoice, Quiet, RunObserver};
use super::target::{Mode, Precision, Request, TargetRequest};
use super::{RunOptions, SimOptions};
use crate::profile::summary::{Summary, bytes};

/// A setting within this share of the default's median step is not worth switching to.
pub const WORTH: f64 = 0.05;

pub struct TuneOptions {
    pub script: PathBuf,
    pub args: Vec<String>,
    pub steps: u32,
    pub target: TargetRequest,
    /// Also try each precision (under each mode).
    pub precisions: bool,
    pub python: Option<PathBuf>,
    /// Where the runs' events files go.
    pub dir: PathBuf,
}

#[derive(Debug, Clone)]
pub struct Trial {
    pub mode: Mode,
    pub precision: Precision,
    pub events: PathBuf,
    pub summary: Summary,
}

impl Trial {
    pub fn label(&self) -> String {
        format!("{} / {}", self.mode.as_str(), self.precision.as_str())
    }

    pub fn ok(&self) -> bool {
        self.summary.steps > 0
            && self
                .summary
                .run_end
                .as_ref()
                .is_some_and(|e| e.exit_code == 0)
    }
}

fn read(path: &Path) -> Result<Summary> {
    let (events, skipped) = crate::profile::follow::read_events(path)?;
    if let Some(d) = skipped.describe() {
        eprintln!("tpuport tune: note: {}: {d}", path.display());
    }
    Ok(Summary::from_events(&events))
}

pub fn tune(opts: &TuneOptions) -> Result<Vec<Trial>> {
    if opts.steps == 0 {
        bail!("--steps must be at least 1");
    }
    crate::profile::report::writable_folder(&opts.dir, "folder for the runs' events files", "-o")?;
    let precisions: &[Precision] = if opts.precisions {
        &[Precision::Default, Precision::High, Precision::Highest]
    } else {
        &[Precision::Default]
    };
    let mut trials = vec![];
    for mode in [Mode::Strict, Mode::Debug, Mode::DeferFuse] {
        for &precision in precisions {
            let events = opts
                .dir
                .join(format!("{}-{}.jsonl", mode.as_str(), precision.as_str()));
            eprintln!(
                "tpuport tune: {} steps with --mode {} --precision {}",
                opts.steps,
                mode.as_str(),
                precision.as_str()
            );
            super::run(RunOptions {
                script: opts.script.clone(),
                module: None,
                args: opts.args.clone(),
                request: Request {
                    target: opts.target,
                    mode,
                    precision: Some(precision),
                    ..Request::default()
                },
                python: opts.python.clone(),
                events: Some(events.clone()),
                timeout: None,
                observer: ObserverChoice::Start(Box::new(|| -> Box<dyn RunObserver> {
                    Box::new(Quiet)
                })),
                subprocess: false,
                sim: SimOptions::default(),
                numerics: None,
                max_steps: Some(opts.steps),
                cuda_on_cpu: false,
                check: None,
                breakdown: true,
            })?;
            let summary = read(&events)?;
            trials.push(Trial {
                mode,
                precision,
                events,
                summary,
            });
        }
    }
    Ok(trials)
}

/// Whether the trials ran on an emulating target (the sim, xla-cpu: this machine's times, not a
/// TPU's), from their events.
pub fn emulated(trials: &[Trial]) -> bool {
    trials
        .iter()
        .find_map(|t| t.summary.run_start.as_ref())
        .is_none_or(|s| s.target != "tpu" && s.target != "host")
}

/// The recommended trial and why. Debug mode (synchronous launches) is for finding errors and
/// never recommended for speed. On a TPU: the fastest median step among the runs that worked,
/// unless it is within [`WORTH`] of the default (strict, default precision), which then stays.
/// On the sim the host's times say nothing about the modes: defer-fuse is suggested when the
/// default run ends at most one fused region per step (host syncs), else strict stays.
pub fn recommend(trials: &[Trial], sim: bool) -> Option<(usize, String)> {
    let ok: Vec<(usize, f64)> = trials
        .iter()
        .enumerate()
        .filter(|(_, t)| t.ok() && t.mode != Mode::Debug)
        .filter_map(|(i, t)| Some((i, t.summary.median_step()?)))
        .collect();
    let default = ok.iter().copied().find(|(i, _)| {
        trials[*i].mode == Mode::Strict && trials[*i].precision == Precision::Default
    });
    if sim {
        let (d, _) = default?;
        let syncs = trials[d].summary.syncs_per_step().unwrap_or(0.0);
        let fuse = ok.iter().copied().find(|(i, _)| {
            trials[*i].mode == Mode::DeferFuse && trials[*i].precision == Precision::Default
        });
        return Some(match fuse {
            Some((f, _)) if syncs <= 1.0 => (
                f,
                format!(
                    "try defer-fuse on a TPU: it ran here, and with {syncs:.1} host syncs per step few of its fused regions would be cut short (the sim cannot time the modes)"
                ),
            ),
            _ => (
                d,
                format!(
                    "keep strict: {syncs:.1} host syncs per step would cut defer-fuse's fused regions short (see the sync sites in the events; the sim cannot time the modes)"
                ),
            ),
        });
    }
    let (best, fastest) = ok.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    match default {
        Some((d, base)) if fastest >= base * (1.0 - WORTH) => Some((
            d,
            format!(
                "keep the default ({}): its median step {:.1} ms is within {:.0} % of the fastest ({}, {:.1} ms)",
                trials[d].label(),
                base * 1e3,
                WORTH * 100.0,
                trials[best].label(),
                fastest * 1e3
            ),
        )),
        Some((_, base)) => Some((
            best,
            format!(
                "{}: median step {:.1} ms against {:.1} ms for the default (−{:.0} %)",
                trials[best].label(),
                fastest * 1e3,
                base * 1e3,
                100.0 * (1.0 - fastest / base)
            ),
        )),
        None => Some((
            best,
            format!(
                "{}: median step {:.1} ms (the default did not run)",
                trials[best].label(),
                fastest * 1e3
            ),
        )),
    }
}

/// The side-by-side table and the recommendation.
pub fn render(trials: &[Trial], sim: bool) -> String {
    let ms = |s: Option<f64>| {
        s.map(|v| format!("{:.1} ms", v * 1e3))
            .unwrap_or_else(|| "–".into())
    };
    let mut s = format!(
        "{:<22} {:>6} {:>11} {:>11} {:>12} {:>9} {:>11}  {}\n",
        "mode / precision",
        "steps",
        "median",
        "p90",
        "peak memory",
        "compiles",
        "syncs/step",
        "exit"
    );
    for t in trials {
        let sm = &t.summary;
        s += &format!(
            "{:<22} {:>6} {:>11} {:>11} {:>12} {:>9} {:>11}  {}\n",
            t.label(),
            sm.steps,
            ms(sm.median_step()),
            ms(sm.p90_step()),
            sm.peak_device
                .or(sm.peak_rss)
                .map(bytes)
                .unwrap_or_else(|| "–".into()),
            sm.compiles,
            sm.syncs_per_step()
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "–".into()),
            sm.run_end
                .as_ref()
                .map(|e| e.exit_code.to_string())
                .unwrap_or_else(|| "?".into())
        );
    }
    match recommend(trials, sim) {
        Some((_, why)) => s += &format!("recommended: {why}\n"),
        None => s += "no setting ran: see the events files\n",
    }
    if sim {
        let target = trials
            .iter()
            .find_map(|t| t.summary.run_start.as_ref())
            .map_or("sim", |s| s.target.as_str());
        s += &format!("({target} target: the times are this machine's, not a TPU's)\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::{Event, RunEnd, Step};

    fn trial(mode: Mode, precision: Precision, dts: &[f64]) -> Trial {
        let mut s = Summary::default();
        for (i, dt) in dts.iter().enumerate() {
            s.add(&Event::Step(Step {
                step: i as u64 + 1,
                dt: *dt,
                ..Default::default()
            }));
        }
        s.add(&Event::RunEnd(RunEnd {
            status: "ok".into(),
            ..Default::default()
        }));
        Trial {
            mode,
            precision,
            events: PathBuf::new(),
            summary: s,
        }
    }

    #[test]
    fn the_fastest_wins_unless_the_default_is_close() {
        let trials = vec![
            trial(
                Mode::Strict,
                Precision::Default,
                &[1.0, 0.020, 0.021, 0.020],
            ),
            trial(Mode::Debug, Precision::Default, &[1.0, 0.030, 0.031, 0.030]),
            trial(
                Mode::DeferFuse,
                Precision::Default,
                &[1.0, 0.012, 0.013, 0.012],
            ),
        ];
        let (i, why) = recommend(&trials, false).unwrap();
        assert_eq!(trials[i].mode, Mode::DeferFuse);
        assert!(why.contains("−40 %"), "{why}");
        // Debug mode is never the answer, however fast.
        let fast_debug = vec![
            trial(Mode::Strict, Precision::Default, &[1.0, 0.020, 0.020]),
            trial(Mode::Debug, Precision::Default, &[1.0, 0.010, 0.010]),
        ];
        assert_eq!(
            fast_debug[recommend(&fast_debug, false).unwrap().0].mode,
            Mode::Strict
        );
        // On the sim: no host syncs in the default run → try defer-fuse.
        let (i, why) = recommend(&trials, true).unwrap();
        assert_eq!(trials[i].mode, Mode::DeferFuse);
        assert!(why.starts_with("try defer-fuse on a TPU"), "{why}");
        let close = vec![
            trial(Mode::Strict, Precision::Default, &[1.0, 0.020, 0.020]),
            trial(Mode::DeferFuse, Precision::Default, &[1.0, 0.0195, 0.0195]),
        ];
        let (i, why) = recommend(&close, false).unwrap();
        assert_eq!(close[i].mode, Mode::Strict);
        assert!(why.starts_with("keep the default"), "{why}");
        assert!(render(&trials, false).contains("recommended: defer-fuse / default"));
    }
}
