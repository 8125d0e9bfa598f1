//! `tpuport doctor`: is this machine and this Python environment set up for TorchTPU? Each check
//! has an id, a verdict and, when it is not ok, the fix. Facts from `torch_tpu_api.md`: torch_tpu
//! 0.2.0 needs Python ≥ 3.11, `torch>=2.11.0,<=2.15.0` and `libtpu>=0.0.50`; PyPI's default torch
//! is the CUDA build (about 5 GB of NVIDIA wheels, of no use on a TPU VM); one process per TPU
//! device, and libtpu's lock file `/tmp/libtpu_lockfile`; `TPU_LAUNCH_BLOCKING` is ignored by
//! 0.2.0 (`TORCH_TPU_LAUNCH_BLOCKING` is the switch); with torch_tpu installed and no TPU, a plain
//! `import torch` retries cloud metadata for about 10 minutes.
//!
//! Everything it reads is passed in ([`Machine`], [`Environment`]), so each check is tested
//! against a faked machine (sysfs, /dev, /proc, /tmp, variables) and faked venvs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::detect::{TpuDevice, scan_tpus};
use super::dists::{dist_version, numbers};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Not applicable here (e.g. a TPU check on a machine without one).
    Skip,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub id: &'static str,
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    pub fix: Option<String>,
}

/// Where the machine's facts are read (the real roots, or a test's fake ones).
pub struct Machine {
    pub sys: PathBuf,
    pub dev: PathBuf,
    pub proc: PathBuf,
    pub tmp: PathBuf,
    pub shm: PathBuf,
    pub vars: BTreeMap<String, String>,
    /// The xla-cpu installation folder, if one is recorded (`super::xla_cpu::location`).
    pub xla_cpu: Option<PathBuf>,
    /// `(os, arch)`.
    pub platform: (&'static str, &'static str),
}

impl Machine {
    pub fn this() -> Machine {
        Machine {
            sys: "/sys".into(),
            dev: "/dev".into(),
            proc: "/proc".into(),
            tmp: "/tmp".into(),
            shm: "/dev/shm".into(),
            vars: std::env::vars().collect(),
            xla_cpu: super::xla_cpu::location(),
            platform: super::xla_cpu::this_platform(),
        }
    }
}

/// The Python environment a run would use.
pub struct Environment {
    pub python: PathBuf,
    /// `3.11.9`
    pub version: String,
    pub site_packages: Vec<PathBuf>,
}

fn check(
    id: &'static str,
    name: &'static str,
    status: Status,
    detail: impl Into<String>,
    fix: Option<&str>,
) -> Check {
    Check {
        id,
        name,
        status,
        detail: detail.into(),
        fix: fix.map(str::to_string),
    }
}

pub fn run_checks(m: &Machine, py: Option<&Environment>) -> Vec<Check> {
    let tpus = scan_tpus(&m.sys, &m.dev);
    let sp: &[PathBuf] = py.map(|p| p.site_packages.as_slice()).unwrap_or(&[]);
    let torch = dist_version(sp, "torch");
    let torch_tpu = dist_version(sp, "torch_tpu");
    let mut out = vec![
        python_version(py),
        torch_version(py, torch.as_deref()),
        cuda_build(sp, torch.as_deref(), &tpus),
        torch_tpu_check(sp, torch_tpu.as_deref(), &tpus),
        tpu_present(&tpus),
        tpu_free(m, &tpus),
        xla_cpu_ready(m, py, &tpus),
    ];
    out.extend(variables(m));
    out.push(compile_cache(m));
    out.push(metadata_hang(m, torch_tpu.as_deref(), &tpus));
    out
}

fn python_version(py: Option<&Environment>) -> Check {
    let Some(py) = py else {
        return check(
            "DOC001",
            "python",
            Status::Fail,
            "no Python environment found",
            Some("create one: python3.11 -m venv .venv && . .venv/bin/activate (or pass --python)"),
        );
    };
    let v = numbers(&py.version);
    if v.len() >= 2 && (v[0], v[1]) >= (3, 11) {
        check(
            "DOC001",
            "python",
            Status::Ok,
            format!("Python {} ({})", py.version, py.python.display()),
            None,
        )
    } else {
        check(
            "DOC001",
            "python",
            Status::Fail,
            format!(
                "Python {}: torch_tpu 0.2.0 requires 3.11 or newer",
                py.version
            ),
            Some("create the venv with Python 3.11–3.14: python3.11 -m venv .venv"),
        )
    }
}

