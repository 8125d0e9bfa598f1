//! `tpuport run --nproc N`: one process per TPU device, as TorchTPU runs. The job goes through the
//! real `torchrun` of the script's environment (`--no-python`), every worker being `tpuport run`
//! itself (instrumented, `--no-tui`), each writing `rank<RANK>.jsonl` in one run folder; torchrun
//! owns the workers (rendezvous, Ctrl-C, a crashed rank ends the job), tpuport waits and then
//! sums the ranks up side by side (`profile::ranks`): who died and how, and the straggler.
//! While the job runs, an observer the command line chooses (the dashboard over the run folder)
//! may show it; then torchrun's own output goes to `torchrun.log` in the run folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};

use super::detect::scan_tpus;
use super::interpreter;
use crate::profile::ranks;

/// The placeholder a worker's `--events` path carries; each rank puts its `RANK` there.
pub const RANK_PLACEHOLDER: &str = "{rank}";

pub struct RanksOptions {
    pub nproc: u32,
    pub nnodes: u32,
    pub node_rank: u32,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    /// The run folder (default `runs/<UTC time>-<script>-nproc<N>/`).
    pub dir: Option<PathBuf>,
    pub script: PathBuf,
    pub python: Option<PathBuf>,
    /// `tpuport run`'s arguments for each worker, without `--nproc`/`--events` and the
    /// multi-host flags (`--no-tui` and the events path are added here).
    pub worker_args: Vec<String>,
    /// On the tpu target, export TorchTPU's topology for N local devices when unset.
    pub tpu_target: bool,
    /// The target asked for is the default or xla-cpu: where xla-cpu would serve, several ranks
    /// go to the sim instead, and the job says so (not for `--target host`/`sim`, nor one rank).
    pub may_use_xla_cpu: bool,
    /// What shows the job while it runs, made once the run folder exists (None: torchrun's
    /// output on the terminal, the table at the end).
    pub observer: Option<ObserverStart>,
}

/// Starts the observer of a job, given its run folder.
pub type ObserverStart = Box<dyn FnOnce(&Path) -> Result<Box<dyn RanksObserver>>>;

/// Shows a multi-process job while it runs (the runtime never imports the dashboard: the
/// command line chooses and hands one in).
pub trait RanksObserver {
    /// Called about every 100 ms while the job runs (it may wait that long); true asks to
    /// interrupt the job (as Ctrl-C would).
    fn tick(&mut self) -> Result<bool>;
    /// The job has ended: show the end until the user leaves, or `stop` says so.
    fn finish(&mut self, stop: &dyn Fn() -> bool) -> Result<()>;
}

/// `--events` with `{rank}` replaced by this process's `RANK` (torchrun sets it; else 0).
pub fn events_for_rank(path: &Path, rank: Option<&str>) -> PathBuf {
    let s = path.to_string_lossy();
    if !s.contains(RANK_PLACEHOLDER) {
        return path.to_path_buf();
    }
    PathBuf::from(s.replace(RANK_PLACEHOLDER, rank.unwrap_or("0")))
}

/// torchrun next to the environment's python, else `python -m torch.distributed.run`.
fn torchrun(python: &Path) -> (PathBuf, Vec<String>) {
    let beside = python.with_file_name("torchrun");
    if beside.is_file() {
        (beside, vec![])
    } else {
        (
            python.to_path_buf(),
            vec!["-m".into(), "torch.distributed.run".into()],
        )
    }
}

