//! Aggregation of an event stream into the numbers a person asks about first: steps, median and
//! p90 step time, compiles (and how many were recompiles, and whether the limit was hit), peak
//! memory, host syncs per step.

use super::breakdown::{self, Breakdown, StepPhases};
use super::event::{Event, RunEnd, RunStart};

#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub run_start: Option<RunStart>,
    pub run_end: Option<RunEnd>,
    pub steps: u64,
    /// Step durations in seconds, in order.
    pub step_times: Vec<f64>,
    /// Per step: the sim's sampled HBM tracker watched it (slower: every op recorded), so the
    /// step-time statistics and charts leave it out.
    pub step_sampled: Vec<bool>,
    /// How many steps the sampled HBM tracker watched.
    pub sampled_steps: usize,
    /// Per step: its phases (see [`breakdown`]); empty until a step reports them, NaN where a
    /// step did not.
    pub step_phases: Vec<StepPhases>,
    /// Samples / tokens per step (NaN where a step did not say); empty until a step reports one.
    pub step_samples: Vec<f32>,
    pub step_tokens: Vec<f32>,
    /// Per step: seconds in timed torch.distributed collectives (`collective_s`, ranks of a
    /// multi-process run); empty until a step reports it, 0 where a step did not.
    pub step_collective: Vec<f32>,
    /// Successful forward (Dynamo frame) compiles, first compiles and recompiles together.
    pub compiles: u64,
    /// Compiles that failed (e.g. the one refused at the recompile limit).
    pub failed_compiles: u64,
    pub recompiles: u64,
    pub compile_seconds: f64,
    pub limit_hit: bool,
    pub peak_device: Option<u64>,
    pub peak_rss: Option<u64>,
    pub syncs: u64,
    pub warnings: u64,
    /// HBM per device as the memory events give it (`hbm_capacity`: the sim's `--hbm`), which
    /// wins over the chip table's `run_start.hbm_bytes`.
    pub hbm_capacity: Option<u64>,
    /// A collective the run was still waiting in (a `CollectiveWait` warning after its last
    /// step): a rank of a multi-process job waiting for a late or hung one.
    pub waiting: Option<Waiting>,
    /// TorchTPU's compile-cache counters at the last step that reported them (`tpu_cache`: a
    /// TPU, or xla-cpu): requests, hits, compilations.
    pub tpu_cache: Option<TpuCache>,
    /// Where the model trains, when it is wrong (`DevicePlacement`: the optimizer's parameters
    /// are not on the TPU; `TiedWeights`: a move untied shared weights): the agent's messages.
    pub placement: Vec<(String, String)>,
    /// What the xla-cpu target ran differently from a TPU because XLA:CPU cannot (`XlaCpuGap`).
    pub emulation: Vec<String>,
}

/// TorchTPU's compile-cache counters (`torch.tpu._get_cache_stats()`), for the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TpuCache {
    pub requests: u64,
    pub hits: u64,
    pub compilations: u64,
}

impl TpuCache {
    fn of(v: &serde_json::Value) -> Option<TpuCache> {
        let n = |k: &str| v.get(k).and_then(|x| x.as_u64());
        Some(TpuCache {
            requests: n("requests")?,
            hits: n("hits")?,
            compilations: n("compilations")?,
        })
    }
}

/// A collective in flight long enough for the agent to report it.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub op: String,
    /// When it started (seconds since run_start).
    pub since: f64,
    pub file: String,
    pub line: u64,
}

