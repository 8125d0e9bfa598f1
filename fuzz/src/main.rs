//! `tpuport-fuzz`: a fuzz harness for tpuport on the pinned stable toolchain (no nightly, no
//! sanitizer runtime). A deterministic, corpus-driven mutator ([`mutate`], [`structured`]) feeds
//! four targets ([`targets`]) through the library in process; [`runner`] keeps what behaves in
//! new ways, saves what breaks, and stops at the time or iteration budget.
//!
//! ```sh
//! cargo run -p tpuport-fuzz --profile fuzz -- --target migrate --minutes 10
//! cargo run -p tpuport-fuzz -- --target all --seconds 12            # CI's smoke (dev build)
//! cargo run -p tpuport-fuzz --profile fuzz -- --target migrate --replay fuzz/artifacts/migrate/crash-....py
//! ```

mod mutate;
mod rng;
mod runner;
mod seeds;
mod structured;
mod targets;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use runner::{Budget, Stats, Target};

#[derive(Clone, Copy, PartialEq, ValueEnum)]
enum Which {
    Migrate,
    Notebook,
    Rules,
    Events,
    /// Each target in turn, each with the whole budget.
    All,
}

/// Fuzz tpuport's rewriter and readers with mutated real inputs.
#[derive(Parser)]
#[command(name = "tpuport-fuzz")]
struct Args {
    /// What to fuzz.
    #[arg(long, value_enum)]
    target: Which,
    /// Minutes per target.
    #[arg(long, conflicts_with = "seconds")]
    minutes: Option<f64>,
    /// Seconds per target.
    #[arg(long)]
    seconds: Option<f64>,
    /// Stop after this many inputs per target (with or without a time budget).
    #[arg(long)]
    iterations: Option<u64>,
    /// The PRNG's seed: the same seed and budget give the same inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// More seed inputs: every file with the target's extension under this folder.
    #[arg(long, value_name = "DIR")]
    corpus: Vec<PathBuf>,
    /// Also seed `migrate` with the real code `scripts/corpus` cached (~/.cache/tpuport/corpus).
    #[arg(long)]
    real_corpus: bool,
    /// Where failing inputs are saved (default: fuzz/artifacts/).
    #[arg(long, value_name = "DIR")]
    artifacts: Option<PathBuf>,
    /// An input taking longer than this is a hang: saved, and the run stops.
    #[arg(long, default_value_t = 60)]
    hang_secs: u64,
    /// Run one saved input (the panic, if any, prints as usual).
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
}

fn target(which: Which, extra: &seeds::Extra) -> Box<dyn Target> {
    match which {
        Which::Migrate => Box::new(targets::migrate::Migrate::new(extra.clone())),
        Which::Notebook => Box::new(targets::notebook::Notebook::new(extra.clone())),
        Which::Rules => Box::new(targets::rules::Rules::new()),
        Which::Events | Which::All => Box::new(targets::events::Events::new()),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let extra = seeds::Extra {
        dirs: args.corpus.clone(),
        real: args.real_corpus,
    };
    if let Some(file) = &args.replay {
        return replay(args.target, &extra, file);
    }
    let duration = args
        .minutes
        .map(|m| m * 60.0)
        .or(args.seconds)
        .map(Duration::from_secs_f64);
    if duration.is_none() && args.iterations.is_none() {
        eprintln!("tpuport-fuzz: give a budget: --minutes N, --seconds N or --iterations N");
        return ExitCode::from(2);
    }
    let budget = Budget {
        duration,
        iterations: args.iterations,
        seed: args.seed,
        hang: Duration::from_secs(args.hang_secs),
        artifacts: args
            .artifacts
            .clone()
            .unwrap_or_else(|| seeds::repo().join("fuzz/artifacts")),
        quiet: args.quiet,
    };
    let which = if args.target == Which::All {
        vec![Which::Migrate, Which::Notebook, Which::Rules, Which::Events]
    } else {
        vec![args.target]
    };
    runner::quiet_panics();
    let mut failed = false;
    for w in which {
        let mut t = target(w, &extra);
        let stats = runner::fuzz(t.as_mut(), &budget);
        print_stats(&stats);
        failed |= !stats.failures.is_empty();
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn print_stats(s: &Stats) {
    println!(
        "{}: {:.0} s, {} inputs ({} seeds, {} kept for new behaviour, {} behaviours), {} distinct failures",
        s.target,
        s.seconds,
        s.iterations,
        s.seeds,
        s.discovered,
        s.behaviours,
        s.failures.len()
    );
    for (key, (n, path)) in &s.failures {
        println!("  {n} × {key}\n    {}", path.display());
    }
}

fn replay(which: Which, extra: &seeds::Extra, file: &PathBuf) -> ExitCode {
    let Ok(data) = std::fs::read(file) else {
        eprintln!("tpuport-fuzz: cannot read {}", file.display());
        return ExitCode::from(2);
    };
    let mut t = target(which, extra);
    // Replays print panics with their backtrace (RUST_BACKTRACE=1), as any program does.
    match runner::run_one_loud(t.as_mut(), &data) {
        Ok(_) => {
            println!("{}: ok", file.display());
            ExitCode::SUCCESS
        }
        Err(msg) => {
            println!("{}: {msg}", file.display());
            ExitCode::from(1)
        }
    }
}
