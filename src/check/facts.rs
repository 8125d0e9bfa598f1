//! What one run of `tpuport check` says, read back from its events file: the summary numbers,
//! the loss of each step, how it ended, the ops a TPU lacks (with the script's line), host-sync
//! call sites, recompile reasons, and the device memory that stays between steps.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::profile::event::{Event, ExceptionInfo};
use crate::profile::summary::Summary;

/// The warning category the sim gives an op a TPU lacks that ran on the CPU (`--cpu-fallback`).
pub const FALLBACK_WARNING: &str = "TpuCpuFallbackWarning";

#[derive(Debug, Clone, Serialize)]
pub struct OpUse {
    /// `aten::median`
    pub op: String,
    /// Where the script first called it.
    pub file: String,
    pub line: u64,
}

#[derive(Debug, Default)]
pub struct RunFacts {
    pub summary: Summary,
    /// (step, loss) for the steps that recorded one.
    pub losses: Vec<(u64, f64)>,
    pub exit_code: i32,
    pub status: String,
    pub exception: Option<ExceptionInfo>,
    pub fallback_ops: Vec<OpUse>,
    /// Host-sync call sites, most frequent first.
    pub sync_sites: Vec<(String, u64)>,
    /// Recompile reasons with their counts, most frequent first.
    pub recompile_reasons: Vec<(String, u64)>,
    /// Live device bytes at the end of a step, from the second step on (parameters, gradients
    /// and optimizer state); the smallest seen.
    pub resident: Option<u64>,
    /// The script's last lines of output.
    pub output_tail: Vec<String>,
    /// Every line the script wrote to its stdout, in order (up to [`STDOUT_LINES`]).
    pub stdout: Vec<String>,
    /// Whether the script wrote more stdout than [`STDOUT_LINES`] (the rest is not kept).
    pub stdout_cut: bool,
    /// The host run mapped the script's CUDA to the CPU (`--cuda-on-cpu` on a machine without
    /// CUDA).
    pub cuda_on_cpu: bool,
    /// The batch the script reported for its first step (`tpuport.report(samples=...)`).
    pub samples: Option<f64>,
    /// Lines of the events file that were skipped (unreadable, unknown event types).
    pub skipped: crate::profile::skipped::Skipped,
}

/// The stdout lines a run keeps for the comparison with the original (a training script prints
/// a few per step; beyond this it is a log, not a result).
pub const STDOUT_LINES: usize = 20_000;

/// The agent's note (its `tpuport` stream) when a host run maps CUDA to the CPU.
const CUDA_ON_CPU_NOTE: &str = "host: no CUDA here";

/// TorchTPU's own log line for an op it lacks that ran on the CPU (`enable_cpu_fallback`, a TPU
/// or xla-cpu): `… operator 'aten::median' is not implemented for TPU. Falling back to CPU`.
const TORCH_TPU_FALLBACK: &str = "is not implemented for TPU. Falling back to CPU";