impl Summary {
    pub fn add(&mut self, e: &Event) {
        match e {
            Event::RunStart(s) => self.run_start = Some(s.clone()),
            Event::RunEnd(s) => self.run_end = Some(s.clone()),
            Event::Step(s) => {
                self.waiting = None;
                self.steps = self.steps.max(s.step);
                self.step_times.push(s.dt);
                let sampled = s
                    .extra
                    .get("hbm_sampled")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                self.step_sampled.push(sampled);
                self.sampled_steps += usize::from(sampled);
                let i = self.step_times.len() - 1;
                push_opt(&mut self.step_samples, i, s.samples);
                push_opt(&mut self.step_tokens, i, s.tokens);
                if let Some(c) = s.extra.get("collective_s").and_then(|v| v.as_f64()) {
                    let before = self.step_times.len() - 1;
                    self.step_collective.resize(before, 0.0);
                    self.step_collective.push(c as f32);
                }
                if let Some(p) = breakdown::of_step(s) {
                    let before = self.step_times.len() - 1;
                    self.step_phases.resize(before, [f32::NAN; breakdown::N]);
                    self.step_phases.push(p);
                }
                if let Some(c) = s.extra.get("tpu_cache").and_then(TpuCache::of) {
                    self.tpu_cache = Some(c);
                }
            }
            Event::Compile(c) => {
                if c.status == "limit_hit" {
                    self.limit_hit = true;
                } else if c.status == "failed" {
                    self.failed_compiles += 1;
                } else if c.kind == "forward" {
                    self.compiles += 1;
                    if c.reason.is_some() {
                        self.recompiles += 1;
                    }
                }
                self.compile_seconds += c.seconds;
            }
            Event::Memory(m) => {
                let dev = m.peak.or(m.allocated);
                if let Some(d) = dev {
                    self.peak_device = Some(self.peak_device.unwrap_or(0).max(d));
                }
                if let Some(r) = m.rss {
                    self.peak_rss = Some(self.peak_rss.unwrap_or(0).max(r));
                }
                if let Some(c) = m.extra.get("hbm_capacity").and_then(|v| v.as_u64()) {
                    self.hbm_capacity = Some(c);
                }
            }
            Event::Sync(s) => self.syncs = self.syncs.saturating_add(s.total()),
            Event::Warning(w) => {
                self.warnings += 1;
                match w.category.as_str() {
                    "DevicePlacement" | "TiedWeights" => {
                        self.placement.push((w.category.clone(), w.message.clone()))
                    }
                    "XlaCpuGap" => self.emulation.push(w.message.clone()),
                    _ => {}
                }
                if w.category == "CollectiveWait" {
                    self.waiting = Some(Waiting {
                        op: w
                            .extra
                            .get("op")
                            .and_then(|v| v.as_str())
                            .unwrap_or("?")
                            .into(),
                        since: w.extra.get("since").and_then(|v| v.as_f64()).unwrap_or(w.t),
                        file: w.file.clone(),
                        line: w.line,
                    });
                }
            }
            Event::Log(_) => {}
        }
    }

    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Summary {
        let mut s = Summary::default();
        for e in events {
            s.add(e);
        }
        s
    }

    /// Median step time, ignoring the first step (it carries start-up and first compiles)
    /// when there are more than two.
    pub fn median_step(&self) -> Option<f64> {
        percentile(&self.steady(), 0.5)
    }

    pub fn p90_step(&self) -> Option<f64> {
        percentile(&self.steady(), 0.9)
    }

    /// Whether step `i` (0-based) counts in the statistics: not the first of more than two
    /// (start-up), and not one the sampled HBM tracker slowed (unless all were).
    pub fn steady_step(&self, i: usize) -> bool {
        let first = i == 0 && self.step_times.len() > 2;
        let sampled = self.step_sampled.get(i).copied().unwrap_or(false)
            && self.sampled_steps < self.step_times.len().saturating_sub(1);
        !first && !sampled
    }

    fn steady(&self) -> Vec<f64> {
        (0..self.step_times.len())
            .filter(|&i| self.steady_step(i))
            .map(|i| self.step_times[i])
            .collect()
    }

    /// Where the steady steps' time goes (the same steps as the step-time statistics).
    pub fn breakdown(&self) -> Option<Breakdown> {
        self.breakdown_of(0, self.step_times.len())
    }

