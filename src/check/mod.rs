//! `tpuport check SCRIPT`: is this training script ready for a TPU? One command, the user's files
//! untouched: it migrates a copy of the script's folder and makes three runs, same seeds, same
//! arguments, N steps each: the original as written on the host (its CUDA on the CPU where there
//! is none), the port there too (it must compute the original's losses bit for bit: a port keeps
//! the machine it came from), and the port where `tpuport run` would run it (a TPU; else
//! TorchTPU on XLA:CPU where installed; else the sim). It compares them step by step and layer by
//! layer and answers per section: original machine, port, run, numerics, ops, compiles and syncs,
//! fit (ready / needs work / blocked), in the terminal, as JSON, and as a Markdown and HTML report
//! with charts.

pub mod charts;
pub mod compare;
pub mod facts;
pub mod fit;
pub mod original;
pub mod port;
pub mod report;
pub mod verdict;
pub mod workspace;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::runtime::config::{CheckSpec, HbmTrack, LayersSpec};
use crate::runtime::launcher::{ObserverChoice, Quiet, RunObserver};
use crate::runtime::target::{Mode, Request, TargetRequest};
use crate::runtime::{RunOptions, SimOptions};
use facts::RunFacts;
use verdict::{Checked, RunNumbers, Verdict};

/// Exit statuses of `tpuport check`.
pub const EXIT_READY: i32 = 0;
pub const EXIT_NEEDS_WORK: i32 = 1;
pub const EXIT_COULD_NOT_CHECK: i32 = 2;

pub struct CheckOptions {
    pub script: PathBuf,
    pub args: Vec<String>,
    /// Training steps per run.
    pub steps: u32,
    /// The report folder (kept: copies, events, report.md/html/json).
    pub out: Option<PathBuf>,
    pub python: Option<PathBuf>,
    pub json: bool,
    /// Relative tolerance for losses and layer outputs.
    pub rtol: f64,
    /// Seconds each run may take.
    pub timeout: Option<std::time::Duration>,
    /// Where the port runs (auto: as `tpuport run` would).
    pub target: TargetRequest,
}