fn torch_version(py: Option<&Environment>, torch: Option<&str>) -> Check {
    match torch {
        None if py.is_none() => check(
            "DOC002",
            "torch",
            Status::Skip,
            "no Python environment",
            None,
        ),
        None => check(
            "DOC002",
            "torch",
            Status::Fail,
            "torch is not installed in this environment",
            Some("pip install torch==2.15.0 (torch_tpu 0.2.0 supports 2.11.0 to 2.15.0)"),
        ),
        Some(v) => {
            let n = numbers(v);
            if n.as_slice() >= [2, 11, 0].as_slice() && n.as_slice() <= [2, 15, 0].as_slice() {
                check("DOC002", "torch", Status::Ok, format!("torch {v}"), None)
            } else {
                check(
                    "DOC002",
                    "torch",
                    Status::Fail,
                    format!("torch {v}: torch_tpu 0.2.0 requires torch>=2.11.0,<=2.15.0"),
                    Some("pip install torch==2.15.0"),
                )
            }
        }
    }
}

fn cuda_build(sp: &[PathBuf], torch: Option<&str>, tpus: &[TpuDevice]) -> Check {
    let Some(v) = torch else {
        return check(
            "DOC003",
            "torch build",
            Status::Skip,
            "torch is not installed",
            None,
        );
    };
    let nvidia = sp.iter().any(|p| {
        std::fs::read_dir(p).is_ok_and(|rd| {
            rd.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().starts_with("nvidia_"))
        })
    });
    let cuda = v.contains("+cu") || nvidia;
    match (cuda, tpus.is_empty()) {
        (true, false) => check(
            "DOC003",
            "torch build",
            Status::Warn,
            format!(
                "torch {v} is the CUDA build (with NVIDIA wheels, about 5 GB) on a TPU VM: none of it is used"
            ),
            Some("pip install torch==2.15.0 --index-url https://download.pytorch.org/whl/cpu"),
        ),
        (true, true) => check(
            "DOC003",
            "torch build",
            Status::Ok,
            format!(
                "torch {v}, CUDA build (fine here; on a TPU VM the CPU build saves about 5 GB)"
            ),
            None,
        ),
        (false, _) => check(
            "DOC003",
            "torch build",
            Status::Ok,
            format!("torch {v}, CPU build"),
            None,
        ),
    }
}

fn torch_tpu_check(sp: &[PathBuf], torch_tpu: Option<&str>, tpus: &[TpuDevice]) -> Check {
    let libtpu = dist_version(sp, "libtpu");
    match (torch_tpu, libtpu.as_deref()) {
        (None, _) if tpus.is_empty() => check(
            "DOC004",
            "torch_tpu",
            Status::Skip,
            "torch_tpu is not installed (not needed for the sim target)",
            None,
        ),
        (None, _) => check(
            "DOC004",
            "torch_tpu",
            Status::Fail,
            "a TPU is attached but torch_tpu is not installed",
            Some("pip install torch_tpu (it brings libtpu)"),
        ),
        (Some(v), None) => check(
            "DOC004",
            "torch_tpu",
            Status::Fail,
            format!("torch_tpu {v} without libtpu"),
            Some("pip install 'libtpu>=0.0.50'"),
        ),
        (Some(v), Some(l)) if numbers(l).as_slice() < [0, 0, 50].as_slice() => check(
            "DOC004",
            "torch_tpu",
            Status::Fail,
            format!("torch_tpu {v} with libtpu {l}: torch_tpu 0.2.0 requires libtpu>=0.0.50"),
            Some("pip install -U 'libtpu>=0.0.50'"),
        ),
        (Some(v), Some(l)) => check(
            "DOC004",
            "torch_tpu",
            Status::Ok,
            format!("torch_tpu {v}, libtpu {l}"),
            None,
        ),
    }
}

fn tpu_present(tpus: &[TpuDevice]) -> Check {
    if tpus.is_empty() {
        return check(
            "DOC005",
            "tpu",
            Status::Skip,
            "no TPU attached (PCI vendor 0x1ae0 with a VFIO group): `tpuport run` uses xla-cpu where it is ready (DOC010), else the sim target",
            None,
        );
    }
    let chips: Vec<String> = tpus
        .iter()
        .map(|t| format!("{} at {}", t.chip.device_name, t.pci_address))
        .collect();
    check(
        "DOC005",
        "tpu",
        Status::Ok,
        format!("{} TPU device(s): {}", tpus.len(), chips.join(", ")),
        None,
    )
}

