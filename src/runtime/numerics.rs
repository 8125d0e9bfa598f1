//! `tpuport numerics`: will the TPU's numbers match the host's? Runs a script's first N steps
//! twice on the sim target, once in plain float32 (what CPU/GPU code computes) and once with
//! TPU matmul precision emulated (default: bf16 inputs, f32 accumulation), from the same seeds,
//! and reports the loss of each step side by side and the parameters that drifted most.

use std::fs;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::chips::Chip;
use super::config::{HbmTrack, NumericsSpec};
use super::target::{Mode, Precision, Request, TargetRequest};
use super::{RunOptions, SimOptions};
use crate::profile::event::Event;

pub struct NumericsOptions {
    pub script: PathBuf,
    pub args: Vec<String>,
    pub steps: u32,
    /// The emulated precision to compare with float32.
    pub precision: Precision,
    pub python: Option<PathBuf>,
    pub chip: Option<&'static Chip>,
    /// Where both runs go (auto: xla-cpu where installed, else the sim).
    pub target: TargetRequest,
}

#[derive(Deserialize)]
struct ParamDiff {
    index: usize,
    shape: Vec<u64>,
    max_abs: f64,
    rel: f64,
}

#[derive(Deserialize)]
struct Compare {
    params: Vec<ParamDiff>,
}

/// One row of the report: step, reference loss, emulated loss.
pub type LossRow = (u64, Option<f64>, Option<f64>);

pub fn numerics(opts: NumericsOptions) -> Result<i32> {
    if opts.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let dir = tempfile::tempdir().context("cannot create a temporary folder for the two runs")?;
    let saved = dir.path().join("reference.pt");
    let compare = dir.path().join("compare.json");
    let mut events = vec![];
    for (role, precision) in [("float32", None), ("tpu", Some(opts.precision))] {
        let ev = dir.path().join(format!("{role}.jsonl"));
        eprintln!(
            "tpuport numerics: run {} of 2: {} ({} steps)",
            events.len() + 1,
            match precision {
                None => "plain float32 (the host's numbers)".to_string(),
                Some(p) => format!("TPU matmul precision `{}` emulated", p.as_str()),
            },
            opts.steps
        );
        let reference = precision.is_none();
        let spec = NumericsSpec {
            steps: opts.steps,
            precision,
            save: reference.then(|| saved.clone()),
            compare: (!reference).then(|| saved.clone()),
            compare_out: (!reference).then(|| compare.clone()),
        };
        let code = super::run(RunOptions {
            script: opts.script.clone(),
            module: None,
            args: opts.args.clone(),
            // Where `tpuport run` would run it without a TPU: xla-cpu where installed (TorchTPU's
            // own precision setting, emulated on its matmul kernels), else the sim.
            request: Request {
                target: opts.target,
                mode: Mode::Strict,
                precision,
                chip: opts.chip,
                ..Request::default()
            },
            python: opts.python.clone(),
            events: Some(ev.clone()),
            timeout: None,
            observer: super::launcher::ObserverChoice::StepLines,
            subprocess: false,
            sim: SimOptions {
                hbm_track: HbmTrack::Off,
                ..SimOptions::default()
            },
            numerics: Some(spec),
            max_steps: None,
            cuda_on_cpu: false,
            check: None,
            breakdown: false,
        })?;
        if code != 0 {
            bail!(
                "the {role} run of {} exited with {code}; fix the script (its output is above) and retry",
                opts.script.display()
            );
        }
        events.push(ev);
    }
    let reference = losses(&events[0])?;
    let emulated = losses(&events[1])?;
    let rows = join(&reference, &emulated);
    if rows.iter().all(|r| r.1.is_none()) {
        bail!(
            "no loss was seen: `tpuport numerics` takes the loss from the scalar tensor that \
             `.backward()` is called on in each optimizer step; {} has none",
            opts.script.display()
        );
    }
    print!("{}", render(&rows, opts.precision.as_str()));
    if target_of(&events[1]).as_deref() == Some("xla-cpu") {
        println!("{XLA_CPU_PRECISION}");
    }
    if let Ok(text) = fs::read_to_string(&compare) {
        let c: Compare = serde_json::from_str(&text).context("reading the parameter comparison")?;
        let mut params = c.params;
        params.sort_by(|a, b| b.rel.total_cmp(&a.rel));
        println!(
            "\nlargest parameter differences after {} steps (relative = ‖Δ‖/‖p‖):",
            opts.steps
        );
        println!(
            "{:>6}  {:<18} {:>12} {:>12}",
            "param", "shape", "max |Δ|", "relative"
        );
        for p in params.iter().take(5) {
            println!(
                "{:>6}  {:<18} {:>12.3e} {:>12.3e}",
                p.index,
                format!("{:?}", p.shape),
                p.max_abs,
                p.rel
            );
        }
    }
    Ok(0)
}