    /// Where the time of the steady steps among steps `a..b` (0-based) goes.
    pub fn breakdown_of(&self, a: usize, b: usize) -> Option<Breakdown> {
        let b = b.min(self.step_phases.len());
        Breakdown::mean_of(
            (a..b)
                .filter(|&i| self.steady_step(i))
                .map(|i| &self.step_phases[i]),
        )
    }

    /// Samples and tokens per second over the steady steps among steps `a..b` (0-based; the
    /// same steps as the step-time statistics) that report a count: their counts over their
    /// time. One figure over many steps, so a script whose batch size varies from step to step
    /// gets its real throughput, not one step's.
    pub fn throughput_of(&self, a: usize, b: usize) -> Throughput {
        let rate = |counts: &[f32]| -> Option<f64> {
            if counts.is_empty() {
                return None;
            }
            let (mut n, mut secs) = (0.0, 0.0);
            for i in a..b.min(self.step_times.len()) {
                let x = counts.get(i).copied().unwrap_or(f32::NAN);
                if !x.is_nan() && self.steady_step(i) {
                    n += x as f64;
                    secs += self.step_times[i];
                }
            }
            (secs > 0.0).then(|| n / secs)
        };
        Throughput {
            samples_per_s: rate(&self.step_samples),
            tokens_per_s: rate(&self.step_tokens),
        }
    }

    /// HBM per device: from the memory events, else the chip table (`run_start.hbm_bytes`).
    pub fn capacity(&self) -> Option<u64> {
        self.hbm_capacity
            .or_else(|| self.run_start.as_ref().and_then(|s| s.hbm_bytes))
            .filter(|&c| c > 0)
    }

    pub fn syncs_per_step(&self) -> Option<f64> {
        (self.steps > 0).then(|| self.syncs as f64 / self.steps as f64)
    }

    /// The multi-line summary printed at the end of a run.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let ms = |s: f64| format!("{:.1} ms", s * 1e3);
        out.push_str(&format!("steps: {}", self.steps));
        if let (Some(m), Some(p)) = (self.median_step(), self.p90_step()) {
            out.push_str(&format!("   step time: median {}, p90 {}", ms(m), ms(p)));
            let sampled = (1..self.step_times.len())
                .filter(|&i| {
                    self.step_sampled.get(i).copied().unwrap_or(false) && !self.steady_step(i)
                })
                .count();
            if sampled > 0 {
                out.push_str(&format!(
                    " (without the {sampled} steps the HBM tracker sampled)"
                ));
            }
        }
        out.push('\n');
        if let Some(b) = self.breakdown() {
            out.push_str(&format!("step breakdown: {}\n", b.line()));
        }
        let failed = if self.failed_compiles > 0 {
            format!(", {} failed", self.failed_compiles)
        } else {
            String::new()
        };
        out.push_str(&format!(
            "compiles: {} ({} recompiles{failed}, {:.2} s compiling){}\n",
            self.compiles,
            self.recompiles,
            self.compile_seconds,
            if self.limit_hit {
                "  RECOMPILE LIMIT HIT: a frame now runs eagerly"
            } else {
                ""
            }
        ));
        if let Some(c) = self.tpu_cache {
            out.push_str(&format!(
                "TorchTPU compile cache: {} compilations, {} hits of {} requests\n",
                c.compilations, c.hits, c.requests
            ));
        }
        let mut mem = vec![];
        if let Some(d) = self.peak_device {
            match self.capacity() {
                Some(c) if c > 0 => mem.push(format!(
                    "device peak {} of {} ({:.0}%)",
                    bytes(d),
                    bytes(c),
                    d as f64 * 100.0 / c as f64
                )),
                _ => mem.push(format!("device peak {}", bytes(d))),
            }
        }
        if let Some(r) = self.peak_rss {
            mem.push(format!("process RSS peak {}", bytes(r)));
        }
        if !mem.is_empty() {
            out.push_str(&format!("memory: {}\n", mem.join(", ")));
        }
        out.push_str(&format!(
            "host syncs: {}{}\n",
            self.syncs,
            self.syncs_per_step()
                .map(|s| format!(" ({s:.1} per step)"))
                .unwrap_or_default()
        ));
        for (category, p) in &self.placement {
            let label = if category == "TiedWeights" {
                "UNTIED WEIGHTS"
            } else {
                "WRONG DEVICE"
            };
            out.push_str(&format!("{label}: {p}\n"));
        }
        for n in &self.emulation {
            out.push_str(&format!("emulated (XLA:CPU, not the TPU): {n}\n"));
        }
        out
    }
}

