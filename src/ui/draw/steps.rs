//! The step-time pane: the window's step count, p50 / p90 and throughput on one line, and a
//! chart of every step's time (the first step, start-up and first compiles, left out).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Paragraph};

use super::{downsample, line, pane_block};
use crate::profile::aggregate::{Aggregator, WindowStats};
use crate::ui::app::{App, Pane};
use crate::ui::format::{duration, ms, rate};

pub fn draw(
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
    f.render_widget(Paragraph::new(numbers(agg, view, stats)), text);
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
        line(Marker::Braille, Color::Cyan, &points),
        line(Marker::Dot, Color::Green, &p50),
        line(Marker::Dot, Color::Yellow, &p90),
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

/// `30 steps in 6s  p50 3.1 ms  p90 3.7 ms  3255 samples/s  (step 1: 5.80 s, not charted)`.
fn numbers(agg: &Aggregator, view: (f64, f64), stats: &WindowStats) -> Line<'static> {
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
    Line::from(parts)
}
