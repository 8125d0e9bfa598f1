//! What each command does once its arguments are parsed (the clap definitions are in
//! `cli.rs`): build the options, call the library, map the result to an exit code.

use super::*;

pub(super) fn test_rules(a: TestRulesArgs) -> Result<u8> {
    let reports = tpuport::port::testrules::run(&a.dir, a.update)?;
    let (text, ok) = tpuport::port::testrules::render(&reports);
    print!("{text}");
    Ok(if ok { 0 } else { 1 })
}

pub(super) fn numerics(a: NumericsArgs) -> Result<u8> {
    let code = tpuport::runtime::numerics::numerics(tpuport::runtime::numerics::NumericsOptions {
        script: a.script,
        args: a.args,
        steps: a.steps,
        precision: a.precision.into(),
        python: a.python,
        chip: a.chip,
        target: port_target(a.target, "numerics")?,
    })?;
    Ok(code.clamp(0, 255) as u8)
}

pub(super) fn check(a: CheckArgs) -> Result<u8> {
    if let Some(t) = a.timeout
        && !(t > 0.0 && t.is_finite())
    {
        bail!("--timeout must be a positive number of seconds, got {t}");
    }
    if !(a.rtol > 0.0 && a.rtol.is_finite()) {
        bail!("--rtol must be a positive number, got {}", a.rtol);
    }
    let code = tpuport::check::check(tpuport::check::CheckOptions {
        target: port_target(a.target, "check")?,
        script: a.script,
        args: a.args,
        steps: a.steps,
        out: a.output,
        python: a.python,
        json: matches!(a.output_format, CheckFormat::Json),
        rtol: a.rtol,
        timeout: a.timeout.map(std::time::Duration::from_secs_f64),
    })?;
    Ok(code.clamp(0, 255) as u8)
}

/// `--target` of a command that runs a port (check, numerics): the host runs the original, not
/// a port.
fn port_target(t: TargetArg, command: &str) -> Result<tpuport::runtime::target::TargetRequest> {
    if matches!(t, TargetArg::Host) {
        bail!(
            "`tpuport {command} --target host`: the port needs a TPU target (tpu, xla-cpu or sim); the host runs the original"
        );
    }
    Ok(t.into())
}

/// The command line each rank's `tpuport run` gets: this one's flags before the script, without
/// `--nproc`, the multi-host flags and `--events` (the launcher adds the rank's file), then the
/// script and its arguments untouched.
fn worker_args(raw: &[String], script: &str) -> Vec<String> {
    let at = raw.iter().position(|a| a == script).unwrap_or(raw.len());
    let with_value = [
        "--nproc",
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--master-port",
        "--events",
    ];
    let mut out = vec![];
    let mut i = raw.iter().position(|a| a == "run").map_or(0, |p| p + 1);
    while i < at {
        let a = &raw[i];
        if with_value.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if with_value.iter().any(|f| a.starts_with(&format!("{f}="))) || a == "--no-tui" {
            i += 1;
            continue;
        }
        out.push(a.clone());
        i += 1;
    }
    out.extend(raw[at.min(raw.len())..].iter().cloned());
    out
}