pub fn check(opts: CheckOptions) -> Result<i32> {
    if opts.steps == 0 {
        bail!("--steps must be at least 1");
    }
    let (folder, name) = workspace::script_folder(&opts.script)?;
    let tmp;
    let out = match &opts.out {
        Some(o) => {
            crate::profile::report::writable_folder(o, "report folder", "-o")?;
            std::fs::canonicalize(o)?
        }
        None => {
            tmp = tempfile::tempdir().context("cannot create a temporary folder")?;
            tmp.path().to_path_buf()
        }
    };
    let work = out.join("work");
    let _ = std::fs::remove_dir_all(&work);
    let (original_dir, port_dir) = (work.join("original"), work.join("port"));
    // The port's run on the host gets a copy of its own: files a run writes (checkpoints, logs,
    // downloads) must not reach the run on the TPU target.
    let port_host_dir = work.join("port-host");
    let say = |m: &str| {
        if !opts.json {
            eprintln!("tpuport check: {m}");
        }
    };
    say(&format!(
        "copying {} (the user's files stay as they are)",
        folder.display()
    ));
    for d in [&original_dir, &port_dir] {
        workspace::copy_tree(&folder, d, std::slice::from_ref(&out)).with_context(|| {
            format!(
                "cannot copy {} into {} (free some space there, or choose another folder with -o)",
                folder.display(),
                d.display()
            )
        })?;
    }
    let tpuport = std::env::current_exe().context("cannot find the tpuport binary")?;
    let config = crate::port::config::discover(None, false, std::slice::from_ref(&opts.script))?
        .map(|c| c.path.clone());
    say("porting the copy (tpuport migrate --write)");
    let port = port::migrate(&tpuport, &port_dir, config.as_ref())?;
    workspace::copy_tree(&port_dir, &port_host_dir, &[])?;

    let layers_saved = out.join("layers-original.pt");
    let layers_json = out.join("layers.json");
    let (original_events, port_events) = (out.join("original.jsonl"), out.join("port.jsonl"));
    let port_host_events = out.join("port-host.jsonl");
    say(&format!(
        "running the original on the host ({} steps)",
        opts.steps
    ));
    let host = one_run(
        &opts,
        original_dir.join(&name),
        &original_events,
        Request {
            target: TargetRequest::Host,
            ..Request::default()
        },
        LayersSpec {
            save: Some(layers_saved.clone()),
            ..LayersSpec::default()
        },
    );
    in_folder(&original_dir, || crate::runtime::run(host))?;
    let original = RunFacts::read(&original_events)?;
    skipped_note(&original.skipped, &original_events);
    if !original.ok() {
        let why = match &original.exception {
            Some(e) => format!("{}: {}", e.kind, e.message.lines().next().unwrap_or("")),
            None => format!(
                "exit {}, {} steps",
                original.exit_code, original.summary.steps
            ),
        };
        let at = original
            .failing_line(&original_dir)
            .map(|l| format!(" at {l}"))
            .unwrap_or_default();
        eprintln!(
            "tpuport check: could not check {}: the original failed on the host{at} ({why}); fix it so that `python {}` runs, then check again (events: {})",
            opts.script.display(),
            name.display(),
            original_events.display()
        );
        return Ok(EXIT_COULD_NOT_CHECK);
    }
    say(&format!(
        "running the port on the host too, where the original ran ({} steps)",
        opts.steps
    ));
    let on_host = one_run(
        &opts,
        port_host_dir.join(&name),
        &port_host_events,
        Request {
            target: TargetRequest::Host,
            ..Request::default()
        },
        LayersSpec::default(),
    );
    in_folder(&port_host_dir, || crate::runtime::run(on_host))?;
    let on_host = RunFacts::read(&port_host_events)?;
    let machine = original::compare(&original, &on_host, &original_dir, &port_host_dir);
    say(&format!(
        "running the port on {} ({} steps)",
        port_target_words(opts.target, opts.python.as_deref()),
        opts.steps
    ));
    let mut sim = one_run(
        &opts,
        port_dir.join(&name),
        &port_events,
        Request {
            target: opts.target,
            mode: Mode::Strict,
            cpu_fallback: true,
            ..Request::default()
        },
        LayersSpec {
            compare: Some(layers_saved.clone()),
            out: Some(layers_json.clone()),
            ..LayersSpec::default()
        },
    );
    sim.sim.hbm_track = HbmTrack::Full; // exact peaks for the fit
    in_folder(&port_dir, || crate::runtime::run(sim))?;
    let mut ported = RunFacts::read(&port_events)?;
    skipped_note(&ported.skipped, &port_events);
    ported.relative_to(&port_dir);

    let layers = if layers_json.is_file() {
        compare::read_layers(&layers_json)?
    } else {
        compare::Layers::default()
    };
    let runs = Runs {
        original: &original,
        on_host: &on_host,
        ported: &ported,
        port_dir: &port_dir,
    };
    let checked = assemble(&opts, &port, runs, machine, layers);
    report::write(&out, &checked, &port, opts.out.is_some())?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&checked)?);
    } else {
        print!("{}", report::text(&checked, opts.out.as_deref()));
    }
    Ok(match checked.verdict {
        Verdict::Ready => EXIT_READY,
        _ => EXIT_NEEDS_WORK,
    })
}

/// The three runs' facts: the original on the host, the port there, the port on the TPU target
/// (run in `port_dir`).
#[derive(Clone, Copy)]
pub struct Runs<'a> {
    pub original: &'a RunFacts,
    pub on_host: &'a RunFacts,
    pub ported: &'a RunFacts,
    pub port_dir: &'a Path,
}