impl RunFacts {
    /// Where the run ran, in words: "the sim", "xla-cpu", "the TPU", "the host".
    pub fn target(&self) -> &'static str {
        match self
            .summary
            .run_start
            .as_ref()
            .map(|s| s.target.as_str())
            .unwrap_or("sim")
        {
            "xla-cpu" => "xla-cpu (TorchTPU on XLA:CPU)",
            "tpu" => "the TPU",
            "host" => "the host",
            _ => "the sim",
        }
    }

    pub fn read(path: &Path) -> Result<RunFacts> {
        let (events, skipped) = crate::profile::follow::read_events(path)?;
        Ok(RunFacts {
            skipped,
            ..RunFacts::from_events(&events)
        })
    }

    pub fn from_events(events: &[Event]) -> RunFacts {
        let mut f = RunFacts {
            summary: Summary::from_events(events),
            ..RunFacts::default()
        };
        let mut sites: BTreeMap<String, u64> = BTreeMap::new();
        let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
        let mut tail = std::collections::VecDeque::new();
        for e in events {
            match e {
                Event::Step(s) => {
                    if let Some(l) = s.extra.get("loss").and_then(|v| v.as_f64()) {
                        f.losses.push((s.step, l));
                    }
                    f.samples = f.samples.or(s.samples);
                }
                Event::RunEnd(r) => {
                    f.exit_code = r.exit_code;
                    f.status = r.status.clone();
                    f.exception = r.exception.clone();
                }
                Event::Warning(w) if w.category == FALLBACK_WARNING => f.fallback_ops.push(OpUse {
                    op: w
                        .message
                        .split('\'')
                        .nth(1)
                        .unwrap_or(&w.message)
                        .to_string(),
                    file: w.file.clone(),
                    line: w.line,
                }),
                Event::Sync(s) => {
                    for (site, n) in &s.sites {
                        let at = sites.entry(site.clone()).or_default();
                        *at = at.saturating_add(*n);
                    }
                }
                Event::Compile(c) if c.kind == "forward" && c.status != "limit_hit" => {
                    if let Some(r) = &c.reason {
                        *reasons.entry(r.clone()).or_default() += 1;
                    }
                }
                Event::Memory(m) if m.step >= 2 => {
                    if let Some(a) = m.allocated {
                        f.resident = Some(f.resident.map_or(a, |r| r.min(a)));
                    }
                }
                Event::Log(l) if l.stream == "stderr" && l.line.contains(TORCH_TPU_FALLBACK) => {
                    let op = l.line.split('\'').nth(1).unwrap_or("?").to_string();
                    if !f.fallback_ops.iter().any(|u| u.op == op) {
                        f.fallback_ops.push(OpUse {
                            op,
                            file: String::new(),
                            line: 0,
                        });
                    }
                }
                Event::Log(l) if l.stream == "tpuport" && l.line.starts_with(CUDA_ON_CPU_NOTE) => {
                    f.cuda_on_cpu = true;
                }
                Event::Log(l) if l.stream == "stdout" || l.stream == "stderr" => {
                    if l.stream == "stdout" {
                        if f.stdout.len() < STDOUT_LINES {
                            f.stdout.push(l.line.clone());
                        } else {
                            f.stdout_cut = true;
                        }
                    }
                    tail.push_back(l.line.clone());
                    if tail.len() > 20 {
                        tail.pop_front();
                    }
                }
                _ => {}
            }
        }
        // TorchTPU's log line (stderr) and the sim's warning (the events pipe) come through two
        // pipes, in either order: an op seen with the script's line needs no unlocated twin.
        let located: Vec<String> = f
            .fallback_ops
            .iter()
            .filter(|u| !u.file.is_empty())
            .map(|u| u.op.clone())
            .collect();
        f.fallback_ops
            .retain(|u| !u.file.is_empty() || !located.contains(&u.op));
        f.sync_sites = by_count(sites);
        f.recompile_reasons = by_count(reasons);
        f.output_tail = tail.into_iter().collect();
        f
    }

    /// Paths inside `root` (the run's copy of the folder) as the user knows them: relative.
    pub fn relative_to(&mut self, root: &Path) {
        let prefix = format!("{}/", root.display());
        for (site, _) in &mut self.sync_sites {
            if let Some(rest) = site.strip_prefix(&prefix) {
                *site = rest.to_string();
            }
        }
        for op in &mut self.fallback_ops {
            if let Some(rest) = op.file.strip_prefix(&prefix) {
                op.file = rest.to_string();
            }
        }
    }

    pub fn ok(&self) -> bool {
        self.exit_code == 0 && self.summary.steps > 0
    }

    /// How a run that is not [`ok`](Self::ok) ended, in words: the exception's first line, a
    /// timeout, an exit status, or no training step.
    pub fn why_failed(&self) -> String {
        match &self.exception {
            Some(e) => format!("{}: {}", e.kind, e.message.lines().next().unwrap_or("")),
            None if self.status == "timeout" => "it timed out (--timeout)".to_string(),
            None if self.exit_code == 0 => "it ended without a training step".to_string(),
            None => format!("it exited with {}", self.exit_code),
        }
    }

    /// The script's own frame where the exception was raised (the last `File "…", line N` of
    /// the traceback inside `folder`), as `file:line`.
    pub fn failing_line(&self, folder: &Path) -> Option<String> {
        let tb = &self.exception.as_ref()?.traceback;
        let root = folder.display().to_string();
        tb.lines()
            .rev()
            .filter_map(|l| {
                let rest = l.trim().strip_prefix("File \"")?;
                let (file, after) = rest.split_once('"')?;
                let line = after.trim_start_matches(", line ").split(',').next()?;
                file.starts_with(&root).then(|| {
                    format!(
                        "{}:{}",
                        file.trim_start_matches(&root).trim_start_matches('/'),
                        line
                    )
                })
            })
            .next()
    }
}

