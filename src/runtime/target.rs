//! Where a script runs and how TorchTPU is configured for it.
//!
//! [`plan`] turns the run options and what [`super::detect`] found into the exact environment
//! and Python calls for the target: for a real TPU only TorchTPU's own switches (env vars read
//! at start, `torch.set_float32_matmul_precision` and `torch.tpu.allow_excess_precision` before
//! the first compile), never the `torch.tpu.*` device helpers that are internal on torch >= 2.11.
//! [`Target`], [`Mode`] and [`Precision`] serialise to the strings the agent reads.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde::Serialize;

use super::chips::{Chip, DEFAULT_SIM_CHIP, chip_by_name};
use super::detect::TpuDevice;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetRequest {
    Auto,
    Tpu,
    Sim,
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Tpu,
    Sim,
    Host,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Tpu => "tpu",
            Target::Sim => "sim",
            Target::Host => "host",
        }
    }
}

/// TorchTPU's eager modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `DEFER_NEVER` (TorchTPU's default): op by op, asynchronous.
    Strict,
    /// `DEFER_NEVER_AND_LAUNCH_BLOCKING`: op by op, synchronous.
    Debug,
    /// `DEFER_AND_FUSE`: defer ops and fuse them into larger graphs.
    DeferFuse,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Strict => "strict",
            Mode::Debug => "debug",
            Mode::DeferFuse => "defer-fuse",
        }
    }
}

/// Float32 matmul precision: bf16 1-pass (TorchTPU's default, "medium"), 3-pass, 6-pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Default,
    High,
    Highest,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Default => "default",
            Precision::High => "high",
            Precision::Highest => "highest",
        }
    }
    /// The `torch.set_float32_matmul_precision` string TorchTPU maps to this precision.
    pub fn torch_name(self) -> &'static str {
        match self {
            Precision::Default => "medium",
            Precision::High => "high",
            Precision::Highest => "highest",
        }
    }
}

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub target: TargetRequest,
    pub mode: Mode,
    /// None = leave TorchTPU's default alone.
    pub precision: Option<Precision>,
    pub excess_precision: bool,
    pub debug_checks: bool,
    /// Run the ops a TPU lacks on the CPU (TorchTPU's `enable_cpu_fallback`) instead of failing.
    pub cpu_fallback: bool,
    /// Tier-3 (persistent, shared) compilation cache root.
    pub cache_dir: Option<PathBuf>,
    /// Tier-2 (host-local) compilation cache name.
    pub cache_name: Option<String>,
    pub chip: Option<&'static Chip>,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            target: TargetRequest::Auto,
            mode: Mode::Strict,
            precision: None,
            excess_precision: false,
            debug_checks: false,
            cpu_fallback: false,
            cache_dir: None,
            cache_name: None,
            chip: None,
        }
    }
}

/// The resolved launch: target, the environment changes, and the Python statements the agent
/// runs after `import torch` and before the script.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub target: Target,
    pub reason: String,
    pub chip: Option<&'static Chip>,
    /// Variables to set (`Some`) or remove (`None`) in the script's environment.
    pub env: BTreeMap<String, Option<String>>,
    pub calls: Vec<String>,
    /// Notes to tell the user once (e.g. a flag that has no effect on this target).
    pub notes: Vec<String>,
}

/// TorchTPU's start-up switches for the eager mode; the ones not chosen are removed.
const MODE_VARS: [&str; 2] = ["TORCH_TPU_DEFER_AND_FUSE", "TORCH_TPU_LAUNCH_BLOCKING"];

