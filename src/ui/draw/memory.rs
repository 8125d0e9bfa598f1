//! The HBM pane: a gauge of the latest device memory against the capacity (or the process RSS
//! when no device memory was reported), the peak and its forecast
//! ([`crate::profile::forecast`]), and a chart of the window with the peak and capacity lines.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Gauge, Paragraph};

use super::{downsample, line, pane_block};
use crate::profile::aggregate::Aggregator;
use crate::profile::forecast::{Fit, Forecast, MemoryView};
use crate::profile::summary::bytes;
use crate::ui::app::{App, Pane};
use crate::ui::format::duration;

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, view: (f64, f64)) {
    let block = pane_block("HBM", app, Pane::Memory);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [gauge_area, note_area, chart_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    let m = MemoryView::new(agg, view);
    match (m.current, m.capacity) {
        (Some(cur), Some(c)) => {
            let ratio = (cur as f64 / c as f64).clamp(0.0, 1.0);
            let color = if m.peak.unwrap_or(0) > c {
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
        (Some(cur), None) if !m.device => f.render_widget(
            Paragraph::new(format!(
                "no device memory reported; process RSS {}",
                bytes(cur)
            )),
            gauge_area,
        ),
        (Some(cur), None) => f.render_widget(
            Paragraph::new(format!("device {} (capacity unknown)", bytes(cur))),
            gauge_area,
        ),
        (None, _) => f.render_widget(
            Paragraph::new("no memory samples yet").fg(Color::DarkGray),
            gauge_area,
        ),
    }
    f.render_widget(Paragraph::new(note(m.forecast())), note_area);
    if m.series.is_empty() || chart_area.height < 3 {
        return;
    }
    let xs: Vec<f64> = m.series.iter().map(|p| p.0).collect();
    let points = downsample(&xs, |i| m.series[i].1 as f64, chart_area.width as usize * 2);
    let top = m.peak.unwrap_or(0) as f64;
    let cap = m.capacity.map(|c| c as f64);
    let ymax = cap.unwrap_or(0.0).max(top).max(1.0) * 1.05;
    let cap_line = cap
        .map(|c| vec![(view.0, c), (view.1, c)])
        .unwrap_or_default();
    let peak_line = vec![(view.0, top), (view.1, top)];
    let datasets = vec![
        line(Marker::Braille, Color::Magenta, &points),
        line(Marker::Dot, Color::Yellow, &peak_line),
        line(Marker::Dot, Color::Red, &cap_line),
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
fn note(forecast: Option<Forecast>) -> Line<'static> {
    let Some(fc) = forecast else {
        return Line::default();
    };
    let mut spans = vec![Span::styled(
        format!("peak {}", bytes(fc.peak)),
        Style::new().fg(Color::Yellow),
    )];
    match fc.fit {
        None => {}
        Some(Fit::Over(by)) => spans.push(Span::styled(
            format!("  DOES NOT FIT: {} over capacity", bytes(by)),
            Style::new().fg(Color::Red).bold(),
        )),
        Some(Fit::Growing { per_s, full_in }) => spans.push(Span::styled(
            format!(
                "  growing {}/s: full in ~{}",
                bytes(per_s as u64),
                duration(full_in)
            ),
            Style::new().fg(Color::Red),
        )),
        Some(Fit::Fits { percent }) => spans.push(Span::styled(
            format!("  fits ({percent:.0}% at peak)"),
            Style::new().fg(Color::Green),
        )),
    }
    Line::from(spans)
}