fn by_count(m: BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> Vec<Event> {
        lines.iter().map(|l| Event::parse(l).unwrap()).collect()
    }

    #[test]
    fn losses_ops_syncs_recompiles_and_resident_memory() {
        let ev = parse(&[
            r#"{"type":"step","t":1,"step":1,"dt":0.5,"source":"optimizer","samples":null,"tokens":null,"loss":2.5}"#,
            r#"{"type":"warning","t":1.1,"category":"TpuCpuFallbackWarning","message":"operator 'aten::median' is not implemented for TPU. Falling back to CPU","file":"/w/port/train.py","line":42}"#,
            r#"{"type":"sync","t":1.2,"step":1,"counts":{"item":2},"sites":[["train.py:50",2]]}"#,
            r#"{"type":"memory","t":1.3,"step":2,"allocated":1000,"reserved":null,"peak":5000,"rss":null}"#,
            r#"{"type":"memory","t":1.4,"step":3,"allocated":900,"reserved":null,"peak":5000,"rss":null}"#,
            r#"{"type":"compile","t":1.5,"compile_id":"0/1","function":"forward","file":"m.py","line":3,"reason":"size mismatch","seconds":0.1,"kind":"forward","step":2,"status":"ok"}"#,
            r#"{"type":"step","t":2,"step":2,"dt":0.1,"source":"optimizer","samples":null,"tokens":null,"loss":2.25}"#,
            r#"{"type":"run_end","t":3,"exit_code":0,"status":"ok","signal":null,"exception":null,"steps":2,"duration":3}"#,
        ]);
        let f = RunFacts::from_events(&ev);
        assert_eq!(f.losses, vec![(1, 2.5), (2, 2.25)]);
        assert_eq!(f.fallback_ops[0].op, "aten::median");
        assert_eq!(f.fallback_ops[0].line, 42);
        assert_eq!(f.sync_sites, vec![("train.py:50".to_string(), 2)]);
        assert_eq!(f.recompile_reasons, vec![("size mismatch".to_string(), 1)]);
        assert_eq!(f.resident, Some(900));
        assert!(f.ok());
    }

    #[test]
    fn an_op_logged_before_its_warning_is_listed_once_with_its_line() {
        let ev = parse(&[
            r#"{"type":"log","t":1,"stream":"stderr","line":"[W] operator 'aten::median' is not implemented for TPU. Falling back to CPU"}"#,
            r#"{"type":"warning","t":1.1,"category":"TpuCpuFallbackWarning","message":"operator 'aten::median' is not implemented for TPU. Falling back to CPU","file":"/w/port/train.py","line":15}"#,
            r#"{"type":"log","t":1.2,"stream":"stderr","line":"[W] operator 'aten::kthvalue' is not implemented for TPU. Falling back to CPU"}"#,
        ]);
        let f = RunFacts::from_events(&ev);
        let ops: Vec<(&str, u64)> = f
            .fallback_ops
            .iter()
            .map(|u| (u.op.as_str(), u.line))
            .collect();
        assert_eq!(ops, [("aten::median", 15), ("aten::kthvalue", 0)]);
    }

    #[test]
    fn the_failing_line_is_the_scripts_last_frame() {
        let f = RunFacts {
            exception: Some(ExceptionInfo {
                kind: "RuntimeError".into(),
                message: "x".into(),
                traceback: "Traceback (most recent call last):\n  File \"/w/port/train.py\", line 9, in <module>\n    main()\n  File \"/w/port/model.py\", line 4, in f\n    y()\n  File \"/venv/torch/x.py\", line 1, in y\n".into(),
            }),
            ..RunFacts::default()
        };
        assert_eq!(
            f.failing_line(Path::new("/w/port")).as_deref(),
            Some("model.py:4")
        );
    }
}
