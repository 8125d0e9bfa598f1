//! Drawing the dashboard: one function per pane, each reading the aggregated data
//! ([`Aggregator`]) and the view state ([`App`]) and writing into a ratatui frame. Nothing here
//! changes state, so any screen can be drawn into a `TestBackend` from a recorded stream.

use ratatui::Frame;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Cell, Chart, Clear, Dataset, Gauge, GraphType, Paragraph, Row, Table, Wrap,
};

use super::app::{App, Pane};
use crate::profile::aggregate::{Aggregator, MemPoint, WindowStats};
use crate::profile::summary::bytes;

/// What the frame needs besides the data and the view state.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Seconds since the run started, by the clock (live) or the latest event (replay).
    pub elapsed: f64,
    /// `tpuport top`: which file is shown (`rank0.jsonl (1/4)`).
    pub source: Option<String>,
}

pub fn draw(f: &mut Frame, app: &App, agg: &Aggregator, ctx: &Context) {
    let area = f.area();
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, header, app, agg, ctx);
    if app.show_summary && app.ended {
        draw_summary(f, body, agg);
    } else {
        let [top, middle, bottom] = Layout::vertical([
            Constraint::Percentage(38),
            Constraint::Percentage(30),
            Constraint::Fill(1),
        ])
        .areas(body);
        let [steps, memory] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(top);
        let [compiles, syncs] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(middle);
        let view = app.view(agg.last_t);
        let stats = agg.window_stats(view.0, view.1);
        draw_steps(f, steps, app, agg, view, &stats);
        draw_memory(f, memory, app, agg, view);
        draw_compiles(f, compiles, app, agg);
        draw_syncs(f, syncs, app, agg, &stats);
        draw_output(f, bottom, app, agg);
    }
    draw_footer(f, footer, app, agg);
    if app.help {
        draw_help(f, area);
    } else if app.confirm_quit {
        draw_confirm(f, area);
    }
}

fn pane_block<'a>(title: &'a str, app: &App, pane: Pane) -> Block<'a> {
    let b = Block::bordered().title(Span::styled(
        format!(" {title} "),
        Style::new().add_modifier(Modifier::BOLD),
    ));
    if app.focus == pane {
        b.border_style(Style::new().fg(Color::Cyan))
    } else {
        b.border_style(Style::new().fg(Color::DarkGray))
    }
}

fn status_of(app: &App, agg: &Aggregator) -> (String, Color) {
    match agg.run_end() {
        Some(e) => {
            let c = if e.status == "ok" {
                Color::Green
            } else {
                Color::Red
            };
            (format!("{} (exit {})", e.status, e.exit_code), c)
        }
        None if agg.run_start().is_none() => ("waiting for run_start".into(), Color::Yellow),
        None if app.leaving => ("stopping".into(), Color::Yellow),
        None => ("running".into(), Color::Green),
    }
}

fn draw_header(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, ctx: &Context) {
    let rs = agg.run_start();
    let get = |v: Option<&str>| v.unwrap_or("?").to_string();
    let (status, color) = status_of(app, agg);
    let label = Style::new().fg(Color::DarkGray);
    let mut first = vec![
        Span::styled("tpuport ", Style::new().bold().fg(Color::Cyan)),
        Span::styled(get(rs.map(|s| s.script.as_str())), Style::new().bold()),
        Span::styled("  target ", label),
        Span::raw(get(rs.map(|s| s.target.as_str()))),
        Span::styled("  chip ", label),
        Span::raw(get(rs.and_then(|s| s.chip.as_deref()))),
        Span::styled("  mode ", label),
        Span::raw(get(rs.map(|s| s.mode.as_str()))),
        Span::styled("  precision ", label),
        Span::raw(get(rs.map(|s| s.precision.as_str()))),
    ];
    if let Some(src) = &ctx.source {
        first.push(Span::styled("  file ", label));
        first.push(Span::raw(src.clone()));
    }
    let elapsed = agg.run_end().map(|e| e.duration).unwrap_or(ctx.elapsed);
    let mut second = vec![
        Span::styled("elapsed ", label),
        Span::raw(duration(elapsed)),
        Span::styled("  step ", label),
        Span::styled(agg.summary.steps.to_string(), Style::new().bold()),
        Span::styled("  status ", label),
        Span::styled(status, Style::new().fg(color).bold()),
    ];
    if app.frozen_at.is_some() {
        second.push(Span::styled(
            "  FROZEN",
            Style::new().fg(Color::Black).bg(Color::Yellow).bold(),
        ));
    }
    if agg.malformed > 0 {
        second.push(Span::styled(
            format!("  {} malformed lines skipped", agg.malformed),
            Style::new().fg(Color::Red),
        ));
    }
    let p = Paragraph::new(vec![Line::from(first), Line::from(second)])
        .block(Block::new().borders(ratatui::widgets::Borders::BOTTOM));
    f.render_widget(p, area);
}

