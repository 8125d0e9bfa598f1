//! `tpuport run`: run a (ported) script under a chosen target, eager mode and precision, and
//! stream what happens in it as events.
//!
//! The parent ([`launcher`]) has no Python in it, and `tpuport` links no libpython; it spawns a
//! child: `tpuport-worker` (the `worker/` crate), which embeds the environment's CPython, or
//! `<python> -m tpuport_agent` where no worker fits ([`worker`] chooses; [`interpreter`] finds
//! the environment). Either way
//! the child runs the agent (the Python package in `src/runtime/agent/`, shipped inside the
//! binary and written to a cache folder), which runs the script as `__main__` and writes events
//! to a pipe. [`detect`] looks for a TPU, [`target`] decides where the script runs and how
//! TorchTPU is configured, and the agent is told all of it in an [`AgentConfig`] ([`config`]),
//! with the chip's record from the one chip table ([`chips`]).

pub mod chips;
pub mod config;
pub mod deploy;
pub mod detect;
pub mod dists;
pub mod doctor;
pub mod interpreter;
pub mod launcher;
pub mod numerics;
pub mod ranks;
pub mod target;
pub mod tune;
pub mod watch;
pub mod worker;
pub mod xla_cpu;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::profile::event::{RunStart, SCHEMA_VERSION};
use config::{AgentConfig, HbmTrack, NumericsSpec};
use deploy::deploy_agent;
use interpreter::Runtime;
use target::{Precision, Request, Target};

pub struct RunOptions {
    /// The script (with `module`: the module's name, for display and the events file name).
    pub script: PathBuf,
    /// Run this module as `python -m` does instead of a script file.
    pub module: Option<String>,
    pub args: Vec<String>,
    pub request: Request,
    pub python: Option<PathBuf>,
    pub events: Option<PathBuf>,
    pub timeout: Option<Duration>,
    /// What shows the run as it goes: step lines, or (chosen by the command line) a dashboard.
    pub observer: launcher::ObserverChoice,
    /// Force the `python -m tpuport_agent` runtime even where embedding would work.
    pub subprocess: bool,
    pub sim: SimOptions,
    /// `tpuport numerics`: which of its two runs this is.
    pub numerics: Option<NumericsSpec>,
    /// Stop the script (exit 0) once this many training steps have ended.
    pub max_steps: Option<u32>,
    /// Host target: run the script's CUDA devices on the CPU where torch sees no CUDA.
    pub cuda_on_cpu: bool,
    /// `tpuport check`: which of its two runs this is.
    pub check: Option<config::CheckSpec>,
    /// Time each step's phases (data, forward, backward, optimizer, syncs).
    pub breakdown: bool,
}

/// Options that only the sim target reads.
#[derive(Clone, Debug, Default)]
pub struct SimOptions {
    /// Raise torch.OutOfMemoryError past the simulated HBM.
    pub strict_hbm: bool,
    pub hbm_track: HbmTrack,
    /// HBM per device instead of the chip's.
    pub hbm_bytes: Option<u64>,
}