/// Whether the xla-cpu target (TorchTPU itself on XLA:CPU) can serve this environment, which
/// `tpuport run` then uses where no TPU is attached.
fn xla_cpu_ready(m: &Machine, py: Option<&Environment>, tpus: &[TpuDevice]) -> Check {
    if !tpus.is_empty() {
        return check(
            "DOC010",
            "xla-cpu",
            Status::Skip,
            "a TPU is attached: runs go to it",
            None,
        );
    }
    let Some(py) = py else {
        return check(
            "DOC010",
            "xla-cpu",
            Status::Skip,
            "no Python environment",
            None,
        );
    };
    let v = numbers(&py.version);
    let mm = format!(
        "{}.{}",
        v.first().copied().unwrap_or(0),
        v.get(1).copied().unwrap_or(0)
    );
    match super::xla_cpu::usable(
        m.xla_cpu.as_deref(),
        &mm,
        &py.python,
        &py.site_packages,
        m.platform,
    ) {
        Ok(x) => check(
            "DOC010",
            "xla-cpu",
            Status::Ok,
            format!(
                "TorchTPU {} on XLA:CPU ({} {}, PJRT API {}) at {}: `tpuport run` uses it",
                x.manifest.torch_tpu,
                x.manifest.plugin.dist,
                x.manifest.plugin.version,
                x.manifest.plugin.pjrt_api,
                x.root.display()
            ),
            None,
        ),
        Err(why) if m.platform != ("linux", "x86_64") => {
            check("DOC010", "xla-cpu", Status::Skip, why, None)
        }
        Err(why) => check(
            "DOC010",
            "xla-cpu",
            Status::Warn,
            format!("{why}: `tpuport run` uses the sim target"),
            Some("bash scripts/bootstrap-xla-cpu (from a tpuport checkout; cached)"),
        ),
    }
}

/// Processes holding a TPU's VFIO group or libtpu's lock file open: (pid, command, what).
pub fn holders(m: &Machine, tpus: &[TpuDevice]) -> Vec<(u32, String, String)> {
    let lock = m.tmp.join("libtpu_lockfile");
    let groups: Vec<PathBuf> = tpus
        .iter()
        .map(|t| Path::new("/dev/vfio").join(&t.iommu_group))
        .collect();
    let mut out = vec![];
    let Ok(procs) = std::fs::read_dir(&m.proc) else {
        return out;
    };
    for p in procs.filter_map(|e| e.ok()) {
        let Ok(pid) = p.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(|e| e.ok()) {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            if target == lock || groups.contains(&target) {
                let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                out.push((pid, comm.trim().to_string(), target.display().to_string()));
                break;
            }
        }
    }
    out.sort();
    out
}

fn tpu_free(m: &Machine, tpus: &[TpuDevice]) -> Check {
    if tpus.is_empty() {
        return check("DOC006", "tpu free", Status::Skip, "no TPU attached", None);
    }
    let held = holders(m, tpus);
    if !held.is_empty() {
        let who: Vec<String> = held
            .iter()
            .map(|(pid, comm, what)| format!("pid {pid} ({comm}) holds {what}"))
            .collect();
        return check(
            "DOC006",
            "tpu free",
            Status::Fail,
            format!(
                "the TPU is in use: {} (one process per device)",
                who.join("; ")
            ),
            Some("stop that process (or wait for it); each TPU device serves one process"),
        );
    }
    if m.tmp.join("libtpu_lockfile").exists() {
        return check(
            "DOC006",
            "tpu free",
            Status::Warn,
            "libtpu's lock file is there but no process holds it (left by a run that died)",
            Some("sudo rm /tmp/libtpu_lockfile"),
        );
    }
    check(
        "DOC006",
        "tpu free",
        Status::Ok,
        "no other process holds the TPU",
        None,
    )
}

/// Variables TorchTPU 0.2.0 ignores, or that keep a workaround on.
const VARIABLES: &[(&str, &str, &str)] = &[
    (
        "PJRT_DEVICE",
        "PyTorch/XLA's device switch: TorchTPU ignores it",
        "unset PJRT_DEVICE",
    ),
    (
        "TPU_LAUNCH_BLOCKING",
        "named in TorchTPU's docs, but 0.2.0 ignores it",
        "use TORCH_TPU_LAUNCH_BLOCKING=1 (or tpuport run --mode debug)",
    ),
    (
        "TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS",
        "keeps the internal torch.tpu.* device calls working with a warning; they may go without notice",
        "port them to torch.accelerator.* (tpuport migrate finds them), then unset it",
    ),
    (
        "XLA_USE_BF16",
        "PyTorch/XLA's bf16 switch: TorchTPU ignores it",
        "use torch.autocast(\"tpu\", dtype=torch.bfloat16), then unset it",
    ),
    (
        "XLA_DOWNCAST_BF16",
        "PyTorch/XLA's bf16 switch: TorchTPU ignores it",
        "use torch.autocast(\"tpu\", dtype=torch.bfloat16), then unset it",
    ),
];

