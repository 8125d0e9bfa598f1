//! The step-time pane: the window's step count, p50 / p90 and throughput on one line, and a
//! chart of every step's time (the first step, start-up and first compiles, left out), and
//! above the chart, where the window's steps go: a stacked bar of data, forward, backward,
//! optimizer, host syncs and other, with its legend.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Paragraph};

use super::{downsample, line, pane_block};
use crate::profile::aggregate::{Aggregator, WindowStats};
use crate::profile::breakdown::{Breakdown, N, PHASES};
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
    let bar_rows = match stats.breakdown {
        Some(_) if inner.height >= 8 => 2,
        _ => 0,
    };
    let [text, bar_area, chart_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(bar_rows),
        Constraint::Fill(1),
    ])
    .areas(inner);
    f.render_widget(Paragraph::new(numbers(agg, view, stats)), text);
    if let Some(b) = stats.breakdown.filter(|_| bar_rows > 0) {
        f.render_widget(
            Paragraph::new(breakdown_lines(&b, bar_area.width)),
            bar_area,
        );
    }
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
/// The rates are the window's [`Summary::throughput_of`](crate::profile::summary::Summary::throughput_of),
/// the figure the step lines give for their latest steps.
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

const PHASE_COLORS: [Color; N] = [
    Color::Blue,
    Color::Green,
    Color::Magenta,
    Color::Yellow,
    Color::Red,
    Color::Cyan,
    Color::DarkGray,
];

/// The stacked bar (`width` cells, each phase's share of them by largest remainder) and its
/// legend: `■ forward 48% 12.1ms  ■ backward 40% ...`, in drawing order.
pub fn breakdown_lines(b: &Breakdown, width: u16) -> Vec<Line<'static>> {
    let shares = b.shares();
    let cells = cells(&shares, width as usize);
    let bar: Vec<Span> = cells
        .iter()
        .zip(PHASE_COLORS)
        .filter(|(n, _)| **n > 0)
        .map(|(n, c)| Span::styled("█".repeat(*n), Style::new().fg(c)))
        .collect();
    let mut legend = vec![];
    for (i, name) in PHASES.iter().enumerate() {
        if shares[i] < 0.005 {
            continue;
        }
        legend.push(Span::styled("■ ", Style::new().fg(PHASE_COLORS[i])));
        legend.push(Span::raw(format!(
            "{name} {:.0}% {}  ",
            shares[i] * 100.0,
            ms(b.mean[i])
        )));
    }
    vec![Line::from(bar), Line::from(legend)]
}

/// Split `width` cells by `shares` (largest remainder), so the bar always fills the row.
fn cells(shares: &[f64; N], width: usize) -> [usize; N] {
    let mut out = shares.map(|s| (s * width as f64).floor() as usize);
    let mut rest: Vec<(usize, f64)> = shares
        .iter()
        .enumerate()
        .map(|(i, s)| (i, s * width as f64 - out[i] as f64))
        .collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let used: usize = out.iter().sum();
    let total: f64 = shares.iter().sum();
    if total > 0.0 {
        for (i, _) in rest.iter().take(width.saturating_sub(used)) {
            out[*i] += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_the_row_in_proportion() {
        let b = Breakdown {
            mean: [0.001, 0.004, 0.004, 0.0005, 0.0, 0.0, 0.0005],
            steps: 3,
        };
        let c = cells(&b.shares(), 40);
        assert_eq!(c.iter().sum::<usize>(), 40);
        assert_eq!(c, [4, 16, 16, 2, 0, 0, 2]);
        let lines = breakdown_lines(&b, 40);
        let legend: String = lines[1].spans.iter().map(|s| s.content.as_ref()).collect();
        assert!(legend.contains("forward 40% 4.0 ms"), "{legend}");
        assert!(!legend.contains("sync"), "{legend}");
        assert_eq!(cells(&[0.0; N], 10), [0; N]);
    }
}
