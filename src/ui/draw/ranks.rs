//! The ranks pane (a multi-process run: `run --nproc`, `top DIR`): every rank side by side over
//! the time window (status, steps, median and p90 step time, own work, time in collectives, peak
//! memory), the rank on screen marked, the straggler flagged, and a dead rank with how it died.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::Span;
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};

use crate::profile::ranks::{RankStats, straggler};
use crate::profile::summary::bytes;
use crate::ui::format::ms;

pub fn draw(f: &mut Frame, area: Rect, ranks: &[RankStats], current: Option<u32>) {
    let slow = straggler(ranks);
    let title = match slow {
        Some((r, s, t)) => format!(
            " Ranks: {} (rank {r} straggles ×{:.1}) ",
            ranks.len(),
            s / t
        ),
        None => format!(" Ranks: {} ", ranks.len()),
    };
    let block = Block::bordered()
        .title(Span::styled(
            title,
            Style::new().add_modifier(Modifier::BOLD),
        ))
        .border_style(Style::new().fg(if slow.is_some() {
            Color::Yellow
        } else {
            Color::DarkGray
        }));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let opt_ms = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "-".into());
    let rows: Vec<Row> = ranks
        .iter()
        .map(|r| {
            let status = match (&r.status, &r.died) {
                (_, Some(d)) => format!("died: {d}"),
                (Some(s), None) => s.clone(),
                (None, None) => "running".into(),
            };
            let mut style = Style::new();
            if r.died.is_some() {
                style = style.fg(Color::Red);
            } else if slow.is_some_and(|s| s.0 == r.rank) {
                style = style.fg(Color::Yellow).bold();
            }
            let mark = if current == Some(r.rank) { "▶" } else { " " };
            Row::new(vec![
                Cell::from(format!("{mark}{}", r.rank)),
                Cell::from(r.steps.to_string()),
                Cell::from(opt_ms(r.median)),
                Cell::from(opt_ms(r.p90)),
                Cell::from(opt_ms(r.busy_median)),
                Cell::from(opt_ms(r.collective_median)),
                Cell::from(r.peak.map(bytes).unwrap_or_else(|| "-".into())),
                Cell::from(status),
            ])
            .style(style)
        })
        .collect();
    let widths = [
        Constraint::Length(5),
        Constraint::Length(6),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(10),
        Constraint::Fill(1),
    ];
    let header = Row::new(vec![
        "rank", "steps", "median", "p90", "own", "collect.", "peak", "status",
    ])
    .style(Style::new().fg(Color::DarkGray).bold());
    let n = rows.len() as u16;
    f.render_widget(Table::new(rows, widths).header(header), inner);
    // Under the table: what "own" means, or the straggler in words.
    if inner.height > n + 2 {
        let below = Rect::new(inner.x, inner.y + n + 2, inner.width, inner.height - n - 2);
        let text = match slow {
            Some((r, s, t)) => format!(
                "rank {r}'s own work (step less collectives) takes {} against {}: the others wait for it in every collective",
                ms(s),
                ms(t)
            ),
            None => "own: step time less time in collectives; medians over the window".into(),
        };
        f.render_widget(
            Paragraph::new(text)
                .fg(Color::DarkGray)
                .wrap(Wrap { trim: true }),
            below,
        );
    }
}