/// Samples and tokens per second over some steps ([`Summary::throughput_of`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Throughput {
    pub samples_per_s: Option<f64>,
    pub tokens_per_s: Option<f64>,
}

/// Set `v[i]` to `x`, NaN-filling the steps before that did not report; nothing is kept until
/// some step reports.
fn push_opt(v: &mut Vec<f32>, i: usize, x: Option<f64>) {
    match x {
        Some(x) => {
            v.resize(i, f32::NAN);
            v.push(x as f32);
        }
        None if !v.is_empty() => v.push(f32::NAN),
        None => {}
    }
}

pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(v[lo] + (v[hi] - v[lo]) * (pos - lo as f64))
}

/// `1.5 GiB`, `320.0 MiB`, `12 B`.
pub fn bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::*;

    #[test]
    fn percentiles() {
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 0.5), Some(2.0));
        assert!((percentile(&[1.0, 2.0, 3.0, 4.0], 0.9).unwrap() - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn steps_the_hbm_tracker_sampled_are_left_out_of_step_times() {
        let step = |n: u64, dt: f64, sampled: bool| {
            let mut extra = serde_json::Map::new();
            if sampled {
                extra.insert("hbm_sampled".into(), serde_json::Value::Bool(true));
            }
            Event::Step(Step {
                step: n,
                dt,
                source: "optimizer".into(),
                extra,
                ..Step::default()
            })
        };
        // Step 1 (start-up) and the sampled steps 2 and 5 are slow; the others take 50 ms.
        let evs = vec![
            step(1, 2.0, true),
            step(2, 0.5, true),
            step(3, 0.05, false),
            step(4, 0.05, false),
            step(5, 0.5, true),
            step(6, 0.05, false),
        ];
        let s = Summary::from_events(&evs);
        assert_eq!(s.median_step(), Some(0.05));
        assert_eq!(s.p90_step(), Some(0.05));
        assert!(
            s.render()
                .contains("(without the 2 steps the HBM tracker sampled)"),
            "{}",
            s.render()
        );
        // Every step sampled (--hbm-track full is not marked; this is a short run): all count.
        let all = Summary::from_events(&evs[..2]);
        assert_eq!(all.median_step(), Some(1.25));
    }

    #[test]
    fn throughput_counts_the_steady_steps_that_report() {
        let step = |n: u64, dt: f64, samples: Option<f64>, sampled: bool| {
            let mut extra = serde_json::Map::new();
            if sampled {
                extra.insert("hbm_sampled".into(), serde_json::Value::Bool(true));
            }
            Event::Step(Step {
                step: n,
                dt,
                samples,
                extra,
                ..Step::default()
            })
        };
        // Start-up (left out), 64 + 32 samples in 30 ms, a step without a count, and a step the
        // HBM tracker slowed (left out, as from the step times).
        let s = Summary::from_events(&[
            step(1, 5.0, Some(64.0), false),
            step(2, 0.01, Some(64.0), false),
            step(3, 0.02, Some(32.0), false),
            step(4, 0.5, None, false),
            step(5, 0.5, Some(32.0), true),
        ]);
        let all = s.throughput_of(0, 5);
        assert!((all.samples_per_s.unwrap() - 96.0 / 0.03).abs() < 1e-6);
        assert_eq!(all.tokens_per_s, None);
        assert!((s.throughput_of(2, 3).samples_per_s.unwrap() - 1600.0).abs() < 1e-6);
        assert_eq!(s.throughput_of(3, 4).samples_per_s, None);
    }

    #[test]
    fn summary_counts() {
        let evs = vec![
            Event::Step(Step {
                step: 1,
                dt: 5.0,
                ..Default::default()
            }),
            Event::Step(Step {
                step: 2,
                dt: 0.1,
                ..Default::default()
            }),
            Event::Step(Step {
                step: 3,
                dt: 0.3,
                ..Default::default()
            }),
            Event::Compile(Compile {
                kind: "forward".into(),
                status: "ok".into(),
                seconds: 1.0,
                ..Default::default()
            }),
            Event::Compile(Compile {
                kind: "forward".into(),
                status: "ok".into(),
                reason: Some("size".into()),
                seconds: 0.5,
                ..Default::default()
            }),
            Event::Compile(Compile {
                kind: "backward".into(),
                status: "ok".into(),
                seconds: 0.5,
                ..Default::default()
            }),
            Event::Sync(Sync {
                counts: [("item".to_string(), 3)].into(),
                ..Default::default()
            }),
            Event::Memory(Memory {
                allocated: Some(10),
                rss: Some(100),
                ..Default::default()
            }),
            Event::Memory(Memory {
                allocated: Some(5),
                peak: Some(20),
                rss: Some(50),
                ..Default::default()
            }),
        ];
        let s = Summary::from_events(&evs);
        assert_eq!(s.steps, 3);
        assert_eq!(s.compiles, 2);
        assert_eq!(s.recompiles, 1);
        assert_eq!(s.compile_seconds, 2.0);
        assert_eq!(s.median_step(), Some(0.2));
        assert_eq!(s.peak_device, Some(20));
        assert_eq!(s.peak_rss, Some(100));
        assert_eq!(s.syncs_per_step(), Some(1.0));
        assert_eq!(bytes(1536), "1.5 KiB");
    }

    /// TorchTPU's cache counters, a model left on the CPU, an untied weight and XLA:CPU's
    /// emulation notes each get their line.
    #[test]
    fn torch_tpu_cache_placement_and_emulation_lines() {
        use serde_json::json;
        let warning = |category: &str, message: &str| {
            Event::Warning(super::super::event::Warning {
                category: category.into(),
                message: message.into(),
                ..Default::default()
            })
        };
        let mut step = Step {
            step: 1,
            dt: 0.1,
            ..Default::default()
        };
        step.extra.insert(
            "tpu_cache".into(),
            json!({"requests": 40, "hits": 31, "compilations": 9}),
        );
        let evs = vec![
            Event::Step(step),
            warning(
                "DevicePlacement",
                "the optimizer's parameters are on cpu, not tpu (4 on cpu): ...",
            ),
            warning(
                "TiedWeights",
                "wte.weight and lm_head.weight shared one weight before .to(), ...",
            ),
            warning("XlaCpuGap", "aten::cumsum runs on the host CPU here: ..."),
            warning("UserWarning", "something else"),
        ];
        let s = Summary::from_events(&evs);
        assert_eq!(
            s.tpu_cache,
            Some(TpuCache {
                requests: 40,
                hits: 31,
                compilations: 9
            })
        );
        let text = s.render();
        assert!(
            text.contains("TorchTPU compile cache: 9 compilations, 31 hits of 40 requests\n"),
            "{text}"
        );
        assert!(
            text.contains("WRONG DEVICE: the optimizer's parameters are on cpu, not tpu"),
            "{text}"
        );
        assert!(
            text.contains("UNTIED WEIGHTS: wte.weight and lm_head.weight"),
            "{text}"
        );
        assert!(
            text.contains("emulated (XLA:CPU, not the TPU): aten::cumsum runs on the host CPU"),
            "{text}"
        );
        assert!(!text.contains("something else"), "{text}");
    }
}
