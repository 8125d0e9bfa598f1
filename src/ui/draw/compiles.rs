//! The recompiles pane: totals in the title, a banner when the recompile limit was hit, a hint
//! when shapes vary, and a table of compiles (newest first) with their reasons.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::pane_block;
use crate::profile::aggregate::{Aggregator, normalize_reason};
use crate::profile::event::Compile;
use crate::ui::app::{App, Pane};
use crate::ui::format::short_path;

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
    let s = &agg.summary;
    let title = format!(
        "Recompiles: {} compiles, {} recompiles, {:.2} s",
        s.compiles, s.recompiles, s.compile_seconds
    );
    let block = pane_block(&title, app, Pane::Compiles);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let notes = notes(agg);
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
    let rows = rows_all.iter().skip(skip).take(visible).map(|c| row(c));
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

/// The limit-hit banner and the varying-shapes hint, when they apply.
fn notes(agg: &Aggregator) -> Vec<Line<'static>> {
    let mut notes = vec![];
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
    notes
}

/// One compile: function, file:line, why, how long; red unless it went well.
fn row(c: &Compile) -> Row<'static> {
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
        (Some(r), _) => normalize_reason(r),
        (None, _) => "first compile".to_string(),
    };
    Row::new(vec![
        Cell::from(c.function.clone()),
        Cell::from(format!("{}:{}", short_path(&c.file), c.line)),
        Cell::from(reason),
        Cell::from(format!("{:.3}s", c.seconds)),
    ])
    .style(style)
}
