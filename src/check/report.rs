//! The check's answer as people and CI read it: a terminal summary (a verdict per section), and
//! in the report folder `report.md`, `report.html` (self-contained: the charts inline as SVG),
//! `report.json` (the whole [`Checked`]), the charts as SVG files and `port.diff`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::charts;
use super::compare::LossRow;
use super::port::Port;
use super::verdict::{Checked, RunNumbers, Section, Verdict};
use crate::profile::aggregate::Aggregator;
use crate::profile::report::write_atomic;
use crate::profile::summary::bytes;

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Ready => "✔",
        Verdict::NeedsWork => "▲",
        Verdict::Blocked => "✖",
    }
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.6}"),
        Some(x) => format!("{x}"),
        None => "–".into(),
    }
}

/// A loss row as text: step, original, port, relative difference.
fn loss_cells(r: &LossRow) -> [String; 4] {
    let rel = r
        .rel
        .map(|d| format!("{d:.2e}"))
        .unwrap_or_else(|| "–".into());
    [r.step.to_string(), num(r.original), num(r.port), rel]
}

fn target_words(target: &str) -> &'static str {
    match target {
        "xla-cpu" => "xla-cpu",
        "tpu" => "the TPU",
        _ => "the sim",
    }
}

/// A loss exactly as recorded (the shortest decimal that reads back as the same number).
fn exact(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x}"))
}

/// The original machine's rows: step, original, port on the host, the same bit for bit.
fn machine_cells(r: &LossRow) -> [String; 4] {
    let same = match (r.original, r.port) {
        (Some(o), Some(p)) if super::compare::same_bits(o, p) => "✔ same",
        _ => "✖ differs",
    };
    [
        r.step.to_string(),
        exact(r.original),
        exact(r.port),
        same.into(),
    ]
}

/// The terminal summary.
pub fn text(c: &Checked, out: Option<&Path>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ntpuport check {}: {} ({} steps each: the original on the host, the port there and on {})",
        c.script,
        c.verdict.as_str().to_uppercase(),
        c.steps_asked,
        target_words(&c.port.target)
    );
    for sec in &c.sections {
        let _ = writeln!(
            s,
            "  {} {:<19} {:<11} {}",
            mark(sec.verdict),
            sec.name,
            sec.verdict.as_str(),
            sec.summary
        );
        for item in sec.items.iter().take(8) {
            let _ = writeln!(s, "        {item}");
        }
        if sec.items.len() > 8 {
            let _ = writeln!(s, "        … {} more in the report", sec.items.len() - 8);
        }
    }
    if !c.losses.is_empty() {
        let _ = writeln!(s, "  loss by step (original | port | relative difference):");
        for r in c.losses.iter().take(10) {
            let [step, o, p, d] = loss_cells(r);
            let _ = writeln!(s, "        {step:>4}  {o:>12} | {p:>12} | {d}");
        }
    }
    match out {
        Some(o) => {
            let _ = writeln!(
                s,
                "report: {} (and report.html, report.json)",
                o.join("report.md").display()
            );
        }
        None => {
            let _ = writeln!(s, "(pass -o DIR for the report with charts)");
        }
    }
    s
}

fn section_md(s: &mut String, sec: &Section) {
    let _ = writeln!(
        s,
        "### {} {}: {}\n\n{}\n",
        mark(sec.verdict),
        sec.name,
        sec.verdict.as_str(),
        sec.summary
    );
    for item in &sec.items {
        let _ = writeln!(s, "- `{}`", item.replace('`', "'"));
    }
    if !sec.items.is_empty() {
        s.push('\n');
    }
}