pub fn plan(req: &Request, tpus: &[TpuDevice], torch_tpu_installed: bool) -> Result<Plan> {
    let (target, reason) = match req.target {
        TargetRequest::Tpu => (Target::Tpu, "--target tpu".to_string()),
        TargetRequest::Sim => (Target::Sim, "--target sim".to_string()),
        TargetRequest::Host => (Target::Host, "--target host".to_string()),
        TargetRequest::Auto => match tpus.first() {
            Some(d) => (
                Target::Tpu,
                format!(
                    "auto: {} {} found on PCI ({} device(s), VFIO group {})",
                    d.chip.device_name,
                    d.pci_address,
                    tpus.len(),
                    d.iommu_group
                ),
            ),
            None => (
                Target::Sim,
                "auto: no TPU on this machine (PCI vendor 0x1ae0 with VFIO)".to_string(),
            ),
        },
    };
    let mut p = Plan {
        target,
        reason,
        chip: None,
        env: BTreeMap::new(),
        calls: vec![],
        notes: vec![],
    };
    match target {
        Target::Tpu => {
            if tpus.is_empty() {
                bail!(
                    "--target tpu, but no TPU is visible: no PCI device with vendor 0x1ae0 and a known TPU id has its IOMMU group under /dev/vfio. Run on a TPU VM, or use --target sim to run on this machine"
                );
            }
            if !torch_tpu_installed {
                bail!(
                    "--target tpu needs TorchTPU in the script's Python environment: `pip install torch_tpu` there (or pass --python to choose another environment)"
                );
            }
            p.chip = Some(tpus[0].chip);
            if let Some(c) = req.chip
                && c.name != tpus[0].chip.name
            {
                p.notes.push(format!(
                    "--chip {} ignored: this machine has {}",
                    c.name, tpus[0].chip.device_name
                ));
            }
            for v in MODE_VARS {
                p.env.insert(v.to_string(), None);
            }
            match req.mode {
                Mode::Strict => {}
                Mode::Debug => {
                    p.env
                        .insert("TORCH_TPU_LAUNCH_BLOCKING".into(), Some("1".into()));
                }
                Mode::DeferFuse => {
                    p.env
                        .insert("TORCH_TPU_DEFER_AND_FUSE".into(), Some("1".into()));
                }
            }
            if req.debug_checks {
                p.env
                    .insert("TORCH_TPU_ENABLE_DEBUG_CHECKS".into(), Some("1".into()));
            }
            if let Some(name) = &req.cache_name {
                p.env.insert(
                    "TORCH_TPU_TIER2_COMPILATION_CACHE".into(),
                    Some(name.clone()),
                );
            }
            if let Some(dir) = &req.cache_dir {
                p.env.insert(
                    "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT".into(),
                    Some(dir.display().to_string()),
                );
            }
            // Both must happen before the first compile: the agent runs them before the script.
            if let Some(prec) = req.precision {
                p.calls.push(format!(
                    "torch.set_float32_matmul_precision(\"{}\")",
                    prec.torch_name()
                ));
            }
            if req.excess_precision {
                p.calls
                    .push("torch.tpu.allow_excess_precision = True".into());
            }
            if req.cpu_fallback {
                // TorchTPU's switch is a property of its execution-mode module (no public API).
                p.calls.push(
                    "import torch_tpu._internal.execution_mode as _em; _em.enable_cpu_fallback = True"
                        .into(),
                );
            }
        }
        Target::Sim | Target::Host => {
            p.chip = if target == Target::Sim {
                Some(req.chip.unwrap_or_else(|| {
                    chip_by_name(DEFAULT_SIM_CHIP).expect("the default chip is in the table")
                }))
            } else {
                req.chip
            };
            if torch_tpu_installed {
                // Without these, `import torch` autoloads TorchTPU, and anything touching PJRT
                // retries cloud metadata for ~10 minutes, then aborts.
                p.env
                    .insert("TORCH_DEVICE_BACKEND_AUTOLOAD".into(), Some("0".into()));
                p.env.insert("TPU_SKIP_MDS_QUERY".into(), Some("1".into()));
            }
            if target == Target::Host {
                let mut ignored = vec![];
                if req.mode != Mode::Strict {
                    ignored.push(format!("--mode {}", req.mode.as_str()));
                }
                if let Some(prec) = req.precision {
                    ignored.push(format!("--precision {}", prec.as_str()));
                }
                if req.excess_precision {
                    ignored.push("--excess-precision".into());
                }
                if req.debug_checks {
                    ignored.push("--debug-checks".into());
                }
                if req.cpu_fallback {
                    ignored.push("--cpu-fallback".into());
                }
                if req.cache_dir.is_some() || req.cache_name.is_some() {
                    ignored.push("--cache-dir/--cache-name".into());
                }
                if !ignored.is_empty() {
                    p.notes.push(format!(
                        "{} ignored on the host target (the script runs as written); use --target sim or tpu",
                        ignored.join(", ")
                    ));
                }
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tpu() -> Vec<TpuDevice> {
        vec![TpuDevice {
            pci_address: "0000:00:04.0".into(),
            chip: chip_by_name("v6e").unwrap(),
            iommu_group: "3".into(),
        }]
    }

    fn env(p: &Plan) -> Vec<String> {
        p.env
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => format!("-{k}"),
            })
            .collect()
    }

    /// The exact environment and calls for the tpu target, for every combination of mode,
    /// precision, excess precision, debug checks and caches.
    #[test]
    fn cpu_fallback_sets_torch_tpus_switch_on_a_tpu_and_is_ignored_on_the_host() {
        let req = Request {
            cpu_fallback: true,
            ..Request::default()
        };
        let p = plan(&req, &tpu(), true).unwrap();
        assert!(
            p.calls
                .iter()
                .any(|c| c.contains("enable_cpu_fallback = True")),
            "{:?}",
            p.calls
        );
        let host = Request {
            target: TargetRequest::Host,
            cpu_fallback: true,
            ..Request::default()
        };
        let p = plan(&host, &[], false).unwrap();
        assert!(p.calls.is_empty());
        assert!(
            p.notes.iter().any(|n| n.contains("--cpu-fallback ignored")),
            "{:?}",
            p.notes
        );
    }

    #[test]
    fn tpu_plan_for_every_combination() {
        let modes = [
            (Mode::Strict, vec![]),
            (Mode::Debug, vec!["TORCH_TPU_LAUNCH_BLOCKING=1"]),
            (Mode::DeferFuse, vec!["TORCH_TPU_DEFER_AND_FUSE=1"]),
        ];
        let precisions = [
            (None, None),
            (
                Some(Precision::Default),
                Some("torch.set_float32_matmul_precision(\"medium\")"),
            ),
            (
                Some(Precision::High),
                Some("torch.set_float32_matmul_precision(\"high\")"),
            ),
            (
                Some(Precision::Highest),
                Some("torch.set_float32_matmul_precision(\"highest\")"),
            ),
        ];
        let mut checked = 0;
        for (mode, mode_env) in &modes {
            for (prec, prec_call) in &precisions {
                for excess in [false, true] {
                    for debug in [false, true] {
                        for cache in [false, true] {
                            let req = Request {
                                target: TargetRequest::Auto,
                                mode: *mode,
                                precision: *prec,
                                excess_precision: excess,
                                debug_checks: debug,
                                cpu_fallback: false,
                                cache_dir: cache.then(|| PathBuf::from("/cache/t3")),
                                cache_name: cache.then(|| "job".to_string()),
                                chip: None,
                            };
                            let p = plan(&req, &tpu(), true).unwrap();
                            assert_eq!(p.target, Target::Tpu);
                            let mut want: Vec<String> = vec![];
                            for v in MODE_VARS {
                                let set = mode_env.iter().find(|e| e.starts_with(v));
                                want.push(set.map(|s| s.to_string()).unwrap_or(format!("-{v}")));
                            }
                            if debug {
                                want.push("TORCH_TPU_ENABLE_DEBUG_CHECKS=1".into());
                            }
                            if cache {
                                want.push("TORCH_TPU_TIER2_COMPILATION_CACHE=job".into());
                                want.push(
                                    "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT=/cache/t3".into(),
                                );
                            }
                            want.sort_by(|a, b| {
                                a.trim_start_matches('-').cmp(b.trim_start_matches('-'))
                            });
                            assert_eq!(env(&p), want, "{mode:?} {prec:?} {excess} {debug} {cache}");
                            let mut calls: Vec<&str> = prec_call.iter().copied().collect();
                            if excess {
                                calls.push("torch.tpu.allow_excess_precision = True");
                            }
                            assert_eq!(p.calls, calls);
                            // Never the helpers that are internal on torch >= 2.11.
                            for c in &p.calls {
                                for internal in [
                                    "is_available",
                                    "device_count",
                                    "set_device",
                                    "synchronize",
                                    "current_device",
                                ] {
                                    assert!(!c.contains(&format!("torch.tpu.{internal}")), "{c}");
                                }
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, 3 * 4 * 2 * 2 * 2);
    }

    #[test]
    fn auto_without_a_tpu_is_sim_and_silences_torch_tpu() {
        let p = plan(&Request::default(), &[], true).unwrap();
        assert_eq!(p.target, Target::Sim);
        assert_eq!(
            env(&p),
            vec!["TORCH_DEVICE_BACKEND_AUTOLOAD=0", "TPU_SKIP_MDS_QUERY=1"]
        );
        assert!(p.calls.is_empty());
        assert_eq!(p.chip.unwrap().name, "v5e");
        // Without torch_tpu installed there is nothing to silence.
        assert!(
            plan(&Request::default(), &[], false)
                .unwrap()
                .env
                .is_empty()
        );
        // Host target on a machine with torch_tpu and a TPU: still no autoload.
        let host = Request {
            target: TargetRequest::Host,
            ..Request::default()
        };
        let p = plan(&host, &tpu(), true).unwrap();
        assert_eq!(p.target, Target::Host);
        assert_eq!(
            env(&p),
            vec!["TORCH_DEVICE_BACKEND_AUTOLOAD=0", "TPU_SKIP_MDS_QUERY=1"]
        );
    }

    #[test]
    fn tpu_target_errors_say_what_to_do() {
        let req = Request {
            target: TargetRequest::Tpu,
            ..Request::default()
        };
        let e = plan(&req, &[], true).unwrap_err().to_string();
        assert!(
            e.contains("no TPU is visible") && e.contains("--target sim"),
            "{e}"
        );
        let e = plan(&req, &tpu(), false).unwrap_err().to_string();
        assert!(e.contains("pip install torch_tpu"), "{e}");
    }

    #[test]
    fn host_target_notes_ignored_flags() {
        let req = Request {
            target: TargetRequest::Host,
            mode: Mode::Debug,
            ..Request::default()
        };
        let p = plan(&req, &[], false).unwrap();
        assert!(
            p.notes[0].contains("--mode debug ignored on the host target"),
            "{:?}",
            p.notes
        );
    }
}
