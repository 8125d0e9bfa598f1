//! `tpuport report RUN.jsonl [OTHER.jsonl] -o DIR`: charts (SVG and PNG) and a Markdown summary
//! of one run, or of two runs side by side with their ratios (an A/B such as strict vs
//! defer-fuse). The numbers come from [`Summary`](super::summary::Summary) through the
//! [`Aggregator`], as in the end-of-run summary and the dashboard. Every file is written to a
//! temporary file in `DIR` first and then renamed, so none is ever half-written.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::aggregate::Aggregator;
use super::breakdown::{Breakdown, PHASES};
use super::charts;
use super::follow;
use super::ranks::{self, RankRow};
use super::summary::bytes;

/// One run of the report.
pub struct Run {
    pub label: String,
    pub path: PathBuf,
    pub agg: Aggregator,
}

/// The key table's numbers for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyNumbers {
    pub steps: u64,
    pub median: Option<f64>,
    pub p90: Option<f64>,
    pub compiles: u64,
    pub recompiles: u64,
    pub compile_seconds: f64,
    pub peak: Option<(u64, &'static str)>,
    pub capacity: Option<u64>,
    pub syncs_per_step: Option<f64>,
    pub top_reasons: Vec<(String, u64)>,
}

impl KeyNumbers {
    pub fn of(a: &Aggregator) -> KeyNumbers {
        let s = &a.summary;
        KeyNumbers {
            steps: s.steps,
            median: s.median_step(),
            p90: s.p90_step(),
            compiles: s.compiles,
            recompiles: s.recompiles,
            compile_seconds: s.compile_seconds,
            peak: a.peak_memory(),
            capacity: a.capacity(),
            syncs_per_step: s.syncs_per_step(),
            top_reasons: a
                .top_reasons(5)
                .into_iter()
                .map(|(r, n)| (r.to_string(), n))
                .collect(),
        }
    }
}

/// Load the runs (one or two files) and name them: by mode when the modes differ, else by file.
pub fn load_runs(paths: &[PathBuf]) -> Result<Vec<Run>> {
    if paths.is_empty() || paths.len() > 2 {
        bail!("give one events file, or two to compare (A/B)");
    }
    let mut runs = vec![];
    for p in paths {
        let agg = follow::load(p)?;
        if agg.run_start().is_none() && agg.summary.steps == 0 {
            let why = match agg.skipped.describe() {
                Some(d) => format!("; {d}"),
                None => String::new(),
            };
            bail!(
                "{}: no events in this file{why}; pass a file written by `tpuport run --events`",
                p.display()
            );
        }
        runs.push(Run {
            label: String::new(),
            path: p.clone(),
            agg,
        });
    }
    let modes: Vec<String> = runs
        .iter()
        .map(|r| {
            r.agg
                .run_start()
                .map(|s| s.mode.clone())
                .unwrap_or_default()
        })
        .collect();
    let by_mode = runs.len() == 2 && modes[0] != modes[1] && !modes.iter().any(String::is_empty);
    for (i, r) in runs.iter_mut().enumerate() {
        let stem = r
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let tag = if paths.len() == 2 {
            ["A: ", "B: "][i]
        } else {
            ""
        };
        r.label = if by_mode {
            format!("{tag}{}", modes[i])
        } else {
            format!("{tag}{stem}")
        };
    }
    Ok(runs)
}

pub fn ms(s: Option<f64>) -> String {
    s.map(|s| format!("{:.3} ms", s * 1e3))
        .unwrap_or_else(|| "-".into())
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => format!("{:.3}", b / a),
        _ => "-".into(),
    }
}

fn peak_cell(k: &KeyNumbers) -> String {
    match (k.peak, k.capacity) {
        (Some((p, "device")), Some(c)) => format!(
            "{} of {} ({:.1}%)",
            bytes(p),
            bytes(c),
            p as f64 * 100.0 / c as f64
        ),
        (Some((p, what)), _) => format!("{} ({what})", bytes(p)),
        (None, _) => "-".into(),
    }
}