/// The whole answer, from the port's findings, the three runs' facts and the port on the
/// original's machine against the original.
pub fn assemble(
    opts: &CheckOptions,
    port: &port::Port,
    runs: Runs,
    machine: original::OriginalMachine,
    layers: compare::Layers,
) -> Checked {
    let Runs {
        original,
        on_host,
        ported,
        port_dir,
    } = runs;
    let losses = compare::loss_table(&original.losses, &ported.losses);
    let (mut numerics, parting, diverging) = verdict::numerics_section(&losses, &layers, opts.rtol);
    if ported.summary.run_start.as_ref().map(|s| s.target.as_str()) == Some("xla-cpu") {
        numerics
            .items
            .push(crate::runtime::numerics::XLA_CPU_PRECISION.to_string());
    }
    let fit = fit::fit(
        ported.summary.peak_device.unwrap_or(0),
        ported.resident,
        ported.samples,
    );
    let ran = ported.summary.steps > 0;
    let sections = vec![
        verdict::original_machine_section(&machine),
        verdict::port_section(port),
        verdict::run_section(ported, ported.failing_line(port_dir), opts.steps),
        numerics,
        verdict::ops_section(&ported.fallback_ops),
        if ran {
            verdict::compiles_section(ported)
        } else {
            verdict::not_measured("compiles and syncs")
        },
        if ran {
            verdict::fit_section(&fit)
        } else {
            verdict::not_measured("fit")
        },
    ];
    let overall = sections
        .iter()
        .map(|s| s.verdict)
        .max()
        .unwrap_or(Verdict::Ready);
    Checked {
        script: opts.script.display().to_string(),
        args: opts.args.clone(),
        steps_asked: opts.steps,
        rtol: opts.rtol,
        verdict: overall,
        sections,
        original: RunNumbers::of(original, "host"),
        port_on_host: RunNumbers::of(on_host, "host"),
        original_machine: machine,
        port: RunNumbers::of(
            ported,
            ported
                .summary
                .run_start
                .as_ref()
                .map_or("sim", |s| s.target.as_str()),
        ),
        losses,
        first_parting_step: parting,
        layers: layers.layers,
        first_diverging_layer: diverging,
        missing_ops: ported.fallback_ops.clone(),
        fit,
        findings: port.findings.clone(),
    }
}

/// One of the three runs: the script in its copy, the check's steps, seeds, losses and layers;
/// the host runs map CUDA to the CPU where there is none.
fn one_run(
    opts: &CheckOptions,
    script: PathBuf,
    events: &Path,
    request: Request,
    layers: LayersSpec,
) -> RunOptions {
    let host = request.target == TargetRequest::Host;
    RunOptions {
        script,
        module: None,
        args: opts.args.clone(),
        request,
        python: opts.python.clone(),
        events: Some(events.to_path_buf()),
        timeout: opts.timeout,
        observer: quiet(),
        subprocess: false,
        sim: SimOptions::default(),
        numerics: None,
        max_steps: Some(opts.steps),
        cuda_on_cpu: host,
        check: Some(CheckSpec { layers }),
        breakdown: true,
    }
}

/// Where the port will run, for the progress line (the run decides the same way).
fn port_target_words(target: TargetRequest, python: Option<&Path>) -> String {
    let request = Request {
        target,
        ..Request::default()
    };
    match crate::runtime::resolve(&request, python) {
        Ok((_, plan)) => format!("{} ({})", plan.target.as_str(), plan.reason),
        Err(_) => "the sim".into(),
    }
}

fn quiet() -> ObserverChoice {
    ObserverChoice::Start(Box::new(|| -> Box<dyn RunObserver> { Box::new(Quiet) }))
}

/// Lines of a run's events file that were skipped: said, since the numbers leave them out.
fn skipped_note(skipped: &crate::profile::skipped::Skipped, path: &Path) {
    if let Some(d) = skipped.describe() {
        eprintln!("tpuport check: note: {}: {d}", path.display());
    }
}

/// Run `f` with the process's working folder set to `dir` (scripts read and write relative to
/// it), then restore it.
fn in_folder<T>(dir: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let before = std::env::current_dir()?;
    std::env::set_current_dir(dir).with_context(|| format!("cannot enter {}", dir.display()))?;
    let r = f();
    std::env::set_current_dir(before)?;
    r
}