/// At most `n` points from `values` (x, y), keeping each bucket's highest y so spikes show.
fn downsample(xs: &[f64], ys: impl Fn(usize) -> f64, n: usize) -> Vec<(f64, f64)> {
    let len = xs.len();
    if len == 0 || n == 0 {
        return vec![];
    }
    if len <= n {
        return (0..len).map(|i| (xs[i], ys(i))).collect();
    }
    let mut out = Vec::with_capacity(n);
    for b in 0..n {
        let (lo, hi) = (b * len / n, ((b + 1) * len / n).max(b * len / n + 1));
        let mut best = lo;
        for i in lo..hi {
            if ys(i) > ys(best) {
                best = i;
            }
        }
        out.push((xs[best], ys(best)));
    }
    out
}

fn draw_steps(
    f: &mut Frame,
    area: Rect,
    app: &App,
    agg: &Aggregator,
    view: (f64, f64),
    stats: &WindowStats,
) {
    let block = pane_block("Step time", app, Pane::Steps);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [text, chart_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(inner);
    let mut parts = vec![Span::raw(format!(
        "{} steps in {}",
        stats.steps,
        duration(view.1 - view.0)
    ))];
    if let (Some(p50), Some(p90)) = (stats.p50, stats.p90) {
        parts.push(Span::raw("  p50 "));
        parts.push(Span::styled(ms(p50), Style::new().bold().fg(Color::Green)));
        parts.push(Span::raw("  p90 "));
        parts.push(Span::styled(ms(p90), Style::new().bold().fg(Color::Yellow)));
    }
    if let Some(r) = stats.samples_per_s {
        parts.push(Span::raw(format!("  {} samples/s", rate(r))));
    }
    if let Some(r) = stats.tokens_per_s {
        parts.push(Span::raw(format!("  {} tokens/s", rate(r))));
    }
    if let Some(first) = agg.summary.step_times.first()
        && agg.summary.step_times.len() > 2
        && agg.step_t.first().is_some_and(|&t| t >= view.0)
    {
        parts.push(Span::styled(
            format!("  (step 1: {}, not charted)", ms(*first)),
            Style::new().fg(Color::DarkGray),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(parts)), text);
    let (mut a, b) = (
        agg.step_index_at(view.0),
        agg.step_t.partition_point(|&x| x <= view.1),
    );
    let times = &agg.summary.step_times;
    // Like the numbers, the chart leaves out the first step (start-up and first compiles),
    // which would flatten everything else.
    if a == 0 && times.len() > 2 && b > 1 {
        a = 1;
    }
    if a >= b || chart_area.height < 3 {
        f.render_widget(
            Paragraph::new("no steps in this window yet").fg(Color::DarkGray),
            chart_area,
        );
        return;
    }
    let steps: Vec<f64> = (a + 1..=b).map(|i| i as f64).collect();
    let points = downsample(
        &steps,
        |i| times[a + i] * 1e3,
        (chart_area.width as usize * 2).max(1),
    );
    let (x0, x1) = ((a + 1) as f64, (b as f64).max(a as f64 + 2.0));
    let ymax = points
        .iter()
        .map(|p| p.1)
        .fold(stats.p90.unwrap_or(0.0) * 1e3, f64::max)
        .max(1e-3)
        * 1.1;
    let hline = |v: f64| vec![(x0, v * 1e3), (x1, v * 1e3)];
    let p50 = stats.p50.map(hline).unwrap_or_default();
    let p90 = stats.p90.map(hline).unwrap_or_default();
    let datasets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Cyan))
            .data(&points),
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Green))
            .data(&p50),
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Yellow))
            .data(&p90),
    ];
    let chart = Chart::new(datasets)
        .x_axis(
            Axis::default()
                .bounds([x0, x1])
                .labels([format!("step {}", a + 1), format!("step {b}")])
                .style(Style::new().fg(Color::DarkGray)),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, ymax])
                .labels(["0".to_string(), format!("{ymax:.0}ms")])
                .style(Style::new().fg(Color::DarkGray)),
        );
    f.render_widget(chart, chart_area);
}