fn variables(m: &Machine) -> Vec<Check> {
    let found: Vec<Check> = VARIABLES
        .iter()
        .filter(|(name, ..)| m.vars.get(*name).is_some_and(|v| !v.is_empty()))
        .map(|(name, why, fix)| {
            check(
                "DOC007",
                "variables",
                Status::Warn,
                format!("{name}={}: {why}", m.vars[*name]),
                Some(fix),
            )
        })
        .collect();
    if found.is_empty() {
        vec![check(
            "DOC007",
            "variables",
            Status::Ok,
            "no obsolete or ignored TPU variables set",
            None,
        )]
    } else {
        found
    }
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".tpuport-doctor-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

fn compile_cache(m: &Machine) -> Check {
    let tier3 = m
        .vars
        .get("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT")
        .filter(|v| !v.is_empty());
    let tier2 = m
        .vars
        .get("TORCH_TPU_TIER2_COMPILATION_CACHE")
        .filter(|v| !v.is_empty());
    if let Some(root) = tier3
        && !root.starts_with("gs://")
    {
        let p = Path::new(root);
        if !p.is_dir() || !writable(p) {
            return check(
                "DOC008",
                "compile cache",
                Status::Fail,
                format!("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT={root} is not a writable folder"),
                Some(&format!(
                    "mkdir -p {root} (or point it at a writable folder or gs:// bucket)"
                )),
            );
        }
    }
    if tier2.is_some() && !writable(&m.shm) {
        return check(
            "DOC008",
            "compile cache",
            Status::Fail,
            format!(
                "TORCH_TPU_TIER2_COMPILATION_CACHE is set but {} is not writable",
                m.shm.display()
            ),
            Some(
                "the tier-2 cache lives under /dev/shm/torch_tpu_cache/: make /dev/shm writable, or unset it",
            ),
        );
    }
    match (tier3, tier2) {
        (None, None) => check(
            "DOC008",
            "compile cache",
            Status::Warn,
            "no compilation cache: every run compiles its graphs again",
            Some(
                "export TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT=$HOME/.cache/torch_tpu (or tpuport run --cache-dir)",
            ),
        ),
        _ => check(
            "DOC008",
            "compile cache",
            Status::Ok,
            format!(
                "tier-3: {}, tier-2: {}",
                tier3.map(String::as_str).unwrap_or("off"),
                tier2.map(String::as_str).unwrap_or("off")
            ),
            None,
        ),
    }
}

fn metadata_hang(m: &Machine, torch_tpu: Option<&str>, tpus: &[TpuDevice]) -> Check {
    let set = |k: &str, v: &str| m.vars.get(k).is_some_and(|x| x == v);
    if torch_tpu.is_none() || !tpus.is_empty() {
        return check(
            "DOC009",
            "no-TPU start-up",
            Status::Skip,
            "torch_tpu absent, or a TPU attached",
            None,
        );
    }
    if set("TORCH_DEVICE_BACKEND_AUTOLOAD", "0") || set("TPU_SKIP_MDS_QUERY", "1") {
        return check(
            "DOC009",
            "no-TPU start-up",
            Status::Ok,
            "torch_tpu is installed without a TPU, and its start-up is switched off",
            None,
        );
    }
    check(
        "DOC009",
        "no-TPU start-up",
        Status::Warn,
        "torch_tpu is installed but no TPU is attached: `import torch` loads TorchTPU, which retries cloud metadata for about 10 minutes and then aborts (tpuport run sets the variables itself)",
        Some("export TORCH_DEVICE_BACKEND_AUTOLOAD=0 TPU_SKIP_MDS_QUERY=1"),
    )
}

/// The text report: one line per check, the fix under it.
pub fn render(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        let mark = match c.status {
            Status::Ok => "ok  ",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        s += &format!("{mark} {} {:<16} {}\n", c.id, c.name, c.detail);
        if let Some(f) = &c.fix {
            s += &format!("          fix: {f}\n");
        }
    }
    let fails = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warns = checks.iter().filter(|c| c.status == Status::Warn).count();
    s += &format!("tpuport doctor: {fails} failed, {warns} warnings\n");
    s
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
