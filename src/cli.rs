//! The command line: clap definitions and dispatch to the library. Nothing else lives here.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};

use tpuport::port::Settings;
use tpuport::port::driver::{self, Format, Mode, Options};
use tpuport::port::rules::RuleSet;
use tpuport::runtime::chips::{self, Chip};
use tpuport::runtime::config::HbmTrack;
use tpuport::runtime::target::{Mode as RunMode, Precision, TargetRequest};

mod commands;
mod meta;

#[derive(Parser)]
#[command(
    name = "tpuport",
    version,
    about = "Move PyTorch CUDA/NCCL/torch_xla code onto Google Cloud TPUs (TorchTPU)",
    after_help = "Exit codes: 0 clean, 1 findings (something would change or needs manual work), 2 errors."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rewrite CUDA/NCCL code for TorchTPU; report what cannot be rewritten mechanically.
    ///
    /// By default prints the findings and a unified diff and writes nothing.
    Migrate(MigrateArgs),
    /// Explain a rule (its message, advice, fix class and example), or list them all.
    Rule(RuleArgs),
    /// Check your own rule files against their fixtures: every rule in DIR/*.toml flags its
    /// fixture (DIR/tests/ID.py), leaves the near misses after its `# OK` line alone, migrates
    /// it to code that parses, idempotently, and to DIR/tests/ID.fixed.py where that exists.
    TestRules(TestRulesArgs),
    /// Run a script under TorchTPU (a TPU, or TorchTPU itself on XLA:CPU; else the sim or the
    /// host) and stream what happens in it.
    ///
    /// Steps, compiles and recompiles with their reasons, memory and host syncs are written to
    /// an events file (JSON lines) and summed up at the end. Exit code: the script's own; 1 for
    /// an exception; 128+N when killed by signal N; 124 on --timeout; 2 if tpuport cannot start it.
    Run(RunArgs),
    /// Show the live dashboard for an events file (or a folder of per-rank files) written by a
    /// job started elsewhere, following it as it grows.
    Top(TopArgs),
    /// Render charts (SVG and PNG) and a Markdown summary from one events file, or two to
    /// compare (A/B, e.g. strict vs defer-fuse).
    Report(ReportArgs),
    /// Will the TPU's numbers match? Run a script's first steps in float32 and with TPU matmul
    /// precision emulated (sim target), and compare the loss per step and the parameters.
    Numerics(NumericsArgs),
    /// Is this training script ready for a TPU? Ports a copy of its folder, runs the original on
    /// this machine, the port there too and the port on a TPU target (same seeds and arguments),
    /// and answers per section: original machine (the port computes the original's losses bit
    /// for bit where it ran, and prints the same), port, run, numerics (loss per step, first
    /// diverging layer), ops a TPU lacks, compiles and syncs, fit on v5e/v5p/v6e/v7x. The user's
    /// files are not touched.
    ///
    /// Exit code: 0 ready, 1 needs work or blocked, 2 could not check (the original fails here).
    Check(CheckArgs),
    /// Is this machine and Python environment set up for TorchTPU? Python, torch's version and
    /// build, torch_tpu and libtpu, the TPU and whether another process holds it, ignored or
    /// obsolete variables, the compilation cache. Exit code 1 when a check fails.
    Doctor(DoctorArgs),
    /// Which TorchTPU setting runs this script best? Its first steps under each eager mode (and
    /// with --precision each matmul precision), median step time, peak memory, compiles and host
    /// syncs side by side, and a recommendation with the numbers behind it.
    Tune(TuneArgs),
    /// Print a shell completion script: `tpuport completions bash > ~/.local/share/bash-completion/completions/tpuport`
    /// (zsh: a file `_tpuport` on $fpath; fish: ~/.config/fish/completions/tpuport.fish).
    Completions(CompletionsArgs),
    /// Write the man pages (tpuport.1 and one per command, tpuport-migrate.1, ...) into a folder.
    Man(ManArgs),
}