pub fn run(opts: RanksOptions) -> Result<i32> {
    if opts.nproc == 0 {
        bail!("--nproc must be at least 1");
    }
    let env = interpreter::find(opts.python.as_deref())?;
    if !env.finds_module("torch") {
        bail!(
            "--nproc starts the ranks with torchrun, which comes with torch, and torch is not installed in {}; install it there (`{} -m pip install torch`), or point --python (or $VIRTUAL_ENV) at the venv you train in",
            env.describe(),
            env.python.display()
        );
    }
    let dir = opts.dir.clone().unwrap_or_else(|| {
        let stem = opts
            .script
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "run".into());
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("runs").join(format!(
            "{}-{stem}-nproc{}",
            super::launcher::utc_stamp(secs),
            opts.nproc
        ))
    });
    if let Err(e) = std::fs::create_dir_all(&dir) {
        bail!(
            "cannot create the run folder {} ({}); choose another with --events DIR",
            dir.display(),
            crate::profile::report::folder_error(&dir, &e)
        );
    }
    let (program, mut args) = torchrun(&env.python);
    args.push(format!("--nproc-per-node={}", opts.nproc));
    if opts.nnodes > 1 {
        args.push(format!("--nnodes={}", opts.nnodes));
        args.push(format!("--node-rank={}", opts.node_rank));
        if let Some(a) = &opts.master_addr {
            args.push(format!("--master-addr={a}"));
        }
        if let Some(p) = opts.master_port {
            args.push(format!("--master-port={p}"));
        }
    } else {
        args.push("--standalone".into());
    }
    args.push("--no-python".into());
    args.push(
        std::env::current_exe()
            .context("cannot find the tpuport binary")?
            .display()
            .to_string(),
    );
    args.push("run".into());
    args.push("--no-tui".into());
    args.push("--events".into());
    args.push(
        dir.join(format!("rank{RANK_PLACEHOLDER}.jsonl"))
            .display()
            .to_string(),
    );
    args.extend(opts.worker_args.iter().cloned());
    let mut cmd = Command::new(&program);
    cmd.args(&args);
    if let Some(v) = &env.venv {
        cmd.env("VIRTUAL_ENV", v);
    }
    if opts.tpu_target && std::env::var_os("TORCH_TPU_TOPOLOGY").is_none() {
        let tpus = scan_tpus(Path::new("/sys"), Path::new("/dev"));
        if let Some(t) = tpus.first().and_then(|t| {
            t.chip
                .topologies
                .iter()
                .find(|(n, _)| *n == opts.nproc)
                .map(|(_, topo)| *topo)
        }) {
            cmd.env("TORCH_TPU_TOPOLOGY", t);
        }
    }
    if opts.may_use_xla_cpu
        && opts.nproc * opts.nnodes > 1
        && scan_tpus(Path::new("/sys"), Path::new("/dev")).is_empty()
        && super::xla_cpu::for_env(&env, super::xla_cpu::this_platform()).is_ok()
    {
        eprintln!(
            "tpuport: the ranks run on the sim: xla-cpu runs one process (TorchTPU's tpu_dist needs one PJRT client with a global view, which no CPU PJRT plugin offers)"
        );
    }
    eprintln!(
        "tpuport: {} rank{} through {} (events: {}/rank<N>.jsonl)",
        opts.nproc,
        if opts.nproc == 1 { "" } else { "s" },
        program.display(),
        dir.display()
    );
    // Ctrl-C reaches torchrun too (same process group), which stops its workers; tpuport only
    // counts it, waits for the job, and sums it up.
    let interrupts = Arc::new(AtomicUsize::new(0));
    let mut ids = vec![];
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let c = Arc::clone(&interrupts);
        if let Ok(id) = unsafe {
            signal_hook::low_level::register(sig, move || {
                c.fetch_add(1, Ordering::SeqCst);
            })
        } {
            ids.push(id);
        }
    }
    let status = match opts.observer {
        None => cmd
            .status()
            .with_context(|| format!("cannot start {}", program.display()))?,
        Some(start) => {
            let log = dir.join("torchrun.log");
            let out = std::fs::File::create(&log)
                .with_context(|| format!("cannot create {}", log.display()))?;
            cmd.stdin(std::process::Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out);
            let mut child = cmd
                .spawn()
                .with_context(|| format!("cannot start {}", program.display()))?;
            let mut observer = match start(&dir) {
                Ok(o) => o,
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e);
                }
            };
            let pid = child.id() as libc::pid_t;
            let (mut asked, mut seen) = (0, 0);
            let status = loop {
                if let Some(st) = child.try_wait()? {
                    break st;
                }
                // Ctrl-C in the dashboard (a key in raw mode), or a signal to tpuport: torchrun
                // gets SIGINT and stops its workers; asked again, SIGKILL.
                let signals = interrupts.load(Ordering::SeqCst);
                let wants = observer.tick().unwrap_or(true) as usize + (signals - seen);
                seen = signals;
                if wants > 0 {
                    asked += wants;
                    let sig = if asked > 1 {
                        libc::SIGKILL
                    } else {
                        libc::SIGINT
                    };
                    unsafe { libc::kill(pid, sig) };
                }
            };
            let stop = || interrupts.load(Ordering::SeqCst) > 0;
            observer.finish(&stop)?;
            drop(observer);
            eprintln!("torchrun's output: {}", log.display());
            status
        }
    };
    for id in ids {
        signal_hook::low_level::unregister(id);
    }
    let rows = ranks::read_folder(&dir)?;
    eprintln!();
    eprint!("{}", ranks::render(&rows));
    if interrupts.load(Ordering::SeqCst) > 0 {
        eprintln!("tpuport: interrupted");
    }
    let code = status.code().unwrap_or(1);
    eprintln!(
        "tpuport run --nproc {}: torchrun exited with {code}; dashboard: tpuport top {}",
        opts.nproc,
        dir.display()
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_events_path_takes_its_rank() {
        assert_eq!(
            events_for_rank(Path::new("runs/x/rank{rank}.jsonl"), Some("3")),
            PathBuf::from("runs/x/rank3.jsonl")
        );
        assert_eq!(
            events_for_rank(Path::new("runs/x/rank{rank}.jsonl"), None),
            PathBuf::from("runs/x/rank0.jsonl")
        );
        assert_eq!(
            events_for_rank(Path::new("runs/a.jsonl"), Some("3")),
            PathBuf::from("runs/a.jsonl")
        );
    }
}
