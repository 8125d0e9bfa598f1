//! The command line: clap definitions and dispatch to the library. Nothing else lives here.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};

use tpuport::port::Settings;
use tpuport::port::driver::{self, Format, Mode, Options};
use tpuport::port::rules::{Matcher, RuleSet};

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
    /// Also apply fixes that may change behaviour (review the diff!).
    #[arg(long)]
    unsafe_fixes: bool,
    /// Only run these rules: ids or prefixes, comma separated (e.g. `DEV,CUD004`).
    #[arg(long, value_delimiter = ',')]
    select: Vec<String>,
    /// Skip these rules: ids or prefixes, comma separated.
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// Extra rule folder(s) holding *.toml rule files (see README, "Writing your own rules").
    #[arg(long = "rules", value_name = "DIR")]
    rules: Vec<PathBuf>,
    /// Do not honour .gitignore/.ignore files or skip hidden files.
    #[arg(long)]
    no_ignore: bool,
    /// Largest file to read, in megabytes.
    #[arg(long, value_name = "MB", default_value_t = 8)]
    max_file_size: u64,
    /// Output format for findings.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    output_format: OutputFormat,
    /// Exit 0 even when there are findings (errors still exit 2).
    #[arg(long)]
    exit_zero: bool,
    /// Print one line per finding and no summary.
    #[arg(short, long)]
    quiet: bool,
    /// Worker threads (default: one per core).
    #[arg(short = 'j', long)]
    threads: Option<usize>,
}

#[derive(Clone, Copy, ValueEnum)]
enum OutputFormat {
    /// Findings with the source line and advice, then the diff.
    Text,
    /// A JSON array of findings with byte-offset edits.
    Json,
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

pub fn run() -> Result<u8> {
    let cli = Cli::parse();
    match cli.command {
        Command::Migrate(a) => migrate(a),
        Command::Rule(a) => rule(a),
    }
}

fn migrate(a: MigrateArgs) -> Result<u8> {
    let mut rules = RuleSet::load(&a.rules)?;
    rules.filter(&a.select, &a.ignore)?;
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
        format: match a.output_format {
            OutputFormat::Text => Format::Text,
            OutputFormat::Json => Format::Json,
        },
        settings: Settings {
            unsafe_fixes: a.unsafe_fixes,
        },
        no_ignore: a.no_ignore,
        max_file_size: a.max_file_size.saturating_mul(1_000_000),
        quiet: a.quiet,
    };
    let code = driver::run(&rules, &opts)?;
    Ok(if a.exit_zero && code == driver::EXIT_FINDINGS {
        driver::EXIT_CLEAN
    } else {
        code
    })
}

fn rule(a: RuleArgs) -> Result<u8> {
    let text = rule_text(a)?;
    std::io::Write::write_all(&mut std::io::stdout().lock(), text.as_bytes())?;
    Ok(0)
}

fn rule_text(a: RuleArgs) -> Result<String> {
    use std::fmt::Write;
    let mut o = String::new();
    let rules = RuleSet::load(&a.rules)?;
    if a.all || a.id.is_none() {
        for f in &rules.files {
            writeln!(o, "{}  {}  ({})", f.family, f.title, f.origin)?;
            let mut last = "";
            for r in rules.rules.iter().filter(|r| r.family == f.family) {
                if r.id != last {
                    writeln!(o, "  {}  {:<7} {}", r.id, r.fix.as_str(), r.name)?;
                    last = &r.id;
                }
            }
        }
        return Ok(o);
    }
    let id = a.id.unwrap_or_default().to_ascii_uppercase();
    let found = rules.get(&id);
    if found.is_empty() {
        bail!("no rule `{id}`; run `tpuport rule --all` to list the rule ids");
    }
    let first = found[0];
    writeln!(o, "{} ({})  [{}]", first.id, first.name, first.origin)?;
    for r in &found {
        writeln!(o)?;
        writeln!(o, "  {}", r.message)?;
        writeln!(o, "  fix: {}", r.fix.as_str())?;
        writeln!(o, "  matches: {}", describe(&r.matcher))?;
        if let Some(adv) = &r.advice {
            writeln!(o, "  advice: {}", adv.trim())?;
        }
        if let Some(ex) = &r.example {
            writeln!(o, "  before:\n{}", indent(&ex.before))?;
            writeln!(o, "  after:\n{}", indent(&ex.after))?;
        }
    }
    Ok(o)
}

fn describe(m: &Matcher) -> String {
    match m {
        Matcher::Call(n) => format!("calls to {}", n.join(", ")),
        Matcher::Reference { exact, prefixes } => {
            let mut all = exact.clone();
            all.extend(prefixes.iter().map(|p| format!("{p}.*")));
            format!("references to {}", all.join(", "))
        }
        Matcher::Method(n) => format!("method calls .{}(...)", n.join("/.")),
        Matcher::Attribute(n) => format!("attributes .{}", n.join("/.")),
        Matcher::Keyword { names, calls } if calls.is_empty() => {
            format!("keyword {}=", names.join("=/"))
        }
        Matcher::Keyword { names, calls } => {
            format!("keyword {}= in {}", names.join("=/"), calls.join(", "))
        }
        Matcher::String {
            regex, positions, ..
        } => match positions {
            Some(p) => format!("strings /{}/ in {} positions", regex.as_str(), p.join(", ")),
            None => format!("strings /{}/ anywhere", regex.as_str()),
        },
    }
}

fn indent(s: &str) -> String {
    s.trim_end()
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