#[derive(Args)]
struct RunArgs {
    /// The script to run, then its own arguments (use `--` before arguments that start with `-`).
    #[arg(required_unless_present = "module")]
    script: Option<PathBuf>,
    /// Run a module as `python -m NAME` does (e.g. `-m torch.tpu.distributed` on the sim
    /// target); every positional argument goes to it.
    #[arg(short = 'm', long = "module", value_name = "NAME")]
    module: Option<String>,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// Where to run: a real TPU; TorchTPU itself on this CPU (xla-cpu); the sim; or the host as
    /// written. auto: a TPU if attached, else xla-cpu where installed, else the sim (the run
    /// says which and why).
    #[arg(long, value_enum, default_value_t = TargetArg::Auto)]
    target: TargetArg,
    /// TorchTPU eager mode: strict (op by op, async), debug (synchronous), defer-fuse (fused).
    #[arg(long, value_enum, default_value_t = ModeArg::Strict)]
    mode: ModeArg,
    /// Float32 matmul precision: default (bf16 1-pass, TorchTPU's "medium"), high (3-pass), highest (6-pass).
    #[arg(long, value_enum)]
    precision: Option<PrecisionArg>,
    /// Allow XLA to keep higher precision than asked (torch.tpu.allow_excess_precision), set before the first compile.
    #[arg(long)]
    excess_precision: bool,
    /// TorchTPU's expensive correctness checks (e.g. index bounds of take()).
    #[arg(long)]
    debug_checks: bool,
    /// Run the ATen ops TorchTPU 0.2.0 lacks on the CPU instead of failing (TorchTPU's
    /// enable_cpu_fallback): each is reported once and listed at the end.
    #[arg(long)]
    cpu_fallback: bool,
    /// Persistent (tier-3) compilation cache root.
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Host-local (tier-2) compilation cache name.
    #[arg(long, value_name = "NAME")]
    cache_name: Option<String>,
    /// TPU generation to simulate (HBM capacity, device name); on a TPU the real one is used.
    #[arg(long, value_parser = chip_parser())]
    chip: Option<&'static Chip>,
    /// Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Events file (JSON lines; default: runs/<time>-<script>-<pid>.jsonl).
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Interrupt the script after this many seconds (exit 124).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// End the script cleanly (exit 0) after this many training steps (optimizer steps, or
    /// `tpuport.step()` markers), to try a long training script quickly.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: Option<u32>,
    /// Run N processes (one per TPU device, as TorchTPU does) through the environment's torchrun,
    /// each instrumented, writing rank<N>.jsonl in one run folder (--events names the folder);
    /// at the end, the ranks side by side: who died and how, and the straggler.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    nproc: Option<u32>,
    /// With --nproc: hosts in the job (multi-host), this host's rank, and the rendezvous address
    /// (passed to torchrun).
    #[arg(long, value_name = "N", default_value_t = 1, requires = "nproc")]
    nnodes: u32,
    #[arg(long, value_name = "N", default_value_t = 0, requires = "nproc")]
    node_rank: u32,
    #[arg(long, value_name = "HOST", requires = "nproc")]
    master_addr: Option<String>,
    #[arg(long, value_name = "PORT", requires = "nproc")]
    master_port: Option<u16>,
    /// host: where torch sees no CUDA, run the script's CUDA devices (`"cuda"`, `.cuda()`,
    /// `torch.cuda.*`, autocast, GradScaler, NCCL) on the CPU, so a CUDA script runs as written.
    #[arg(long)]
    cuda_on_cpu: bool,
    /// Run the script again whenever it or a Python file in its folder changes (a change
    /// while it runs stops it first); the dashboard restarts in place. Leave the dashboard, or
    /// Ctrl-C, to stop watching.
    #[arg(long, conflicts_with = "nproc")]
    watch: bool,
    /// Do not time each step's phases (data, forward, backward, optimizer, host syncs): the
    /// module, autograd, optimizer and DataLoader hooks that measure them stay out.
    #[arg(long)]
    no_breakdown: bool,
    /// Record each step's loss (the scalar tensor `.backward()` is called on; under a
    /// GradScaler, the loss it scaled) in the step events, with torch, random and numpy seeded 0
    /// before the script: runs on two targets then compare step by step (what `check` and
    /// `numerics` do; bench/realcode.sh uses it).
    #[arg(long)]
    losses: bool,
    /// No dashboard: one line per step and a summary at the end.
    #[arg(long)]
    no_tui: bool,
    /// Run the agent as `python -m tpuport_agent` even where CPython could be embedded.
    #[arg(long)]
    subprocess: bool,
    /// sim: raise torch.OutOfMemoryError when the tensors live on the simulated TPU pass its HBM
    /// (implies --hbm-track full).
    #[arg(long)]
    strict_hbm: bool,
    /// sim: how HBM is tracked on a CPU host: sampled (the first steps and one in 25), full (every
    /// op; exact, slower), off.
    #[arg(long, value_enum, default_value_t = HbmTrackArg::Sampled)]
    hbm_track: HbmTrackArg,
    /// sim: HBM per device instead of the chip's (e.g. 512MiB, 8GiB), to see where a model stops fitting.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    hbm: Option<u64>,
}