fn draw_memory(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, view: (f64, f64)) {
    let block = pane_block("HBM", app, Pane::Memory);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [gauge_area, note_area, chart_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    let cap = agg.capacity();
    // Device memory where any was reported, else the process RSS. Only the window is copied.
    let device = agg.summary.peak_device.is_some();
    let what = if device { "device" } else { "RSS" };
    let value = |m: &MemPoint| if device { m.device() } else { m.rss() };
    let a = agg.memory.partition_point(|m| m.t < view.0);
    let b = agg.memory.partition_point(|m| m.t <= view.1);
    let series: Vec<(f64, u64)> = agg.memory[a..b]
        .iter()
        .filter_map(|m| value(m).map(|v| (m.t, v)))
        .collect();
    let current = agg.memory.iter().rev().find_map(value);
    let peak = if device {
        agg.summary.peak_device
    } else {
        agg.summary.peak_rss
    };
    match (current, cap) {
        (Some(cur), Some(c)) if what == "device" => {
            let ratio = (cur as f64 / c as f64).clamp(0.0, 1.0);
            let color = if peak.unwrap_or(0) > c {
                Color::Red
            } else if ratio > 0.85 {
                Color::Yellow
            } else {
                Color::Green
            };
            f.render_widget(
                Gauge::default()
                    .ratio(ratio)
                    .gauge_style(Style::new().fg(color).bg(Color::Black))
                    .label(format!(
                        "{} / {} ({:.0}%)",
                        bytes(cur),
                        bytes(c),
                        cur as f64 * 100.0 / c as f64
                    )),
                gauge_area,
            );
        }
        (Some(cur), _) if what == "RSS" => f.render_widget(
            Paragraph::new(format!(
                "no device memory reported; process RSS {}",
                bytes(cur)
            )),
            gauge_area,
        ),
        (Some(cur), _) => f.render_widget(
            Paragraph::new(format!("device {} (capacity unknown)", bytes(cur))),
            gauge_area,
        ),
        (None, _) => f.render_widget(
            Paragraph::new("no memory samples yet").fg(Color::DarkGray),
            gauge_area,
        ),
    }
    let note = forecast(&series, cap.filter(|_| what == "device"), view, peak);
    f.render_widget(Paragraph::new(note), note_area);
    if series.is_empty() || chart_area.height < 3 {
        return;
    }
    let a = series.partition_point(|p| p.0 < view.0);
    let b = series.partition_point(|p| p.0 <= view.1);
    let xs: Vec<f64> = series[a..b].iter().map(|p| p.0).collect();
    let points = downsample(
        &xs,
        |i| series[a + i].1 as f64,
        chart_area.width as usize * 2,
    );
    let top = peak.unwrap_or(0) as f64;
    let cap_g = cap.filter(|_| what == "device").map(|c| c as f64);
    let ymax = cap_g.unwrap_or(0.0).max(top).max(1.0) * 1.05;
    let cap_line = cap_g
        .map(|c| vec![(view.0, c), (view.1, c)])
        .unwrap_or_default();
    let peak_line = vec![(view.0, top), (view.1, top)];
    let datasets = vec![
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Magenta))
            .data(&points),
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Yellow))
            .data(&peak_line),
        Dataset::default()
            .marker(Marker::Dot)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(Color::Red))
            .data(&cap_line),
    ];
    let chart = Chart::new(datasets)
        .x_axis(
            Axis::default()
                .bounds([view.0, view.1.max(view.0 + 1e-9)])
                .style(Style::new().fg(Color::DarkGray)),
        )
        .y_axis(
            Axis::default()
                .bounds([0.0, ymax])
                .labels(["0".to_string(), bytes(ymax as u64)])
                .style(Style::new().fg(Color::DarkGray)),
        );
    f.render_widget(chart, chart_area);
}