pub(super) fn run_script(a: RunArgs) -> Result<u8> {
    if let Some(n) = a.nproc {
        let Some(script) = &a.script else {
            bail!("--nproc runs a script; `-m MODULE` is not supported with it");
        };
        let raw: Vec<String> = std::env::args().collect();
        let code = tpuport::runtime::ranks::run(tpuport::runtime::ranks::RanksOptions {
            nproc: n,
            nnodes: a.nnodes,
            node_rank: a.node_rank,
            master_addr: a.master_addr.clone(),
            master_port: a.master_port,
            dir: a.events.clone(),
            script: script.clone(),
            python: a.python.clone(),
            worker_args: worker_args(&raw, &script.to_string_lossy()),
            tpu_target: matches!(a.target, TargetArg::Tpu),
            may_use_xla_cpu: matches!(a.target, TargetArg::Auto | TargetArg::XlaCpu),
            // With a terminal, the dashboard over the run folder shows every rank as they go.
            observer: (!a.no_tui && std::io::IsTerminal::is_terminal(&std::io::stdout())).then(
                || {
                    Box::new(|dir: &std::path::Path| {
                        let f = tpuport::ui::top::Follow::start(dir, false)?;
                        Ok(Box::new(f) as Box<dyn tpuport::runtime::ranks::RanksObserver>)
                    }) as tpuport::runtime::ranks::ObserverStart
                },
            ),
        })?;
        return Ok(code.clamp(0, 255) as u8);
    }
    if a.cuda_on_cpu && !matches!(a.target, TargetArg::Host) {
        bail!("--cuda-on-cpu is for --target host (the sim target maps \"tpu\", not \"cuda\")");
    }
    let request = tpuport::runtime::target::Request {
        target: a.target.into(),
        mode: a.mode.into(),
        precision: a.precision.map(Into::into),
        excess_precision: a.excess_precision,
        debug_checks: a.debug_checks,
        cpu_fallback: a.cpu_fallback,
        cache_dir: a.cache_dir,
        cache_name: a.cache_name,
        chip: a.chip,
    };
    if let Some(t) = a.timeout
        && !(t > 0.0 && t.is_finite())
    {
        bail!("--timeout must be a positive number of seconds, got {t}");
    }
    let (script, args) = match (&a.module, a.script) {
        (Some(m), first) => (
            PathBuf::from(m),
            first
                .map(|f| f.to_string_lossy().into_owned())
                .into_iter()
                .chain(a.args)
                .collect(),
        ),
        (None, Some(s)) => (s, a.args),
        (None, None) => unreachable!("clap requires a script or --module"),
    };
    if a.watch && a.module.is_some() {
        bail!("--watch watches a script and its folder; it does not take -m MODULE");
    }
    let (watch, no_tui, watched) = (a.watch, a.no_tui, script.clone());
    let make = move |observer| tpuport::runtime::RunOptions {
        script: script.clone(),
        module: a.module.clone(),
        args: args.clone(),
        request: request.clone(),
        python: a.python.clone(),
        events: a.events.clone(),
        timeout: a.timeout.map(std::time::Duration::from_secs_f64),
        observer,
        subprocess: a.subprocess,
        sim: tpuport::runtime::SimOptions {
            strict_hbm: a.strict_hbm,
            hbm_track: a.hbm_track.into(),
            hbm_bytes: a.hbm,
        },
        numerics: None,
        max_steps: a.max_steps,
        cuda_on_cpu: a.cuda_on_cpu,
        breakdown: !a.no_breakdown,
        check: a.losses.then(tpuport::runtime::config::CheckSpec::default),
    };
    let code = if watch {
        tpuport::runtime::watch::run_watching(
            || make(observer(true)),
            watch_observer(no_tui),
            &watched,
        )?
    } else {
        tpuport::runtime::run(make(observer(no_tui)))?
    };
    Ok(code.clamp(0, 255) as u8)
}

/// The dashboard when stdout is a terminal and no `--no-tui`, else a line per step. The
/// dashboard starts when the run does; if it cannot, the run shows step lines instead.
pub(super) fn observer(no_tui: bool) -> tpuport::runtime::launcher::ObserverChoice {
    use tpuport::runtime::launcher::{ObserverChoice, RunObserver, StepLines};
    if no_tui || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return ObserverChoice::StepLines;
    }
    ObserverChoice::Start(Box::new(|| -> Box<dyn RunObserver> {
        match tpuport::ui::live::LiveRun::start() {
            Ok(d) => Box::new(d),
            Err(e) => {
                eprintln!("tpuport: note: {e:#}; showing one line per step instead");
                Box::new(StepLines::default())
            }
        }
    }))
}

/// `run --watch`: the dashboard, started now and kept for every run (None: step lines).
fn watch_observer(no_tui: bool) -> Option<Box<dyn tpuport::runtime::launcher::RunObserver>> {
    if no_tui || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return None;
    }
    match tpuport::ui::live::LiveRun::start() {
        Ok(d) => Some(Box::new(d)),
        Err(e) => {
            eprintln!("tpuport: note: {e:#}; showing one line per step instead");
            None
        }
    }
}

pub(super) fn report(a: ReportArgs) -> Result<u8> {
    let (files, notes) = tpuport::profile::report::write_report(&a.runs, &a.output)?;
    for n in notes {
        eprintln!("tpuport report: warning: {n}");
    }
    for f in files {
        println!("{}", f.display());
    }
    Ok(0)
}

/// `migrate --watch`: after the first check, check again on every change of a Python file under
/// the paths, until Ctrl-C.
fn watch_migrate(rules: &RuleSet, opts: &Options) -> Result<()> {
    let mut changes = tpuport::watch::Changes::new(&opts.paths, true)?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, std::sync::Arc::clone(&stop));
    }
    loop {
        eprintln!("tpuport migrate: watching for changes to Python files (Ctrl-C to stop)");
        let changed = loop {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(());
            }
            let c = changes.wait(std::time::Duration::from_millis(200));
            if !c.is_empty() {
                break c;
            }
        };
        let names: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
        eprintln!(
            "\ntpuport migrate: {} changed: checking again\n",
            names.join(", ")
        );
        driver::run(rules, opts)?;
    }
}

