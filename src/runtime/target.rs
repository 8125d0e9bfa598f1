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
use super::xla_cpu::XlaCpu;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetRequest {
    Auto,
    Tpu,
    XlaCpu,
    Sim,
    Host,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Target {
    /// A real TPU with TorchTPU.
    #[serde(rename = "tpu")]
    Tpu,
    /// TorchTPU 0.2.0 itself on XLA:CPU (a CPU PJRT plugin behind tpuport's shim).
    #[serde(rename = "xla-cpu")]
    XlaCpu,
    /// The Python emulation of TorchTPU over the host.
    #[serde(rename = "sim")]
    Sim,
    /// The script as written, on this machine.
    #[serde(rename = "host")]
    Host,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Tpu => "tpu",
            Target::XlaCpu => "xla-cpu",
            Target::Sim => "sim",
            Target::Host => "host",
        }
    }

    /// Whether TorchTPU itself runs the script (its own switches, errors and compiler).
    pub fn is_torch_tpu(self) -> bool {
        matches!(self, Target::Tpu | Target::XlaCpu)
    }
}

/// What [`plan`] knows of the machine and the script's environment.
#[derive(Debug, Clone)]
pub struct Machine<'a> {
    /// TPUs on PCI (with VFIO).
    pub tpus: &'a [TpuDevice],
    /// TorchTPU is installed in the script's environment.
    pub torch_tpu_installed: bool,
    /// The xla-cpu installation, or why it cannot serve this environment.
    pub xla_cpu: &'a std::result::Result<XlaCpu, String>,
    /// The run is one rank of several (`WORLD_SIZE` > 1), e.g. under `--nproc` or torchrun.
    pub world_size: u32,
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
    /// Folders put at the front of the script's `sys.path` before torch is imported (xla-cpu:
    /// TorchTPU's own folder, so no other target's process can import it).
    pub python_path: Vec<PathBuf>,
    pub calls: Vec<String>,
    /// Notes to tell the user once (e.g. a flag that has no effect on this target).
    pub notes: Vec<String>,
}

/// TorchTPU's start-up switches for the eager mode; the ones not chosen are removed.
const MODE_VARS: [&str; 2] = ["TORCH_TPU_DEFER_AND_FUSE", "TORCH_TPU_LAUNCH_BLOCKING"];

/// Why several processes cannot run on xla-cpu (torchtpu_on_cpu_multiprocess.md).
const XLA_CPU_ONE_PROCESS: &str = "TorchTPU's tpu_dist needs one PJRT client with a global view (one device per process, WORLD_SIZE in all), which no CPU PJRT plugin offers";

pub fn plan(req: &Request, m: &Machine) -> Result<Plan> {
    let tpus = m.tpus;
    let (target, reason) = match req.target {
        TargetRequest::Tpu => (Target::Tpu, "--target tpu".to_string()),
        TargetRequest::Sim => (Target::Sim, "--target sim".to_string()),
        TargetRequest::Host => (Target::Host, "--target host".to_string()),
        TargetRequest::XlaCpu if m.world_size > 1 => (
            Target::Sim,
            format!(
                "--target xla-cpu runs one process, and this is one of {} ranks: {XLA_CPU_ONE_PROCESS}; the ranks run on the sim",
                m.world_size
            ),
        ),
        TargetRequest::XlaCpu => match m.xla_cpu {
            Ok(_) => (Target::XlaCpu, "--target xla-cpu".to_string()),
            Err(why) => bail!("--target xla-cpu: {why}"),
        },
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
            None if m.world_size > 1 && m.xla_cpu.is_ok() => (
                Target::Sim,
                format!(
                    "auto: no TPU on this machine, and one of {} ranks: xla-cpu runs one process ({XLA_CPU_ONE_PROCESS})",
                    m.world_size
                ),
            ),
            None => match m.xla_cpu {
                Ok(x) => (
                    Target::XlaCpu,
                    format!(
                        "auto: no TPU on this machine; TorchTPU {} runs on XLA:CPU ({} {})",
                        x.manifest.torch_tpu, x.manifest.plugin.dist, x.manifest.plugin.version
                    ),
                ),
                Err(why) => (
                    Target::Sim,
                    format!(
                        "auto: no TPU on this machine (PCI vendor 0x1ae0 with VFIO), and xla-cpu cannot serve: {why}"
                    ),
                ),
            },
        },
    };
    let mut p = Plan {
        target,
        reason,
        chip: None,
        env: BTreeMap::new(),
        python_path: vec![],
        calls: vec![],
        notes: vec![],
    };
    match target {
        Target::Tpu => {
            if tpus.is_empty() {
                bail!(
                    "--target tpu, but no TPU is visible: no PCI device with vendor 0x1ae0 and a known TPU id has its IOMMU group under /dev/vfio. Run on a TPU VM, or use --target xla-cpu or sim to run on this machine"
                );
            }
            if !m.torch_tpu_installed {
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
            torch_tpu_switches(req, &mut p);
        }
        Target::XlaCpu => {
            let x = m
                .xla_cpu
                .as_ref()
                .map_err(|why| anyhow::anyhow!("--target xla-cpu: {why}"))?;
            p.chip = Some(req.chip.unwrap_or_else(default_chip));
            // TorchTPU loads "the TPU plugin" from TPU_LIBRARY_PATH: the shim, which forwards to
            // the CPU plugin with one device (one chip per process, as on a TPU VM under
            // torchrun). libtpu is never loaded, and the metadata server is never asked.
            p.env.insert(
                "TPU_LIBRARY_PATH".into(),
                Some(x.shim.display().to_string()),
            );
            p.env.insert(
                "PJRT_SHIM_REAL".into(),
                Some(x.plugin.display().to_string()),
            );
            p.env
                .insert("PJRT_SHIM_SET".into(), Some("cpu_device_count=1".into()));
            p.env.insert("TPU_SKIP_MDS_QUERY".into(), Some("1".into()));
            // TorchTPU must load at `import torch` here, as on a TPU VM.
            p.env.insert("TORCH_DEVICE_BACKEND_AUTOLOAD".into(), None);
            p.python_path.push(x.site.clone());
            torch_tpu_switches(req, &mut p);
        }
        Target::Sim | Target::Host => {
            p.chip = if target == Target::Sim {
                Some(req.chip.unwrap_or_else(default_chip))
            } else {
                req.chip
            };
            if m.torch_tpu_installed {
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

fn default_chip() -> &'static Chip {
    chip_by_name(DEFAULT_SIM_CHIP).expect("the default chip is in the table")
}

/// TorchTPU's own switches, the same on a TPU and on xla-cpu: the eager mode and debug checks
/// (read at start), the compilation caches, and the settings that must precede the first
/// compile (run by the agent before the script).
fn torch_tpu_switches(req: &Request, p: &mut Plan) {
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

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