/// `report.md`.
pub fn markdown(c: &Checked) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# tpuport check: `{}`\n\n**Verdict: {}** — {} steps each; arguments: `{}`\n",
        c.script,
        c.verdict.as_str(),
        c.steps_asked,
        c.args.join(" ")
    );
    let _ = writeln!(s, "| section | verdict | summary |\n| --- | --- | --- |");
    for sec in &c.sections {
        let _ = writeln!(
            s,
            "| {} | {} {} | {} |",
            sec.name,
            mark(sec.verdict),
            sec.verdict.as_str(),
            sec.summary.replace('|', "\\|")
        );
    }
    s.push('\n');
    let _ = writeln!(s, "## The three runs\n");
    let _ = writeln!(
        s,
        "| | original (host) | port (host) | port ({}) |\n| --- | --- | --- | --- |",
        c.port.target
    );
    let runs = [&c.original, &c.port_on_host, &c.port];
    let row = |s: &mut String, k: &str, cell: &dyn Fn(&RunNumbers) -> String| {
        let cells: Vec<String> = runs.iter().map(|r| cell(r)).collect();
        let _ = writeln!(s, "| {k} | {} |", cells.join(" | "));
    };
    row(&mut s, "exit", &|r| {
        format!("{} ({})", r.exit_code, r.status)
    });
    row(&mut s, "steps", &|r| r.steps.to_string());
    row(&mut s, "median step", &|r| {
        r.median_step_s
            .map(|x| format!("{:.1} ms", x * 1e3))
            .unwrap_or_else(|| "–".into())
    });
    row(&mut s, "compiles (recompiles)", &|r| {
        format!("{} ({})", r.compiles, r.recompiles)
    });
    row(&mut s, "host syncs per step", &|r| {
        r.syncs_per_step
            .map(|x| format!("{x:.1}"))
            .unwrap_or_else(|| "–".into())
    });
    row(&mut s, "peak device memory", &|r| {
        r.peak_device_bytes.map(bytes).unwrap_or_else(|| "–".into())
    });
    s.push('\n');
    original_machine_md(&mut s, c);
    let _ = writeln!(
        s,
        "## The original against the port on {}\n\n![loss](loss.svg)\n",
        target_words(&c.port.target)
    );
    let _ = writeln!(
        s,
        "| step | original loss | port loss | relative difference |\n| --- | --- | --- | --- |"
    );
    for r in &c.losses {
        let _ = writeln!(s, "| {} |", loss_cells(r).join(" | "));
    }
    s.push('\n');
    if !c.layers.is_empty() {
        let _ = writeln!(
            s,
            "## Layer by layer, step 1\n\nEach module's output in the port against the original's (call order; float32 `assert_close` defaults rtol=1.3e-6, atol=1e-5 for the mismatch count).\n"
        );
        let _ = writeln!(
            s,
            "| # | module | class | shape | rel. difference | mismatched | worst abs | worst rel | passes with atol / rtol |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for l in &c.layers {
            let first = c
                .first_diverging_layer
                .as_ref()
                .is_some_and(|d| d.index == l.index);
            let _ = writeln!(
                s,
                "| {} | {}{} | {} | {:?} | {:.2e} | {:.1} % | {:.2e} | {:.2e} | {:.1e} / {:.1e} |",
                l.index,
                if first { "**first diverging** " } else { "" },
                l.name,
                l.class,
                l.shape,
                l.rel_fro,
                l.mismatched_pct(),
                l.max_abs,
                l.max_rel,
                l.atol_to_pass,
                l.rtol_to_pass
            );
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Sections\n");
    for sec in &c.sections {
        section_md(&mut s, sec);
    }
    let _ = writeln!(s, "![HBM per chip](hbm.svg)\n");
    match no_compiles(c) {
        Some(note) => {
            let _ = writeln!(s, "{note}\n");
        }
        None => {
            let _ = writeln!(s, "![compiles](compiles.svg)\n");
        }
    }
    let _ = writeln!(
        s,
        "The port's changes: [port.diff](port.diff); the copies and the three events files: `work/`, `original.jsonl`, `port-host.jsonl`, `port.jsonl`."
    );
    s
}

/// The port on the original's machine: its losses beside the original's, bit for bit, and the
/// stdout lines that differ.
fn original_machine_md(s: &mut String, c: &Checked) {
    let m = &c.original_machine;
    let _ = writeln!(
        s,
        "## Original machine\n\nThe port on {}, where the original ran, same seeds and arguments: each step's loss must be the original's, bit for bit, and the stdout the same (timings, clock times, addresses and the folder masked).\n",
        m.machine
    );
    if let Some(f) = &m.failure {
        let _ = writeln!(
            s,
            "The port failed there{}: `{}`\n",
            match (&f.at, &f.code) {
                (Some(a), Some(code)) => format!(" at {a}, `{}`", code.replace('`', "'")),
                (Some(a), None) => format!(" at {a}"),
                _ => String::new(),
            },
            f.error.replace('`', "'")
        );
    }
    if m.losses.iter().any(|r| r.port.is_some()) {
        let _ = writeln!(
            s,
            "| step | original loss | port loss (host) | bit for bit |\n| --- | --- | --- | --- |"
        );
        for r in &m.losses {
            let _ = writeln!(s, "| {} |", machine_cells(r).join(" | "));
        }
        s.push('\n');
    }
    for d in &m.stdout.differences {
        let _ = writeln!(s, "- `{}`", d.describe().replace('`', "'"));
    }
    if !m.stdout.differences.is_empty() {
        s.push('\n');
    }
}

/// What the report says in place of the compiles chart when the port compiled nothing (an
/// empty chart would say it less clearly).
fn no_compiles(c: &Checked) -> Option<String> {
    (c.port.compiles == 0).then(|| {
        "Compiles over time: no compiles (the port's run compiled nothing, so there is no chart)."
            .to_string()
    })
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `report.html`: the Markdown's content as a self-contained page (charts inline).
pub fn html(c: &Checked, svgs: &[(&str, &str)]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tpuport check: {}</title>\n<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}}table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}.ready{{color:#1a7f37}}.needs-work{{color:#9a6700}}.blocked{{color:#cf222e}}code{{font-size:90%}}svg{{max-width:100%;height:auto}}</style></head><body>\n",
        esc(&c.script)
    );
    let class = |v: Verdict| match v {
        Verdict::Ready => "ready",
        Verdict::NeedsWork => "needs-work",
        Verdict::Blocked => "blocked",
    };
    let _ = writeln!(
        s,
        "<h1>tpuport check: <code>{}</code></h1>\n<p id=\"verdict\" class=\"{}\"><strong>Verdict: {}</strong> ({} steps each)</p>",
        esc(&c.script),
        class(c.verdict),
        c.verdict.as_str(),
        c.steps_asked
    );
    let _ = writeln!(
        s,
        "<table id=\"sections\"><tr><th>section</th><th>verdict</th><th>summary</th></tr>"
    );
    for sec in &c.sections {
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td class=\"{}\">{} {}</td><td>{}</td></tr>",
            sec.name,
            class(sec.verdict),
            mark(sec.verdict),
            sec.verdict.as_str(),
            esc(&sec.summary)
        );
    }
    s.push_str("</table>\n");
    for (name, svg) in svgs {
        let body = svg.find("<svg").map(|i| &svg[i..]).unwrap_or(svg);
        let _ = writeln!(s, "<figure id=\"chart-{name}\">{body}</figure>");
    }
    if let Some(note) = no_compiles(c) {
        let _ = writeln!(s, "<p id=\"chart-compiles\">{}</p>", esc(&note));
    }
    let m = &c.original_machine;
    let _ = writeln!(
        s,
        "<h2>Original machine</h2><p>The port on {}, where the original ran, same seeds and arguments: each step's loss must be the original's, bit for bit.</p>",
        esc(&m.machine)
    );
    if m.losses.iter().any(|r| r.port.is_some()) {
        let _ = writeln!(
            s,
            "<table id=\"original-machine\"><tr><th>step</th><th>original loss</th><th>port loss (host)</th><th>bit for bit</th></tr>"
        );
        for r in &m.losses {
            let _ = writeln!(
                s,
                "<tr><td>{}</td></tr>",
                machine_cells(r).join("</td><td>")
            );
        }
        s.push_str("</table>\n");
    }
    let _ = writeln!(
        s,
        "<h2>Loss by step</h2><table id=\"losses\"><tr><th>step</th><th>original</th><th>port</th><th>relative difference</th></tr>"
    );
    for r in &c.losses {
        let _ = writeln!(s, "<tr><td>{}</td></tr>", loss_cells(r).join("</td><td>"));
    }
    s.push_str("</table>\n");
    if let Some(l) = &c.first_diverging_layer {
        let _ = writeln!(
            s,
            "<p id=\"first-diverging\">First diverging layer on step 1: #{} <code>{}</code> ({}), relative difference {:.2e}</p>",
            l.index,
            esc(&l.name),
            esc(&l.class),
            l.rel_fro
        );
    }
    for sec in &c.sections {
        let _ = writeln!(
            s,
            "<h2 class=\"{}\">{} {}: {}</h2><p>{}</p><ul>",
            class(sec.verdict),
            mark(sec.verdict),
            sec.name,
            sec.verdict.as_str(),
            esc(&sec.summary)
        );
        for item in &sec.items {
            let _ = writeln!(s, "<li><code>{}</code></li>", esc(item));
        }
        s.push_str("</ul>\n");
    }
    s.push_str("</body></html>\n");
    s
}