pub(super) fn migrate(a: MigrateArgs) -> Result<u8> {
    if a.statistics && matches!(a.output_format, OutputFormat::Sarif | OutputFormat::Github) {
        bail!(
            "--statistics prints a table, as text or JSON: drop --output-format sarif/github, or use --output-format json"
        );
    }
    if a.interactive && !matches!(a.output_format, OutputFormat::Text) {
        bail!("-i/--interactive shows a review screen: drop --output-format");
    }
    use tpuport::port::config;
    let loaded = config::discover(a.config.as_deref(), a.isolated, &a.paths)?;
    let overrides = config::Overrides {
        select: &a.select,
        ignore: &a.ignore,
        unsafe_fixes: (a.unsafe_fixes || a.no_unsafe_fixes).then_some(a.unsafe_fixes),
        to: a
            .to
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        max_file_size_mb: a.max_file_size,
        min_torch: a.min_torch.as_deref(),
    };
    let mut rules = RuleSet::load(&config::rule_dirs(loaded.as_ref(), &a.rules)?)?;
    let settled = config::settle(loaded.as_ref(), &overrides, &rules)?;
    rules.filter(&settled.select, &settled.ignore)?;
    if let Some(n) = a.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n.max(1))
            .build_global()?;
    }
    let mode = if a.write {
        Mode::Write
    } else if a.check {
        Mode::Check
    } else if a.diff {
        Mode::Diff
    } else {
        Mode::Preview
    };
    let opts = Options {
        paths: a.paths,
        mode,
        format: a.output_format.into(),
        settings: Settings {
            unsafe_fixes: settled.unsafe_fixes,
            to: settled.to,
            min_torch: settled.min_torch,
        },
        no_ignore: a.no_ignore,
        max_file_size: settled.max_file_size_mb.saturating_mul(1_000_000),
        quiet: a.quiet,
        statistics: a.statistics,
        exclude: settled.exclude,
    };
    let code = if a.interactive {
        tpuport::ui::review::run(&rules, &opts)?
    } else {
        driver::run(&rules, &opts)?
    };
    if a.watch {
        watch_migrate(&rules, &opts)?;
    }
    Ok(if a.exit_zero && code == driver::EXIT_FINDINGS {
        driver::EXIT_CLEAN
    } else {
        code
    })
}

pub(super) fn rule(a: RuleArgs) -> Result<u8> {
    let rules = RuleSet::load(&a.rules)?;
    let text = tpuport::port::explain(&rules, a.id.as_deref(), a.all)?;
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
    Ok(0)
}

pub(super) fn doctor(a: DoctorArgs) -> Result<u8> {
    use tpuport::runtime::doctor::{self, Environment, Machine, Status};
    let env = tpuport::runtime::interpreter::find(a.python.as_deref())
        .ok()
        .map(|e| Environment {
            python: e.python,
            version: e.version,
            site_packages: e.site_packages,
        });
    let checks = doctor::run_checks(&Machine::this(), env.as_ref());
    match a.output_format {
        CheckFormat::Json => println!("{}", serde_json::to_string_pretty(&checks)?),
        CheckFormat::Text => print!("{}", doctor::render(&checks)),
    }
    Ok(u8::from(checks.iter().any(|c| c.status == Status::Fail)))
}

pub(super) fn tune(a: TuneArgs) -> Result<u8> {
    use tpuport::runtime::tune;
    let dir = a.output.clone().unwrap_or_else(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let stem = a
            .script
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "run".into());
        PathBuf::from("runs").join(format!(
            "{}-tune-{stem}",
            tpuport::runtime::launcher::utc_stamp(secs)
        ))
    });
    let trials = tune::tune(&tune::TuneOptions {
        script: a.script,
        args: a.args,
        steps: a.steps,
        target: a.target.into(),
        precisions: a.precision,
        python: a.python,
        dir: dir.clone(),
    })?;
    // On an emulating target (the sim, xla-cpu) the host's times say nothing about the modes.
    let sim = tune::emulated(&trials);
    print!("{}", tune::render(&trials, sim));
    println!("events: {}", dir.display());
    Ok(u8::from(tune::recommend(&trials, sim).is_none()))
}

#[cfg(test)]
mod tests {
    use super::worker_args;

    #[test]
    fn workers_get_this_command_line_without_the_launch_flags() {
        let raw: Vec<String> = [
            "tpuport",
            "run",
            "--target",
            "sim",
            "--nproc",
            "2",
            "--events=runs/x",
            "--no-tui",
            "--master-port",
            "29501",
            "train.py",
            "--nproc",
            "9",
            "--events",
            "mine",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            worker_args(&raw, "train.py"),
            [
                "--target", "sim", "train.py", "--nproc", "9", "--events", "mine"
            ]
        );
    }
}