pub fn run(opts: RunOptions) -> Result<i32> {
    if opts.module.is_none() && !opts.script.is_file() {
        bail!(
            "{}: no such script; pass the path of a Python file (and its arguments after `--`)",
            opts.script.display()
        );
    }
    let (env, plan) = resolve(&opts.request, opts.python.as_deref())?;
    let (mut runtime, worker, why) = worker::choose(&env);
    let mut notes = plan.notes.clone();
    // Which target and why, where it was not asked for (not where torch is missing: that note
    // says what matters then).
    let has_torch = installed_version(&env.site_packages, "torch").is_some();
    if has_torch
        && (opts.request.target == target::TargetRequest::Auto
            || opts.request.target == target::TargetRequest::XlaCpu
                && plan.target != Target::XlaCpu)
    {
        notes.insert(
            0,
            format!(
                "running on the {} target ({})",
                plan.target.as_str(),
                plan.reason
            ),
        );
    }
    if let Some(w) = why {
        notes.push(w);
    }
    // Said before the run: without torch, a script that imports it stops at its first line.
    let torch_hint = format!(
        "torch is not installed in {}; install it there (`{} -m pip install torch`), or point --python (or $VIRTUAL_ENV) at the venv you train in",
        env.describe(),
        env.python.display()
    );
    if !env.finds_module("torch") {
        notes.push(format!(
            "{torch_hint}. A script that imports torch will fail; one that does not runs as usual"
        ));
    }
    if opts.subprocess {
        runtime = Runtime::Subprocess;
    }
    let agent_dir = deploy_agent()?;
    let t0 = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let script = match &opts.module {
        Some(_) => opts.script.clone(),
        None => std::fs::canonicalize(&opts.script).unwrap_or_else(|_| opts.script.clone()),
    };
    let precision = opts.request.precision.unwrap_or(Precision::Default);
    let agent_config = AgentConfig {
        script,
        module: opts.module.clone(),
        args: opts.args.clone(),
        target: plan.target,
        mode: opts.request.mode,
        precision,
        excess_precision: opts.request.excess_precision,
        debug_checks: opts.request.debug_checks,
        cpu_fallback: opts.request.cpu_fallback,
        chip: plan.chip,
        hbm_bytes: opts.sim.hbm_bytes.or(plan.chip.map(|c| c.hbm_per_device)),
        strict_hbm: opts.sim.strict_hbm,
        hbm_track: opts.sim.hbm_track,
        numerics: opts.numerics.clone(),
        max_steps: opts.max_steps,
        cuda_on_cpu: opts.cuda_on_cpu,
        check: opts.check.clone(),
        breakdown: opts.breakdown,
        calls: plan.calls.clone(),
        python_path: plan.python_path.clone(),
        t0,
    };
    let mut env_vars = plan.env.clone();
    env_vars.insert(
        config::ENV_VAR.into(),
        Some(
            agent_config
                .to_json()
                .context("cannot encode the agent's configuration")?,
        ),
    );
    env_vars.insert(
        "TPUPORT_EVENTS_FD".into(),
        Some(launcher::EVENTS_FD.to_string()),
    );
    env_vars.insert("PYTHONUNBUFFERED".into(), Some("1".into()));
    if (opts.check.is_some() || opts.numerics.is_some())
        && std::env::var_os("PYTHONHASHSEED").is_none()
    {
        // Runs compared step by step get the same seeds (the agent seeds torch, `random` and
        // numpy); Python's string hashes are seeded at start-up, so iterating a set of names
        // (`list({f.stem for f in root.iterdir()})`: a dataset's label order) differs between
        // two runs of one program unless its hash seed is fixed.
        env_vars.insert("PYTHONHASHSEED".into(), Some("0".into()));
    }
    if plan.target == Target::XlaCpu
        && std::env::var_os("RANK").is_some()
        && std::env::var_os("TORCH_TPU_TOPOLOGY").is_none()
    {
        // A rank of a one-process job (torchrun --nproc 1; more go to the sim): TorchTPU then
        // wants the slice's launch environment, which `set_tpu_launch_env` gives a one-chip
        // host (else `missing required environment variables for distributed training:
        // TORCH_TPU_SLICEBUILDER_ADDRESSES, TORCH_TPU_TOPOLOGY` at the first op).
        let port = std::env::var("MASTER_PORT")
            .ok()
            .and_then(|p| p.parse::<u16>().ok())
            .map_or(8470, |p| p.wrapping_add(1).max(1024));
        env_vars.insert("TORCH_TPU_TOPOLOGY".into(), Some("1,1,1".into()));
        env_vars.insert(
            "TORCH_TPU_SLICEBUILDER_ADDRESSES".into(),
            Some(format!("localhost:{port}")),
        );
    }
    let (program, args) = match runtime {
        Runtime::Embedded => {
            env_vars.insert(
                "TPUPORT_PYTHON".into(),
                Some(env.python.display().to_string()),
            );
            env_vars.insert(
                "TPUPORT_AGENT_DIR".into(),
                Some(agent_dir.display().to_string()),
            );
            let worker = worker.context("the embedded runtime without a worker")?;
            env_vars.insert("LD_LIBRARY_PATH".into(), Some(worker.ld_library_path()));
            (worker.exe, vec![])
        }
        Runtime::Subprocess => {
            let mut pp = agent_dir.display().to_string();
            if let Some(old) = std::env::var_os("PYTHONPATH").filter(|o| !o.is_empty()) {
                pp = format!("{pp}:{}", old.to_string_lossy());
            }
            env_vars.insert("PYTHONPATH".into(), Some(pp));
            (
                env.python.clone(),
                vec!["-m".to_string(), "tpuport_agent".to_string()],
            )
        }
    };
    if let Some(v) = &env.venv {
        env_vars.insert("VIRTUAL_ENV".into(), Some(v.display().to_string()));
    }
    let run_start = RunStart {
        t: 0.0,
        schema: SCHEMA_VERSION,
        unix_time: t0,
        script: opts.script.display().to_string(),
        argv: opts.args.clone(),
        target: plan.target.as_str().into(),
        target_reason: plan.reason.clone(),
        chip: plan.chip.map(|c| c.name.to_string()),
        mode: if plan.target == Target::Host {
            "n/a".into()
        } else {
            opts.request.mode.as_str().into()
        },
        precision: precision.as_str().into(),
        hbm_bytes: plan.chip.map(|c| c.hbm_per_device),
        pid: 0,
        runtime: runtime.as_str().into(),
        python: Some(env.version.clone()),
        torch: installed_version(&env.site_packages, "torch"),
        extra: Default::default(),
    };
    let events_path = match &opts.events {
        Some(p) => ranks::events_for_rank(p, std::env::var("RANK").ok().as_deref()),
        None => launcher::default_events_path(&opts.script),
    };
    launcher::launch(launcher::Launch {
        program,
        args,
        env: env_vars,
        events_path,
        run_start,
        timeout: opts.timeout,
        observer: opts.observer,
        notes,
        torch_hint: Some(torch_hint),
    })
}

/// Where a run with `request` goes and how: the Python environment, the plan (target, reason,
/// environment, calls). Reads files only (PCI, site-packages, the xla-cpu install); starts
/// nothing.
pub fn resolve(
    request: &Request,
    python: Option<&Path>,
) -> Result<(interpreter::PythonEnv, target::Plan)> {
    let env = interpreter::find(python)?;
    let tpus = detect::scan_tpus(Path::new("/sys"), Path::new("/dev"));
    let installed = detect::torch_tpu_installed(&env.site_packages);
    let xla = xla_cpu::for_env(&env, xla_cpu::this_platform());
    let plan = target::plan(
        request,
        &target::Machine {
            tpus: &tpus,
            torch_tpu_installed: installed,
            xla_cpu: &xla,
            world_size: world_size(),
        },
    )?;
    Ok((env, plan))
}

/// `WORLD_SIZE` of the environment (1 when unset or unreadable): this run is one rank of that
/// many.
pub fn world_size() -> u32 {
    std::env::var("WORLD_SIZE")
        .ok()
        .and_then(|w| w.trim().parse().ok())
        .filter(|&w| w > 0)
        .unwrap_or(1)
}

/// The version of a distribution from its `*.dist-info` folder name (no import).
pub fn installed_version(site_packages: &[PathBuf], dist: &str) -> Option<String> {
    dists::dist_version(site_packages, dist)
}
