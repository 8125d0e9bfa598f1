//! Where the step goes: each step event's measured phases (data, forward, backward, optimizer,
//! host syncs, collectives; timed by the agent's `phases.py`) and the rest of the step (`other`), averaged
//! over a run's steady steps or a window of them. The dashboard's stacked bar, the end-of-run
//! summary and the report all read it from here.

use super::event::Step;

/// The phases in drawing order; the last, `other`, is the step time the others leave.
pub const PHASES: [&str; 7] = [
    "data",
    "forward",
    "backward",
    "optimizer",
    "sync",
    "collective",
    "other",
];
/// How many phases.
pub const N: usize = PHASES.len();
/// Index of `other` in [`PHASES`].
pub const OTHER: usize = 6;

/// One step's phases in seconds, [`PHASES`] order; f32 keeps a long run's per-step record small.
pub type StepPhases = [f32; N];

/// The phases of one step event, when the agent measured them. `other` is `dt` less the
/// measured phases (never below zero: the phases end where the step does).
pub fn of_step(s: &Step) -> Option<StepPhases> {
    let p = s.phases.as_ref()?;
    let mut out = [0f32; N];
    let mut measured = 0.0;
    for (i, name) in PHASES[..OTHER].iter().enumerate() {
        let v = p.get(*name).copied().unwrap_or(0.0).max(0.0);
        out[i] = v as f32;
        measured += v;
    }
    out[OTHER] = (s.dt - measured).max(0.0) as f32;
    Some(out)
}

/// Mean seconds per step in each phase over some steps.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Breakdown {
    /// Mean seconds per step, [`PHASES`] order.
    pub mean: [f64; N],
    /// How many steps it averages.
    pub steps: usize,
}

impl Breakdown {
    /// The mean of the given steps' phases (None when none of them has any).
    pub fn mean_of<'a>(steps: impl IntoIterator<Item = &'a StepPhases>) -> Option<Breakdown> {
        let mut sum = [0f64; N];
        let mut n = 0;
        for p in steps {
            if p[0].is_nan() {
                continue; // a step without phases (NaN-filled)
            }
            for (s, v) in sum.iter_mut().zip(p) {
                *s += *v as f64;
            }
            n += 1;
        }
        (n > 0).then(|| Breakdown {
            mean: sum.map(|s| s / n as f64),
            steps: n,
        })
    }

    /// The mean step time these phases add up to.
    pub fn total(&self) -> f64 {
        self.mean.iter().sum()
    }

    /// The share of each phase in the step, [`PHASES`] order.
    pub fn shares(&self) -> [f64; N] {
        let t = self.total();
        self.mean.map(|m| if t > 0.0 { m / t } else { 0.0 })
    }

    /// The phases with their share, largest first, leaving out those under half a percent.
    pub fn ranked(&self) -> Vec<(&'static str, f64, f64)> {
        let shares = self.shares();
        let mut v: Vec<(&'static str, f64, f64)> = PHASES
            .iter()
            .zip(self.mean.iter().zip(shares))
            .map(|(n, (m, s))| (*n, *m, s))
            .filter(|(_, _, s)| *s >= 0.005)
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2));
        v
    }

    /// `forward 48 % (12.1 ms) · backward 40 % (10.0 ms) · ...`
    pub fn line(&self) -> String {
        self.ranked()
            .iter()
            .map(|(n, m, s)| format!("{n} {:.0} % ({:.1} ms)", s * 100.0, m * 1e3))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(dt: f64, phases: &[(&str, f64)]) -> Step {
        Step {
            dt,
            phases: Some(
                phases
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Step::default()
        }
    }

    #[test]
    fn other_is_what_the_measured_phases_leave() {
        let p = of_step(&step(0.010, &[("forward", 0.004), ("backward", 0.005)])).unwrap();
        assert_eq!(p[1], 0.004);
        assert_eq!(p[2], 0.005);
        assert!((p[OTHER] - 0.001).abs() < 1e-6);
        // Rounding in the agent may make the phases exceed dt by a microsecond: never negative.
        let p = of_step(&step(0.001, &[("forward", 0.0010005)])).unwrap();
        assert_eq!(p[OTHER], 0.0);
        assert!(of_step(&Step::default()).is_none());
    }

    #[test]
    fn mean_skips_steps_without_phases_and_ranks_by_share() {
        let a = of_step(&step(0.010, &[("forward", 0.006), ("backward", 0.003)])).unwrap();
        let b = of_step(&step(0.020, &[("forward", 0.010), ("backward", 0.009)])).unwrap();
        let none = [f32::NAN; N];
        let m = Breakdown::mean_of([&a, &none, &b]).unwrap();
        assert_eq!(m.steps, 2);
        assert!((m.total() - 0.015).abs() < 1e-6);
        assert!((m.mean[1] - 0.008).abs() < 1e-6);
        let ranked = m.ranked();
        assert_eq!(ranked[0].0, "forward");
        assert_eq!(ranked[1].0, "backward");
        assert_eq!(ranked.len(), 3, "{ranked:?}");
        assert!(
            m.line()
                .starts_with("forward 53 % (8.0 ms) · backward 40 % (6.0 ms)")
        );
        assert!(Breakdown::mean_of([&none]).is_none());
    }
}
