//! The check's answer as people and CI read it: a terminal summary (a verdict per section), and
//! in the report folder `report.md`, `report.html` (self-contained: the charts inline as SVG),
//! `report.json` (the whole [`Checked`]), the charts as SVG files and `port.diff`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::charts;
use super::compare::LossRow;
use super::port::Port;
use super::verdict::{Checked, Section, Verdict};
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

/// The terminal summary.
pub fn text(c: &Checked, out: Option<&Path>) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\ntpuport check {}: {} ({} steps each: the original on the host, the port on the sim)",
        c.script,
        c.verdict.as_str().to_uppercase(),
        c.steps_asked
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
    let _ = writeln!(s, "## The two runs\n");
    let _ = writeln!(s, "| | original (host) | port (sim) |\n| --- | --- | --- |");
    let (o, p) = (&c.original, &c.port);
    let row = |s: &mut String, k: &str, a: String, b: String| {
        let _ = writeln!(s, "| {k} | {a} | {b} |");
    };
    row(
        &mut s,
        "exit",
        format!("{} ({})", o.exit_code, o.status),
        format!("{} ({})", p.exit_code, p.status),
    );
    row(&mut s, "steps", o.steps.to_string(), p.steps.to_string());
    let ms = |v: Option<f64>| {
        v.map(|x| format!("{:.1} ms", x * 1e3))
            .unwrap_or_else(|| "–".into())
    };
    row(
        &mut s,
        "median step",
        ms(o.median_step_s),
        ms(p.median_step_s),
    );
    row(
        &mut s,
        "compiles (recompiles)",
        format!("{} ({})", o.compiles, o.recompiles),
        format!("{} ({})", p.compiles, p.recompiles),
    );
    let per = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "–".into());
    row(
        &mut s,
        "host syncs per step",
        per(o.syncs_per_step),
        per(p.syncs_per_step),
    );
    let b = |v: Option<u64>| v.map(bytes).unwrap_or_else(|| "–".into());
    row(
        &mut s,
        "peak device memory",
        b(o.peak_device_bytes),
        b(p.peak_device_bytes),
    );
    s.push('\n');
    let _ = writeln!(s, "![loss](loss.svg)\n");
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
    let _ = writeln!(s, "![HBM per chip](hbm.svg)\n\n![compiles](compiles.svg)\n");
    let _ = writeln!(
        s,
        "The port's changes: [port.diff](port.diff); the copies and both events files: `work/`, `original.jsonl`, `port.jsonl`."
    );
    s
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
    let compiles = charts::compiles(&aggregate(&out.join("port.jsonl")))?;
    write_atomic(&out.join("loss.svg"), loss.as_bytes())?;
    write_atomic(&out.join("hbm.svg"), hbm.as_bytes())?;
    write_atomic(&out.join("compiles.svg"), compiles.as_bytes())?;
    write_atomic(&out.join("port.diff"), port.diff.as_bytes())?;
    write_atomic(&out.join("report.md"), markdown(c).as_bytes())?;
    let page = html(
        c,
        &[("loss", &loss), ("hbm", &hbm), ("compiles", &compiles)],
    );
    write_atomic(&out.join("report.html"), page.as_bytes())?;
    write_atomic(
        &out.join("report.json"),
        serde_json::to_string_pretty(c)?.as_bytes(),
    )?;
    Ok(())
}
