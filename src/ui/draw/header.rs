//! The header: what runs where (script, target, chip, mode, precision, events file), then the
//! elapsed time, the step count, the status and the FROZEN mark and the lines skipped.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Context;
use crate::profile::aggregate::Aggregator;
use crate::ui::app::App;
use crate::ui::format::{duration, fit_path};

/// The run's status and its colour.
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

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, ctx: &Context) {
    let rs = agg.run_start();
    let get = |v: Option<&str>| v.unwrap_or("?").to_string();
    let (status, color) = status_of(app, agg);
    let label = Style::new().fg(Color::DarkGray);
    let mut first = vec![
        Span::styled("tpuport ", Style::new().bold().fg(Color::Cyan)),
        Span::styled(String::new(), Style::new().bold()),
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
    // The script's path gets what the rest of the line leaves, so the events file shows whole.
    let others: usize = first.iter().map(|s| s.width()).sum();
    let room = (area.width as usize).saturating_sub(others).max(12);
    first[1].content = fit_path(&get(rs.map(|s| s.script.as_str())), room).into();
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
    if let Some(skipped) = agg.skipped.short() {
        second.push(Span::styled(
            format!("  {skipped}"),
            Style::new().fg(Color::Red),
        ));
    }
    let p = Paragraph::new(vec![Line::from(first), Line::from(second)])
        .block(Block::new().borders(Borders::BOTTOM));
    f.render_widget(p, area);
}