/// "peak X", and whether it fits: over capacity now, or when it would be at the current trend.
pub fn forecast(
    series: &[(f64, u64)],
    cap: Option<u64>,
    view: (f64, f64),
    peak: Option<u64>,
) -> Line<'static> {
    let Some(peak) = peak else {
        return Line::default();
    };
    let mut spans = vec![Span::styled(
        format!("peak {}", bytes(peak)),
        Style::new().fg(Color::Yellow),
    )];
    if let Some(c) = cap {
        if peak > c {
            spans.push(Span::styled(
                format!("  DOES NOT FIT: {} over capacity", bytes(peak - c)),
                Style::new().fg(Color::Red).bold(),
            ));
        } else {
            let a = series.partition_point(|p| p.0 < view.0);
            let w = &series[a..];
            if let (Some(first), Some(last)) = (w.first(), w.last())
                && last.0 > first.0
                && last.1 > first.1
            {
                let slope = (last.1 - first.1) as f64 / (last.0 - first.0);
                let left = (c - last.1.min(c)) as f64 / slope;
                spans.push(Span::styled(
                    format!(
                        "  growing {}/s: full in ~{}",
                        bytes(slope as u64),
                        duration(left)
                    ),
                    Style::new().fg(Color::Red),
                ));
            } else {
                spans.push(Span::styled(
                    format!("  fits ({:.0}% at peak)", peak as f64 * 100.0 / c as f64),
                    Style::new().fg(Color::Green),
                ));
            }
        }
    }
    Line::from(spans)
}

fn draw_compiles(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
    let s = &agg.summary;
    let title = format!(
        "Recompiles: {} compiles, {} recompiles, {:.2} s",
        s.compiles, s.recompiles, s.compile_seconds
    );
    let block = pane_block(&title, app, Pane::Compiles);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut notes: Vec<Line> = vec![];
    if let Some(c) = &agg.limit_hit {
        notes.push(Line::from(Span::styled(
            format!(
                "RECOMPILE LIMIT HIT in {} ({}:{}): it now runs eagerly",
                c.function,
                short_path(&c.file),
                c.line
            ),
            Style::new().fg(Color::White).bg(Color::Red).bold(),
        )));
    }
    if agg.shapes_vary() {
        notes.push(Line::from(Span::styled(
            "hint: shapes vary: pad to a few bucket sizes, or mark_dynamic(x, dim)",
            Style::new().fg(Color::Yellow),
        )));
    }
    let [notes_area, table_area] =
        Layout::vertical([Constraint::Length(notes.len() as u16), Constraint::Fill(1)])
            .areas(inner);
    f.render_widget(Paragraph::new(notes), notes_area);
    let visible = table_area.height.saturating_sub(1) as usize;
    // Backward compiles follow their forward one; the table shows frames.
    let rows_all: Vec<_> = agg
        .compile_rows
        .iter()
        .rev()
        .filter(|c| c.kind != "backward")
        .collect();
    let skip = app.scroll_compiles.min(rows_all.len().saturating_sub(1));
    let rows = rows_all.iter().skip(skip).take(visible).map(|c| {
        let style = match c.status.as_str() {
            "ok" => Style::new(),
            _ => Style::new().fg(Color::Red),
        };
        let reason = match (&c.reason, c.status.as_str()) {
            (_, "limit_hit") => "limit hit: runs eagerly".to_string(),
            (_, "failed") => format!(
                "failed: {}",
                c.extra
                    .get("fail_reason")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
            ),
            (Some(r), _) => crate::profile::aggregate::normalize_reason(r),
            (None, _) => "first compile".to_string(),
        };
        Row::new(vec![
            Cell::from(c.function.clone()),
            Cell::from(format!("{}:{}", short_path(&c.file), c.line)),
            Cell::from(reason),
            Cell::from(format!("{:.3}s", c.seconds)),
        ])
        .style(style)
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(12),
            Constraint::Length(20),
            Constraint::Fill(1),
            Constraint::Length(8),
        ],
    )
    .header(
        Row::new(vec!["function", "file:line", "reason", "time"])
            .style(Style::new().fg(Color::DarkGray).bold()),
    );
    f.render_widget(table, table_area);
}

