//! The answer of `tpuport check`, section by section, each with a verdict (ready, needs work,
//! blocked) and the facts behind it: original machine, port, run, numerics, ops, compiles and
//! syncs, fit. The whole [`Checked`] is what the JSON report holds; the text and Markdown/HTML
//! reports render it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::compare::{LayerRow, Layers, LossRow, first_diverging, first_parting};
use super::facts::{OpUse, RunFacts};
use super::fit::ChipFit;
use super::original::OriginalMachine;
use super::port::{Finding, Port};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ready,
    NeedsWork,
    Blocked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ready => "ready",
            Verdict::NeedsWork => "needs work",
            Verdict::Blocked => "blocked",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Section {
    pub name: &'static str,
    pub verdict: Verdict,
    pub summary: String,
    /// One line per fact (a finding at file:line, an op, a sync site...).
    pub items: Vec<String>,
}

/// The numbers of one run, as the report shows them (all from its events file).
#[derive(Debug, Clone, Serialize)]
pub struct RunNumbers {
    pub target: String,
    pub exit_code: i32,
    pub status: String,
    pub steps: u64,
    pub median_step_s: Option<f64>,
    pub compiles: u64,
    pub recompiles: u64,
    pub syncs: u64,
    pub syncs_per_step: Option<f64>,
    pub peak_device_bytes: Option<u64>,
    pub peak_rss_bytes: Option<u64>,
}