/// The Markdown summary: the key table (with B/A ratios for two runs), the top recompile
/// reasons, and the charts.
pub fn markdown(runs: &[Run], charts: &[(&str, &str)]) -> String {
    let keys: Vec<KeyNumbers> = runs.iter().map(|r| KeyNumbers::of(&r.agg)).collect();
    let two = runs.len() == 2;
    let mut o = String::new();
    let _ = writeln!(o, "# tpuport report\n");
    for r in runs {
        let rs = r.agg.run_start();
        let _ = writeln!(
            o,
            "- **{}**: `{}`: script `{}`, target {}, chip {}, mode {}, precision {}{}",
            r.label,
            r.path.display(),
            rs.map(|s| s.script.as_str()).unwrap_or("?"),
            rs.map(|s| s.target.as_str()).unwrap_or("?"),
            rs.and_then(|s| s.chip.as_deref()).unwrap_or("?"),
            rs.map(|s| s.mode.as_str()).unwrap_or("?"),
            rs.map(|s| s.precision.as_str()).unwrap_or("?"),
            r.agg
                .run_end()
                .map(|e| format!(", ended {} (exit {})", e.status, e.exit_code))
                .unwrap_or_else(|| ", no run_end (still running, or cut short)".into()),
        );
        if let Some(d) = r.agg.skipped.describe() {
            let _ = writeln!(o, "  - {d}");
        }
    }
    let _ = writeln!(o);
    table_head(&mut o, "", runs);
    let mut row = |name: &str, cells: Vec<String>, r: Option<String>| {
        let _ = write!(o, "| {name} |");
        for c in cells {
            let _ = write!(o, " {c} |");
        }
        if two {
            let _ = write!(o, " {} |", r.unwrap_or_else(|| "-".into()));
        }
        let _ = writeln!(o);
    };
    let pair = |f: &dyn Fn(&KeyNumbers) -> Option<f64>| -> Option<String> {
        two.then(|| ratio(f(&keys[0]), f(&keys[1])))
    };
    row(
        "steps",
        keys.iter().map(|k| k.steps.to_string()).collect(),
        pair(&|k| Some(k.steps as f64)),
    );
    row(
        "median step time",
        keys.iter().map(|k| ms(k.median)).collect(),
        pair(&|k| k.median),
    );
    row(
        "p90 step time",
        keys.iter().map(|k| ms(k.p90)).collect(),
        pair(&|k| k.p90),
    );
    row(
        "compiles (recompiles)",
        keys.iter()
            .map(|k| format!("{} ({})", k.compiles, k.recompiles))
            .collect(),
        pair(&|k| Some(k.compiles as f64)),
    );
    row(
        "total compile time",
        keys.iter()
            .map(|k| format!("{:.3} s", k.compile_seconds))
            .collect(),
        pair(&|k| Some(k.compile_seconds)),
    );
    row(
        "peak HBM vs capacity",
        keys.iter().map(peak_cell).collect(),
        pair(&|k| k.peak.map(|p| p.0 as f64)),
    );
    row(
        "host syncs per step",
        keys.iter()
            .map(|k| {
                k.syncs_per_step
                    .map(|s| format!("{s:.2}"))
                    .unwrap_or_else(|| "-".into())
            })
            .collect(),
        pair(&|k| k.syncs_per_step),
    );
    let _ = writeln!(
        o,
        "\nStep times leave out the first step (start-up and first compiles) when there are more than two."
    );
    breakdown_section(&mut o, runs);
    let _ = writeln!(o, "\n## Top recompile reasons\n");
    for (r, k) in runs.iter().zip(&keys) {
        let _ = writeln!(o, "**{}**\n", r.label);
        if k.top_reasons.is_empty() {
            let _ = writeln!(o, "- none\n");
            continue;
        }
        for (reason, n) in &k.top_reasons {
            let _ = writeln!(o, "- {n} × `{reason}`");
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "## Charts\n");
    for (name, title) in charts {
        let _ = writeln!(o, "![{title}]({name}.svg) ([PNG]({name}.png))\n");
    }
    o
}

/// A table's header and rule: a column per run, and B/A for two.
fn table_head(o: &mut String, first: &str, runs: &[Run]) {
    let mut header = if first.is_empty() {
        "| |".to_string()
    } else {
        format!("| {first} |")
    };
    let mut rule = String::from("| --- |");
    for r in runs {
        let _ = write!(header, " {} |", r.label);
        rule.push_str(" ---: |");
    }
    if runs.len() == 2 {
        header.push_str(" B/A |");
        rule.push_str(" ---: |");
    }
    let _ = writeln!(o, "{header}\n{rule}");
}

/// `## Where the step goes`: ms per step in each phase for each run (and B/A), when any run
/// measured its phases.
fn breakdown_section(o: &mut String, runs: &[Run]) {
    let b: Vec<Option<Breakdown>> = runs.iter().map(|r| r.agg.summary.breakdown()).collect();
    if b.iter().all(Option::is_none) {
        return;
    }
    let two = runs.len() == 2;
    let _ = writeln!(o, "\n## Where the step goes\n");
    table_head(o, "phase", runs);
    for (p, name) in PHASES.iter().enumerate() {
        let _ = write!(o, "| {name} |");
        for x in &b {
            let cell = x
                .map(|x| format!("{:.2} ms ({:.0} %)", x.mean[p] * 1e3, x.shares()[p] * 100.0))
                .unwrap_or_else(|| "-".into());
            let _ = write!(o, " {cell} |");
        }
        if two {
            let _ = write!(
                o,
                " {} |",
                ratio(b[0].map(|x| x.mean[p]), b[1].map(|x| x.mean[p]))
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "\nMeans over the steady steps. data: the DataLoader's next batch; forward: from the \
         model's first module call to the next phase (the loss included); backward: autograd; \
         optimizer: step, zero_grad, gradient clipping, GradScaler; sync: host syncs; other: the \
         rest of the script's loop (a batch built without a DataLoader, logging). Host times: on a \
         TPU, device work shows in the phase that waits for it."
    );
}

/// `## Ranks`: every rank of a multi-process run side by side, the dead ones and the straggler.
fn ranks_section(rows: &[RankRow]) -> String {
    let stats = ranks::whole_run(rows);
    let mut o = String::from("\n## Ranks\n\n");
    o.push_str(
        "| rank | status | steps | median step | p90 step | own work | in collectives | peak memory | events |\n",
    );
    o.push_str("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for (r, st) in rows.iter().zip(&stats) {
        let status = match (&st.died, &st.status) {
            (Some(d), _) => format!("died: {d}"),
            (None, Some(s)) => s.clone(),
            (None, None) => "no run_end".into(),
        };
        let _ = writeln!(
            o,
            "| {} | {status} | {} | {} | {} | {} | {} | {} | `{}` |",
            st.rank,
            st.steps,
            ms(st.median),
            ms(st.p90),
            ms(st.busy_median),
            ms(st.collective_median),
            st.peak.map(bytes).unwrap_or_else(|| "-".into()),
            r.file.file_name().unwrap_or_default().to_string_lossy()
        );
    }
    match ranks::straggler_line(&stats) {
        Some(line) => {
            let _ = writeln!(o, "\n**{line}.**");
        }
        None => {
            let _ = writeln!(
                o,
                "\nNo straggler: no rank's own work (step time less time in collectives) is {}× the others'.",
                ranks::STRAGGLER_RATIO
            );
        }
    }
    let _ = writeln!(
        o,
        "\nThe key table, charts and breakdown below are rank {}'s.",
        stats[0].rank
    );
    o
}

/// Write `bytes` to `path` atomically (temporary file in the same folder, then rename): the
/// file is whole or not there; on an error (a full disk) the temporary file is removed. Used for
/// the files of an `-o` folder, so the error says to choose another.
pub fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let fail = |e: &std::io::Error| {
        anyhow::anyhow!(
            "cannot write {} ({}); free some space there, or choose another folder with -o",
            path.display(),
            plain_io(e)
        )
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(&e))?;
    tmp.write_all(data)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// Why a folder could not be made, in words: `create_dir_all` says "File exists" or "Not a
/// directory" when a file stands where the folder (or one above it) would go.
pub fn folder_error(dir: &Path, e: &std::io::Error) -> String {
    use std::io::ErrorKind::{AlreadyExists, NotADirectory};
    if matches!(e.kind(), AlreadyExists | NotADirectory)
        && let Some(file) = dir.ancestors().find(|a| a.is_file())
    {
        return format!("{} is a file, not a folder", file.display());
    }
    e.to_string()
}

/// An I/O error without the temporary file's path some wrappers add: the person knows the
/// file they asked for, not ours.
fn plain_io(e: &std::io::Error) -> String {
    if let Some(code) = e.raw_os_error() {
        return std::io::Error::from_raw_os_error(code).to_string();
    }
    // tempfile's errors end with ` at path "<its temporary file>"`.
    let text = e.to_string();
    match text.find(" at path \"") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Make sure `dir` is a folder files can be written into (created if needed; a probe file is
/// made and removed), before any work goes into its files. The error names the folder, why,
/// and the flag that chooses another (`-o`).
pub fn writable_folder(dir: &Path, what: &str, flag: &str) -> Result<()> {
    if let Err(e) = std::fs::create_dir_all(dir) {
        bail!(
            "cannot create the {what} {} ({}); choose another with {flag}",
            dir.display(),
            folder_error(dir, &e)
        );
    }
    if let Err(e) = tempfile::Builder::new()
        .prefix(".tpuport-probe")
        .tempfile_in(dir)
    {
        bail!(
            "cannot write into the {what} {} ({}); choose a folder you can write to with {flag}",
            dir.display(),
            plain_io(&e)
        );
    }
    Ok(())
}

/// Render the report into `out`; returns the files written and notes for the user (the lines
/// skipped, with the first one's line number).
pub fn write_report(paths: &[PathBuf], out: &Path) -> Result<(Vec<PathBuf>, Vec<String>)> {
    // A run folder of `run --nproc` (rank<N>.jsonl): the lowest rank is the run, and a table
    // puts every rank side by side.
    writable_folder(out, "report folder", "-o")?;
    let (paths, ranks) = match paths {
        [dir] if dir.is_dir() => {
            let rows = ranks::read_folder(dir)?;
            let Some(first) = rows.first() else {
                bail!(
                    "{}: no rank<N>.jsonl files in this folder; pass a run folder of `tpuport run --nproc`, or an events file",
                    dir.display()
                );
            };
            (vec![first.file.clone()], rows)
        }
        _ => (paths.to_vec(), vec![]),
    };
    let runs = load_runs(&paths)?;
    let notes: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            Some(format!(
                "{}: {}",
                r.path.display(),
                r.agg.skipped.describe()?
            ))
        })
        .collect();
    let view: Vec<(&str, &Aggregator)> = runs.iter().map(|r| (r.label.as_str(), &r.agg)).collect();
    let specs = [
        ("step_time", charts::step_time(&view)),
        ("hbm", charts::memory(&view)),
        ("compiles", charts::compiles(&view)),
    ];
    let rendered: Vec<Result<(String, Vec<u8>)>> = {
        use rayon::prelude::*;
        specs
            .par_iter()
            .map(|(_, s)| Ok((charts::svg(s)?, charts::png(s)?)))
            .collect()
    };
    let mut written = vec![];
    let mut files = vec![];
    for ((name, _), r) in specs.iter().zip(rendered) {
        files.push((*name, r?));
    }
    let stacked = charts::breakdown(&view);
    if let Some(s) = &stacked {
        files.push(("breakdown", (charts::svg(s)?, charts::png(s)?)));
    }
    for (name, (svg, png)) in files {
        for (ext, data) in [("svg", svg.into_bytes()), ("png", png)] {
            let p = out.join(format!("{name}.{ext}"));
            write_atomic(&p, &data)?;
            written.push(p);
        }
    }
    let mut titles: Vec<(&str, &str)> = specs.iter().map(|(n, s)| (*n, s.title.as_str())).collect();
    if let Some(s) = &stacked {
        titles.push(("breakdown", s.title.as_str()));
    }
    let mut md = markdown(&runs, &titles);
    if !ranks.is_empty() {
        let at = md.find("\n## ").unwrap_or(md.len());
        md.insert_str(at, &ranks_section(&ranks));
    }
    let p = out.join("summary.md");
    write_atomic(&p, md.as_bytes())?;
    written.push(p);
    Ok((written, notes))
}