fn draw_syncs(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, stats: &WindowStats) {
    let title = format!(
        "Host syncs: {} ({} per step)",
        agg.summary.syncs,
        stats
            .syncs_per_step
            .map(|s| format!("{s:.1}"))
            .unwrap_or("-".into())
    );
    let block = pane_block(&title, app, Pane::Syncs);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let sites = agg.top_sync_sites(usize::MAX);
    if sites.is_empty() {
        f.render_widget(
            Paragraph::new("no host syncs (.item(), .cpu(), .tolist(), .numpy())")
                .fg(Color::DarkGray),
            inner,
        );
        return;
    }
    let skip = app.scroll_syncs.min(sites.len().saturating_sub(1));
    let rows = sites.iter().skip(skip).map(|(site, n)| {
        Row::new(vec![
            Cell::from(n.to_string()),
            Cell::from(short_path(site)),
        ])
    });
    let table = Table::new(rows, [Constraint::Length(8), Constraint::Fill(1)]).header(
        Row::new(vec!["syncs", "call site"]).style(Style::new().fg(Color::DarkGray).bold()),
    );
    f.render_widget(table, inner);
}

fn draw_output(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
    let title = if app.scroll_output > 0 {
        format!("Output (scrolled up {})", app.scroll_output)
    } else {
        "Output".to_string()
    };
    let block = pane_block(&title, app, Pane::Output);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let h = inner.height as usize;
    let n = agg.logs.len();
    let end = n.saturating_sub(app.scroll_output.min(n.saturating_sub(h.min(n))));
    let start = end.saturating_sub(h);
    let lines: Vec<Line> = agg
        .logs
        .range(start..end)
        .map(|l| {
            let style = match l.stream.as_str() {
                "stderr" => Style::new().fg(Color::Red),
                "tpuport" => Style::new().fg(Color::Cyan),
                "warning" => Style::new().fg(Color::Yellow),
                _ => Style::new(),
            };
            Line::from(Span::styled(l.line.replace('\t', "    "), style))
        })
        .collect();
    f.render_widget(Paragraph::new(lines), inner);
}