impl RunNumbers {
    pub fn of(f: &RunFacts, target: &str) -> RunNumbers {
        let s = &f.summary;
        RunNumbers {
            target: target.to_string(),
            exit_code: f.exit_code,
            status: f.status.clone(),
            steps: s.steps,
            median_step_s: s.median_step(),
            compiles: s.compiles,
            recompiles: s.recompiles,
            syncs: s.syncs,
            syncs_per_step: s.syncs_per_step(),
            peak_device_bytes: s.peak_device,
            peak_rss_bytes: s.peak_rss,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub script: String,
    pub args: Vec<String>,
    pub steps_asked: u32,
    pub rtol: f64,
    pub verdict: Verdict,
    pub sections: Vec<Section>,
    pub original: RunNumbers,
    /// The port's run where the original ran (the host).
    pub port_on_host: RunNumbers,
    /// That run against the original's: the losses bit for bit, the stdout line by line.
    pub original_machine: OriginalMachine,
    /// The port's run on the TPU target.
    pub port: RunNumbers,
    pub losses: Vec<LossRow>,
    pub first_parting_step: Option<u64>,
    pub layers: Vec<LayerRow>,
    pub first_diverging_layer: Option<LayerRow>,
    pub missing_ops: Vec<OpUse>,
    pub fit: Vec<ChipFit>,
    pub findings: Vec<Finding>,
}

fn at(f: &Finding) -> String {
    format!("{}:{}: {} {}", f.path, f.line, f.rule, f.message)
}

fn by_family<'a>(fs: impl Iterator<Item = &'a Finding>) -> String {
    let mut m: BTreeMap<&str, usize> = BTreeMap::new();
    for f in fs {
        *m.entry(f.family()).or_default() += 1;
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn port_section(port: &Port) -> Section {
    let fixed = port.fixed().count();
    let manual: Vec<&Finding> = port.manual().collect();
    let blocking: Vec<&Finding> = port.blocking().collect();
    let verdict = if !blocking.is_empty() {
        Verdict::Blocked
    } else if !manual.is_empty() {
        Verdict::NeedsWork
    } else {
        Verdict::Ready
    };
    let mut summary = format!("{fixed} rewritten");
    if !manual.is_empty() {
        summary += &format!(
            ", {} left for manual work ({})",
            manual.len(),
            by_family(manual.iter().copied())
        );
    }
    let advice = port.advice().count();
    if advice > 0 {
        summary += &format!(
            ", {advice} performance advice ({})",
            by_family(port.advice())
        );
    }
    let mut items: Vec<String> = blocking.iter().map(|f| at(f)).collect();
    items.extend(
        manual
            .iter()
            .filter(|f| !blocking.iter().any(|b| std::ptr::eq(*b, **f)))
            .map(|f| at(f)),
    );
    Section {
        name: "port",
        verdict,
        summary,
        items,
    }
}

/// The port on the original's machine: ready when it computes the original's losses bit for
/// bit and prints the same; blocked when a loss differs (a safe fix changed the program where it
/// ran) or the port fails there; needs work when only printed lines differ, or no loss was
/// recorded to compare.
pub fn original_machine_section(m: &OriginalMachine) -> Section {
    let name = "original machine";
    let on = &m.machine;
    let mut lines: Vec<String> = m.stdout.differences.iter().map(|d| d.describe()).collect();
    if m.stdout.differing > lines.len() {
        lines.push(format!(
            "… {} more stdout lines differ",
            m.stdout.differing - lines.len()
        ));
    }
    if let Some(f) = &m.failure {
        let mut items = vec![];
        match (&f.at, &f.code) {
            (Some(at), Some(code)) => items.push(format!("at {at}: {code}")),
            (Some(at), None) => items.push(format!("at {at}")),
            _ => {}
        }
        items.extend(f.output.iter().cloned());
        return Section {
            name,
            verdict: Verdict::Blocked,
            summary: format!(
                "the port fails on {on}, where the original runs: {}; a port must still run on the machine the script was written for (the port's changes: port.diff in the report, or `tpuport migrate --diff`)",
                f.error
            ),
            items,
        };
    }
    let shown = |v: Option<f64>| v.map_or_else(|| "no loss".to_string(), |x| format!("{x}"));
    if let Some(d) = &m.first_loss_difference {
        let mut items = vec![format!(
            "step {}: original {} | port {}",
            d.step,
            shown(d.original),
            shown(d.port)
        )];
        items.extend(lines);
        return Section {
            name,
            verdict: Verdict::Blocked,
            summary: format!(
                "the port computes something else than the original on {on}: the loss of step {} is {} in the original and {} in the port (same seeds; they must be equal bit for bit): a rewrite changed what the program does where it ran (the port's changes: port.diff in the report, or `tpuport migrate --diff`)",
                d.step,
                shown(d.original),
                shown(d.port)
            ),
            items,
        };
    }
    let same_output = m.stdout.differing == 0;
    let printed = if same_output {
        format!(
            "prints the same ({} stdout line{}{})",
            m.stdout.original_lines,
            if m.stdout.original_lines == 1 {
                ""
            } else {
                "s"
            },
            if m.stdout.cut {
                ", up to the lines kept"
            } else {
                ""
            }
        )
    } else {
        format!(
            "{} of its {} stdout lines differ from the original's (timings, clock times, addresses and the folder masked)",
            m.stdout.differing, m.stdout.port_lines
        )
    };
    if m.losses_compared == 0 {
        return Section {
            name,
            verdict: Verdict::NeedsWork,
            summary: format!(
                "the port runs on {on}, but neither run recorded a loss (the scalar backward() is called on) to compare bit for bit; {}{printed}",
                if same_output { "it " } else { "" }
            ),
            items: lines,
        };
    }
    let n = m.losses_compared;
    let losses = format!(
        "the port runs on {on} as the original does: the same loss{} bit for bit on {} {n} step{}",
        if n == 1 { "" } else { "es" },
        if n == 1 { "its" } else { "all" },
        if n == 1 { "" } else { "s" }
    );
    Section {
        name,
        verdict: if same_output {
            Verdict::Ready
        } else {
            Verdict::NeedsWork
        },
        summary: if same_output {
            format!("{losses}, and it {printed}")
        } else {
            format!("{losses}, but {printed}")
        },
        items: lines,
    }
}

pub fn run_section(port: &RunFacts, failing_line: Option<String>, steps: u32) -> Section {
    let on = port.target();
    if port.ok() {
        let ran = format!(
            "the port ran {} step{} on {on} (--steps {steps})",
            port.summary.steps,
            if port.summary.steps == 1 { "" } else { "s" }
        );
        // Trained, but not where it should: the worst outcome, since nothing else says so.
        let placement = &port.summary.placement;
        let on_cpu = placement.iter().find(|(c, _)| c == "DevicePlacement");
        let mut items: Vec<String> = placement.iter().map(|(_, m)| m.clone()).collect();
        items.extend(
            port.summary
                .emulation
                .iter()
                .map(|n| format!("emulated (XLA:CPU, not the TPU): {n}")),
        );
        let (verdict, summary) = match on_cpu {
            Some((_, m)) => (
                Verdict::Blocked,
                format!("{ran}, but {}", m.split(':').next().unwrap_or(m.as_str())),
            ),
            None if !placement.is_empty() => (
                Verdict::NeedsWork,
                format!("{ran}, but a move to the TPU untied shared weights"),
            ),
            None => (Verdict::Ready, ran),
        };
        return Section {
            name: "run",
            verdict,
            summary,
            items,
        };
    }
    let why = port.why_failed();
    let mut items = vec![];
    if let Some(l) = failing_line {
        items.push(format!("at {l}"));
    }
    items.extend(port.output_tail.iter().rev().take(5).rev().cloned());
    Section {
        name: "run",
        verdict: Verdict::Blocked,
        summary: format!(
            "the port failed on {on} after {} steps: {why}",
            port.summary.steps
        ),
        items,
    }
}

pub fn numerics_section(
    losses: &[LossRow],
    layers: &Layers,
    rtol: f64,
) -> (Section, Option<u64>, Option<LayerRow>) {
    let compared = losses.iter().filter(|r| r.rel.is_some()).count();
    let parting = first_parting(losses, rtol).map(|r| r.step);
    let diverging = first_diverging(layers, rtol).cloned();
    let worst = losses.iter().filter_map(|r| r.rel).fold(0.0_f64, f64::max);
    let describe = |what: &str, l: &LayerRow| {
        format!(
            "{what} on step 1: #{} {} ({}) relative difference {:.2e}, {:.1} % of {} elements mismatched, worst abs {:.3e}, rel {:.3e}; passes with atol={:.1e} or rtol={:.1e}",
            l.index,
            l.name,
            l.class,
            l.rel_fro,
            l.mismatched_pct(),
            l.elements,
            l.max_abs,
            l.max_rel,
            l.atol_to_pass,
            l.rtol_to_pass
        )
    };
    let mut items = vec![];
    // Where TPU numerics first show (float32 assert_close tolerances), and where they pass rtol.
    let differing = layers.layers.iter().find(|l| l.mismatched > 0);
    if let Some(l) = differing {
        items.push(describe("first layer that differs", l));
    }
    if let Some(l) = &diverging {
        items.push(describe(&format!("first layer beyond rtol {rtol:.0e}"), l));
    }
    let (verdict, summary) = if compared == 0 {
        (
            Verdict::NeedsWork,
            "not compared: a run recorded no loss (tpuport records the scalar tensor backward() is called on)".to_string(),
        )
    } else if let Some(s) = parting {
        (
            Verdict::NeedsWork,
            format!(
                "the losses part at step {s} (beyond rtol {rtol:.0e}); worst relative difference {worst:.2e} over {compared} steps"
            ),
        )
    } else {
        (
            Verdict::Ready,
            format!(
                "the losses agree within rtol {rtol:.0e} on all {compared} steps (worst {worst:.2e})"
            ),
        )
    };
    (
        Section {
            name: "numerics",
            verdict,
            summary,
            items,
        },
        parting,
        diverging,
    )
}

pub fn ops_section(ops: &[OpUse]) -> Section {
    if ops.is_empty() {
        return Section {
            name: "ops",
            verdict: Verdict::Ready,
            summary: "every ATen op the port ran has a TorchTPU 0.2.0 kernel".into(),
            items: vec![],
        };
    }
    Section {
        name: "ops",
        verdict: Verdict::Blocked,
        summary: format!(
            "{} op{} TorchTPU 0.2.0 lacks: a TPU raises \"operator '...' is not implemented for TPU\" there, unless its CPU fallback is on (slow)",
            ops.len(),
            if ops.len() == 1 { "" } else { "s" }
        ),
        items: ops
            .iter()
            .map(|o| format!("{}:{}: {}", o.file, o.line, o.op))
            .collect(),
    }
}

pub fn compiles_section(port: &RunFacts) -> Section {
    let s = &port.summary;
    let per_step = s.syncs_per_step().unwrap_or(0.0);
    let mut items = vec![];
    for (r, n) in port.recompile_reasons.iter().take(5) {
        items.push(format!("recompile ×{n}: {r}"));
    }
    for (site, n) in port.sync_sites.iter().take(5) {
        items.push(format!("host sync ×{n} at {site}"));
    }
    let needs = s.recompiles > 0 || s.limit_hit || per_step > 1.0;
    let mut summary = format!(
        "{} compiles ({} recompiles{}), {:.1} host syncs per step",
        s.compiles,
        s.recompiles,
        if s.limit_hit {
            ", recompile limit hit"
        } else {
            ""
        },
        per_step
    );
    if s.recompiles > 0 {
        summary += "; a TPU compiles each new shape (dynamic=False): pad or bucket the shapes (torch.compile options num_dynamic_buckets, bucket_size)";
    }
    if per_step > 1.0 {
        summary += "; each sync ends a fused region in DeferAndFuse mode: keep values on the device, read them every N steps";
    }
    Section {
        name: "compiles and syncs",
        verdict: if needs {
            Verdict::NeedsWork
        } else {
            Verdict::Ready
        },
        summary,
        items,
    }
}

/// A section that needs the port to have run, when it did not.
pub fn not_measured(name: &'static str) -> Section {
    Section {
        name,
        verdict: Verdict::NeedsWork,
        summary: "not measured: the port did not run (see run)".into(),
        items: vec![],
    }
}

pub fn fit_section(fit: &[ChipFit]) -> Section {
    let fits: Vec<&str> = fit.iter().filter(|c| c.fits).map(|c| c.chip).collect();
    let items = fit
        .iter()
        .map(|c| {
            let batch = match (c.largest_batch, c.batch_factor) {
                (Some(b), _) => format!(", largest batch ≈ {b}"),
                (None, Some(k)) => format!(", batch ×{k:.1} would fit"),
                _ => String::new(),
            };
            format!(
                "{}: {} of {} per device ({:.1} %, {} device{} per chip): {}{batch}",
                c.chip,
                crate::profile::summary::bytes(c.peak),
                crate::profile::summary::bytes(c.hbm_per_device),
                100.0 * c.used,
                c.devices_per_chip,
                if c.devices_per_chip == 1 { "" } else { "s" },
                if c.fits { "fits" } else { "does not fit" },
            )
        })
        .collect();
    Section {
        name: "fit",
        verdict: if fits.is_empty() {
            Verdict::NeedsWork
        } else {
            Verdict::Ready
        },
        summary: if fits.is_empty() {
            "the peak does not fit one device of any generation: shard the model (FSDP) or shrink the batch".into()
        } else {
            format!("fits one device of {}", fits.join(", "))
        },
        items,
    }
}