#[derive(Args)]
struct NumericsArgs {
    /// The training script, then its own arguments (use `--` before ones that start with `-`).
    #[arg(required = true)]
    script: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// Optimizer steps to run in each of the two runs.
    #[arg(long, default_value_t = 10)]
    steps: u32,
    /// The TPU precision to emulate against float32.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Default)]
    precision: PrecisionArg,
    /// TPU generation to simulate.
    #[arg(long, value_parser = chip_parser())]
    chip: Option<&'static Chip>,
    /// Where both runs go: auto (xla-cpu where installed, else the sim), xla-cpu or sim.
    #[arg(long, value_enum, default_value_t = TargetArg::Auto)]
    target: TargetArg,
    /// Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
}

#[derive(Args)]
struct CheckArgs {
    /// The training script, then its own arguments, the same for every run (use `--` before
    /// ones that start with `-`).
    #[arg(required = true)]
    script: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// Report folder: report.md, report.html, report.json, charts, the port's diff, the three
    /// events files and the copies (default: the terminal summary only).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: Option<PathBuf>,
    /// Training steps in each run.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Relative tolerance at which the port's losses and layer outputs count as parting from the
    /// original's (TPU default precision is bf16-class: about 1e-3 per layer).
    #[arg(long, default_value_t = 1e-2)]
    rtol: f64,
    /// `json`: the whole answer as JSON on stdout (for CI).
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    output_format: CheckFormat,
    /// Seconds each of the three runs may take.
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<f64>,
    /// Where the port runs: auto (a TPU if attached, else xla-cpu where installed, else the
    /// sim), tpu, xla-cpu or sim. The original, and the port beside it, always run on the host.
    #[arg(long, value_enum, default_value_t = TargetArg::Auto)]
    target: TargetArg,
    /// Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
}

#[derive(Args)]
struct TuneArgs {
    /// The training script, then its own arguments (use `--` before ones that start with `-`).
    #[arg(required = true)]
    script: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
    /// Training steps per setting.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Also try each float32 matmul precision (default, high, highest) under each mode.
    #[arg(long)]
    precision: bool,
    /// Where to run (a TPU if attached, else xla-cpu where installed, else the sim target).
    #[arg(long, value_enum, default_value_t = TargetArg::Auto)]
    target: TargetArg,
    /// Folder for the runs' events files (default: runs/<time>-tune-<script>/).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    output: Option<PathBuf>,
    /// Python interpreter or venv (default: $VIRTUAL_ENV, else the project venv, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
}

#[derive(Args)]
struct DoctorArgs {
    /// Python interpreter or venv to check (default: $VIRTUAL_ENV, else the project venv, else python3).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// `json`: the checks as a JSON array.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    output_format: CheckFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum HbmTrackArg {
    Sampled,
    Full,
    Off,
}

impl From<HbmTrackArg> for HbmTrack {
    fn from(a: HbmTrackArg) -> Self {
        match a {
            HbmTrackArg::Sampled => HbmTrack::Sampled,
            HbmTrackArg::Full => HbmTrack::Full,
            HbmTrackArg::Off => HbmTrack::Off,
        }
    }
}

/// `512MiB`, `8GiB`, `16G`, `1000000` (bytes).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size; write e.g. 512MiB or 8GiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("`{s}`: unknown unit; use B, KiB, MiB, GiB or TiB")),
    };
    Ok((n * mult as f64) as u64)
}

#[derive(Args)]
struct TopArgs {
    /// An events file (`tpuport run --events`), or a folder of them (one per rank).
    path: PathBuf,
}