fn draw_summary(f: &mut Frame, area: Rect, agg: &Aggregator) {
    let mut lines: Vec<Line> = vec![];
    if let Some(e) = agg.run_end() {
        let color = if e.status == "ok" {
            Color::Green
        } else {
            Color::Red
        };
        lines.push(Line::from(Span::styled(
            format!(
                "The script ended: {} (exit {}) after {}",
                e.status,
                e.exit_code,
                duration(e.duration)
            ),
            Style::new().fg(color).bold(),
        )));
        if let Some(x) = &e.exception {
            lines.push(Line::from(Span::styled(
                format!("{}: {}", x.kind, x.message),
                Style::new().fg(Color::Red),
            )));
        }
        lines.push(Line::default());
    }
    for l in agg.summary.render().lines() {
        lines.push(Line::from(l.to_string()));
    }
    let reasons = agg.top_reasons(5);
    if !reasons.is_empty() {
        lines.push(Line::default());
        lines.push(Line::from(Span::styled(
            "top recompile reasons:",
            Style::new().bold(),
        )));
        for (r, n) in reasons {
            lines.push(Line::from(format!("  {n:>4} × {r}")));
        }
    }
    let sites = agg.top_sync_sites(5);
    if !sites.is_empty() {
        lines.push(Line::default());
        lines.push(Line::from(Span::styled(
            "top host-sync call sites:",
            Style::new().bold(),
        )));
        for (s, n) in sites {
            lines.push(Line::from(format!("  {n:>4} × {s}")));
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        "q: leave   s: back to the dashboard",
        Style::new().fg(Color::DarkGray),
    )));
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(Block::bordered().title(" Summary "));
    f.render_widget(p, area);
}

fn draw_footer(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
    let mut s = format!(
        " q quit  f freeze  r reset  +/- refresh {} ms  ←/→ window {}  tab focus  ↑/↓ scroll  ? help",
        app.rate_ms(),
        duration(app.window_secs())
    );
    if app.ended {
        s.push_str("  s summary");
    }
    if app.attached {
        s.push_str("  n/p file");
    }
    if agg.logs_dropped > 0 {
        s.push_str(&format!(
            "  ({} old output lines dropped)",
            agg.logs_dropped
        ));
    }
    f.render_widget(
        Paragraph::new(s).style(Style::new().fg(Color::Black).bg(Color::Gray)),
        area,
    );
}

fn popup(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

pub const HELP: &[(&str, &str)] = &[
    ("q, Esc", "quit (asks before stopping a running script)"),
    ("Ctrl-C", "interrupt the script (again: kill it)"),
    ("f, space", "freeze / unfreeze the view"),
    ("r", "reset: show only what comes from now on"),
    ("+ / -", "redraw faster / slower (at most 10 a second)"),
    ("← / →", "longer / shorter time window"),
    ("tab", "focus the next pane (shift-tab: previous)"),
    ("↑ / ↓", "scroll the focused pane (PgUp/PgDn, End)"),
    ("s", "summary screen, once the script has ended"),
    ("n / p", "next / previous events file (tpuport top DIR)"),
    ("?", "this help"),
];

fn draw_help(f: &mut Frame, area: Rect) {
    let r = popup(area, 64, HELP.len() as u16 + 4);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, v)| {
            Line::from(vec![
                Span::styled(format!("{k:>10}  "), Style::new().bold().fg(Color::Cyan)),
                Span::raw(*v),
            ])
        })
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys (any key closes) ")),
        r,
    );
}

fn draw_confirm(f: &mut Frame, area: Rect) {
    let r = popup(area, 50, 5);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(vec![
            Line::from("The script is still running."),
            Line::from(Span::styled("Stop it and quit? y / n", Style::new().bold())),
        ])
        .alignment(Alignment::Center)
        .block(
            Block::bordered()
                .title(" Quit ")
                .border_style(Style::new().fg(Color::Yellow)),
        ),
        r,
    );
}

fn short_path(p: &str) -> String {
    match p.rsplit_once('/') {
        Some((_, name)) => name.to_string(),
        None => p.to_string(),
    }
}

fn ms(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

fn rate(r: f64) -> String {
    if r >= 1e6 {
        format!("{:.2}M", r / 1e6)
    } else if r >= 1e4 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// `42s`, `3m05s`, `1h02m`.
pub fn duration(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".into();
    }
    let s = s.round() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s % 3600 / 60)
    }
}
