//! The commands about tpuport itself: `--version` (the build: version, commit, and the CPython
//! versions of the workers beside this executable), `tpuport completions SHELL` (clap_complete)
//! and `tpuport man` (clap_mangen), all generated from the clap definitions in `cli.rs`.

use std::path::PathBuf;

use anyhow::Result;

/// Parse the command line; `--version` names the build: version, commit, and the CPython
/// versions the workers next to this executable embed (others run as `python -m
/// tpuport_agent`). Worked out only when asked, as it starts each worker once.
pub(crate) fn parse<C: clap::Parser>() -> C {
    let mut cmd = C::command();
    if std::env::args().skip(1).any(|a| a == "--version") {
        cmd = cmd.long_version(Box::leak(long_version().into_boxed_str()) as &str);
    }
    let matches = cmd.get_matches();
    C::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn long_version() -> String {
    let workers = tpuport::runtime::worker::installed();
    let embedded = if workers.is_empty() {
        "none (no tpuport-worker next to tpuport)".to_string()
    } else {
        workers
            .iter()
            .map(|(v, exe)| {
                format!(
                    "{v} ({})",
                    exe.file_name().unwrap_or_default().to_string_lossy()
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{} (commit {}, {} {})\nembedded CPython: {embedded}; any other Python 3.11+ runs the agent as `python -m tpuport_agent`",
        env!("CARGO_PKG_VERSION"),
        env!("TPUPORT_COMMIT"),
        std::env::consts::OS,
        std::env::consts::ARCH,
    )
}

pub(crate) fn completions<C: clap::CommandFactory>(a: crate::cli::CompletionsArgs) -> Result<u8> {
    let mut cmd = C::command();
    // Into a buffer first: clap_complete panics on a write error (`| head` closing the pipe).
    let mut out = vec![];
    clap_complete::generate(a.shell, &mut cmd, "tpuport", &mut out);
    std::io::Write::write_all(&mut std::io::stdout().lock(), &out)?;
    Ok(0)
}

pub(crate) fn man<C: clap::CommandFactory>(a: crate::cli::ManArgs) -> Result<u8> {
    tpuport::profile::report::writable_folder(&a.output, "folder for the man pages", "-o")?;
    let cmd = C::command();
    let mut written = vec![];
    write_man(&cmd, "tpuport", &a.output, &mut written)?;
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    for p in written {
        writeln!(stdout, "{}", p.display())?;
    }
    Ok(0)
}

/// `name.1` for `cmd`, then one page per visible subcommand (`tpuport-migrate.1`).
fn write_man(
    cmd: &clap::Command,
    name: &str,
    dir: &std::path::Path,
    written: &mut Vec<PathBuf>,
) -> Result<()> {
    // A page's name is its file's (`tpuport-migrate`); clap keeps names as 'static strings.
    let page = cmd
        .clone()
        .name(&*Box::leak(name.to_string().into_boxed_str()));
    let mut out = vec![];
    clap_mangen::Man::new(page).render(&mut out)?;
    let path = dir.join(format!("{name}.1"));
    tpuport::profile::report::write_atomic(&path, &out)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        write_man(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