#[derive(Args)]
struct ReportArgs {
    /// The events file, and optionally a second one to compare with it (B/A ratios).
    #[arg(required = true, num_args = 1..=2, value_name = "RUN.jsonl")]
    runs: Vec<PathBuf>,
    /// Folder for the report (created if missing; files in it are replaced atomically).
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum TargetArg {
    /// A TPU if one is attached (PCI/VFIO), else xla-cpu where it is installed and serves the
    /// environment (Linux x86_64, torch 2.11–2.15), else the sim.
    Auto,
    /// A real TPU, with the TorchTPU installed in the script's environment.
    Tpu,
    /// TorchTPU 0.2.0 itself, run on this CPU: its device, op coverage, errors, compiler and
    /// compile cache, through a CPU PJRT plugin in libtpu's place (scripts/bootstrap-xla-cpu
    /// installs it). One process; no TPU kernels (Mosaic), no TPU speed.
    #[value(name = "xla-cpu")]
    XlaCpu,
    /// A Python emulation of TorchTPU over the host (any OS, any torch): "tpu" maps to the host.
    Sim,
    /// The script as written, on this machine.
    Host,
}

impl From<TargetArg> for TargetRequest {
    fn from(a: TargetArg) -> Self {
        match a {
            TargetArg::Auto => TargetRequest::Auto,
            TargetArg::Tpu => TargetRequest::Tpu,
            TargetArg::XlaCpu => TargetRequest::XlaCpu,
            TargetArg::Sim => TargetRequest::Sim,
            TargetArg::Host => TargetRequest::Host,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum ModeArg {
    Strict,
    Debug,
    DeferFuse,
}

impl From<ModeArg> for RunMode {
    fn from(a: ModeArg) -> Self {
        match a {
            ModeArg::Strict => RunMode::Strict,
            ModeArg::Debug => RunMode::Debug,
            ModeArg::DeferFuse => RunMode::DeferFuse,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum PrecisionArg {
    Default,
    High,
    Highest,
}

impl From<PrecisionArg> for Precision {
    fn from(a: PrecisionArg) -> Self {
        match a {
            PrecisionArg::Default => Precision::Default,
            PrecisionArg::High => Precision::High,
            PrecisionArg::Highest => Precision::Highest,
        }
    }
}

/// `--chip`: exactly the names of the chip table (so `--help` and errors list them).
fn chip_parser() -> impl TypedValueParser<Value = &'static Chip> {
    PossibleValuesParser::new(chips::names())
        .map(|name| chips::chip_by_name(&name).expect("the parser accepts only the table's names"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// `--chip` offers the chip table's names, in its order, for both commands.
    #[test]
    fn chip_choices_are_the_chip_table() {
        let cli = Cli::command();
        for sub in ["run", "numerics"] {
            let arg = cli
                .find_subcommand(sub)
                .and_then(|c| c.get_arguments().find(|a| a.get_id() == "chip"))
                .unwrap();
            let offered: Vec<String> = arg
                .get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect();
            assert_eq!(offered, chips::names().collect::<Vec<_>>(), "{sub}");
        }
        let parsed = Cli::try_parse_from(["tpuport", "run", "--chip", "v7x", "x.py"]).unwrap();
        let Command::Run(a) = parsed.command else {
            panic!("not run")
        };
        assert_eq!(a.chip.unwrap().device_name, "TPU v7");
        assert!(Cli::try_parse_from(["tpuport", "run", "--chip", "v9", "x.py"]).is_err());
    }
}

#[derive(Args)]
struct MigrateArgs {
    /// Files or folders to migrate (folders are walked, honouring .gitignore).
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Write the fixes back to the files (atomically; permissions kept).
    #[arg(short, long, conflicts_with_all = ["check", "diff"])]
    write: bool,
    /// Report only; exit 1 if anything would change or a diagnostic is reported.
    #[arg(long, conflicts_with = "diff")]
    check: bool,
    /// Print only the unified diff (a patch for `git apply`), no diagnostics.
    #[arg(long)]
    diff: bool,
    /// Review each fix `--write` would apply on a screen (accept, skip, edit), then write the
    /// accepted ones (atomically). Needs a terminal.
    #[arg(short, long, conflicts_with_all = ["write", "check", "diff", "statistics"])]
    interactive: bool,
    /// Also apply fixes that may change behaviour (review the diff!).
    #[arg(long, overrides_with = "no_unsafe_fixes")]
    unsafe_fixes: bool,
    /// Do not apply unsafe fixes, whatever the configuration file says.
    #[arg(long, overrides_with = "unsafe_fixes")]
    no_unsafe_fixes: bool,
    /// Which machine the fixes write for. `portable` (the default): the program keeps doing what
    /// it did on its CUDA machine and is right on a TPU too (`torch.accelerator.
    /// current_accelerator()`, the accelerator's default backend, comparisons extended to the
    /// TPU). `tpu`: TorchTPU's literal names (`"tpu"`, `"tpu_dist"`, `.to("tpu")`), for code
    /// that leaves CUDA behind.
    #[arg(long, value_name = "TARGET", value_parser = ["portable", "tpu"])]
    to: Option<String>,
    /// The configuration file (`pyproject.toml` with `[tool.tpuport]`, or `tpuport.toml`)
    /// instead of the one found above the first path.
    #[arg(long, value_name = "PATH", conflicts_with = "isolated")]
    config: Option<PathBuf>,
    /// Read no configuration file: only the command line counts.
    #[arg(long)]
    isolated: bool,
    /// Only run these rules: ids or prefixes, comma separated (e.g. `DEV,CUD004`).
    #[arg(long, value_delimiter = ',')]
    select: Vec<String>,
    /// Skip these rules: ids or prefixes, comma separated.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// Extra rule folder(s) holding *.toml rule files (see docs/writing-rules.md).
    #[arg(long = "rules", value_name = "DIR")]
    rules: Vec<PathBuf>,
    /// Do not honour .gitignore/.ignore files or skip hidden files.
    #[arg(long)]
    no_ignore: bool,
    /// Largest file to read, in megabytes [default: 8, or `max-file-size` in the configuration].
    #[arg(long, value_name = "MB")]
    max_file_size: Option<u64>,
    /// The oldest torch the project runs (`2.11`), over its pin files: where nothing says, the
    /// portable forms keep the original beside them for a torch without `torch.accelerator`.
    #[arg(long, value_name = "VERSION")]
    min_torch: Option<String>,
    /// Output format for findings.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    output_format: OutputFormat,
    /// Exit 0 even when there are findings (errors still exit 2).
    #[arg(long)]
    exit_zero: bool,
    /// Print one line per finding and no summary.
    #[arg(short, long)]
    quiet: bool,
    /// Print counts per rule and per family (found, fixed, left) instead of findings and diffs.
    #[arg(long)]
    statistics: bool,
    /// Worker threads (default: one per core).
    #[arg(short = 'j', long)]
    threads: Option<usize>,
    /// Check again whenever a Python file under the paths changes (debounced), until Ctrl-C;
    /// findings only: it never writes.
    #[arg(long, conflicts_with_all = ["write", "interactive"])]
    watch: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum OutputFormat {
    /// Findings with the source line and advice, then the diff.
    Text,
    /// A JSON array of findings with byte-offset edits.
    Json,
    /// A SARIF 2.1.0 log (code scanning), with the fixes as replacements.
    Sarif,
    /// GitHub Actions annotations (`::warning file=...::message`), one line per finding.
    Github,
}

impl From<OutputFormat> for Format {
    fn from(f: OutputFormat) -> Format {
        match f {
            OutputFormat::Text => Format::Text,
            OutputFormat::Json => Format::Json,
            OutputFormat::Sarif => Format::Sarif,
            OutputFormat::Github => Format::Github,
        }
    }
}

#[derive(Args)]
struct RuleArgs {
    /// A rule id such as DEV001.
    id: Option<String>,
    /// List every rule, one per line.
    #[arg(long, conflicts_with = "id")]
    all: bool,
    /// Extra rule folder(s) to include.
    #[arg(long = "rules", value_name = "DIR")]
    rules: Vec<PathBuf>,
}

#[derive(Args)]
struct TestRulesArgs {
    /// The folder holding your *.toml rule files (and their fixtures, or in tests/).
    dir: PathBuf,
    /// Write each fixture's safe migration to ID.fixed.py (review the diff, then commit it).
    #[arg(long)]
    update: bool,
}

pub fn run() -> Result<u8> {
    let cli = meta::parse::<Cli>();
    match cli.command {
        Command::Migrate(a) => commands::migrate(a),
        Command::Rule(a) => commands::rule(a),
        Command::TestRules(a) => commands::test_rules(a),
        Command::Run(a) => commands::run_script(a),
        Command::Numerics(a) => commands::numerics(a),
        Command::Check(a) => commands::check(a),
        Command::Doctor(a) => commands::doctor(a),
        Command::Tune(a) => commands::tune(a),
        Command::Top(a) => Ok(tpuport::ui::top::run(&a.path)?.clamp(0, 255) as u8),
        Command::Report(a) => commands::report(a),
        Command::Completions(a) => meta::completions::<Cli>(a),
        Command::Man(a) => meta::man::<Cli>(a),
    }
}

#[derive(Args)]
struct CompletionsArgs {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

#[derive(Args)]
struct ManArgs {
    /// The folder to write the pages into (created if needed).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        default_value = "man"
    )]
    output: PathBuf,
}