/// What the xla-cpu target's numbers leave out, said with them.
pub const XLA_CPU_PRECISION: &str = "(xla-cpu: XLA:CPU computes float32 dots in full float32; the TPU's precision is emulated on TorchTPU's eager matmul kernels (mm, bmm, addmm, baddbmm, mv: Linear, matmul, attention), not in convolutions or compiled graphs, which stay float32 here: their TPU rounding is not in these numbers)";

/// The target a run's events say it ran on.
fn target_of(path: &PathBuf) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| match Event::parse(l) {
        Ok(Event::RunStart(s)) => Some(s.target),
        _ => None,
    })
}

fn losses(path: &std::path::Path) -> Result<Vec<(u64, f64)>> {
    let (events, skipped) = crate::profile::follow::read_events(path)?;
    if let Some(d) = skipped.describe() {
        eprintln!("tpuport numerics: note: {}: {d}", path.display());
    }
    let mut out = vec![];
    for e in events {
        if let Event::Step(s) = e
            && let Some(v) = s.extra.get("loss").and_then(|v| v.as_f64())
        {
            out.push((s.step, v));
        }
    }
    Ok(out)
}

/// Rows for every step either run saw.
pub fn join(a: &[(u64, f64)], b: &[(u64, f64)]) -> Vec<LossRow> {
    let mut steps: Vec<u64> = a.iter().chain(b).map(|x| x.0).collect();
    steps.sort_unstable();
    steps.dedup();
    let find = |v: &[(u64, f64)], s| v.iter().find(|x| x.0 == s).map(|x| x.1);
    steps
        .into_iter()
        .map(|s| (s, find(a, s), find(b, s)))
        .collect()
}

/// The loss table with the relative difference per step and the largest one.
pub fn render(rows: &[LossRow], precision: &str) -> String {
    let mut out = format!(
        "\n{:>5}  {:>14}  {:>14}  {:>10}\n",
        "step",
        "loss float32",
        format!("loss tpu:{precision}"),
        "rel diff"
    );
    let mut worst: Option<(u64, f64)> = None;
    for (step, a, b) in rows {
        let fmt = |v: &Option<f64>| v.map(|x| format!("{x:.6}")).unwrap_or_else(|| "-".into());
        let rel = match (a, b) {
            (Some(a), Some(b)) if *a != 0.0 => Some(((b - a) / a).abs()),
            _ => None,
        };
        if let Some(r) = rel
            && worst.is_none_or(|w| r > w.1)
        {
            worst = Some((*step, r));
        }
        out += &format!(
            "{step:>5}  {:>14}  {:>14}  {:>10}\n",
            fmt(a),
            fmt(b),
            rel.map(|r| format!("{r:.2e}"))
                .unwrap_or_else(|| "-".into())
        );
    }
    if let Some((s, r)) = worst {
        out += &format!("largest loss difference: {r:.2e} (relative) at step {s}\n");
        if r == 0.0 {
            out += "identical: no float32 matmul in these steps (under autocast bf16 they already run in bf16), \
                    so TPU precision changes nothing here\n";
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_joins_steps_and_finds_the_largest_difference() {
        let rows = join(&[(1, 2.0), (2, 1.0)], &[(1, 2.002), (2, 1.01), (3, 0.5)]);
        assert_eq!(
            rows,
            vec![
                (1, Some(2.0), Some(2.002)),
                (2, Some(1.0), Some(1.01)),
                (3, None, Some(0.5))
            ]
        );
        let t = render(&rows, "default");
        assert!(t.contains("loss tpu:default"), "{t}");
        assert!(
            t.contains("largest loss difference: 1.00e-2 (relative) at step 2"),
            "{t}"
        );
        assert!(
            t.lines()
                .any(|l| l.trim_start().starts_with('3') && l.contains(" - ")),
            "{t}"
        );
    }
}