fn aggregate(path: &Path) -> Aggregator {
    crate::profile::follow::load(path).unwrap_or_default()
}

/// Write the report files into `out` (`full`: a report folder the user asked for).
pub fn write(out: &Path, c: &Checked, port: &Port, full: bool) -> Result<()> {
    if !full {
        return Ok(());
    }
    let loss = charts::losses(&c.losses)?;
    let hbm = charts::hbm(&c.fit)?;
    let compiles = match no_compiles(c) {
        None => Some(charts::compiles(&aggregate(&out.join("port.jsonl")))?),
        Some(_) => None,
    };
    write_atomic(&out.join("loss.svg"), loss.as_bytes())?;
    write_atomic(&out.join("hbm.svg"), hbm.as_bytes())?;
    let mut svgs = vec![("loss", loss.as_str()), ("hbm", hbm.as_str())];
    match &compiles {
        Some(svg) => {
            write_atomic(&out.join("compiles.svg"), svg.as_bytes())?;
            svgs.push(("compiles", svg));
        }
        // No chart: the report says "no compiles" (and an older report's chart goes; the
        // report does not link it, so a failure to remove it is no failure of the report).
        None => {
            let _ = std::fs::remove_file(out.join("compiles.svg"));
        }
    }
    write_atomic(&out.join("port.diff"), port.diff.as_bytes())?;
    write_atomic(&out.join("report.md"), markdown(c).as_bytes())?;
    let page = html(c, &svgs);
    write_atomic(&out.join("report.html"), page.as_bytes())?;
    write_atomic(
        &out.join("report.json"),
        serde_json::to_string_pretty(c)?.as_bytes(),
    )?;
    Ok(())
}
