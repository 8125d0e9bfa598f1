//! The help popup: every row of the key table ([`help_rows`]), its keys, what they do and
//! when.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::popup;
use crate::ui::keys::help_rows;

/// The width of the keys column.
const KEYS_WIDTH: usize = 12;

/// One line per row: `      q, Esc  quit (asks before stopping a running script)`, and when
/// it applies, dimmed, unless always.
fn lines() -> Vec<Line<'static>> {
    help_rows()
        .map(|(keys, what, when)| {
            let mut spans = vec![
                Span::styled(
                    format!("{keys:>KEYS_WIDTH$}  "),
                    Style::new().bold().fg(Color::Cyan),
                ),
                Span::raw(what),
            ];
            if !when.is_empty() {
                spans.push(Span::styled(
                    format!("  ({when})"),
                    Style::new().fg(Color::DarkGray),
                ));
            }
            Line::from(spans)
        })
        .collect()
}

pub fn draw(f: &mut Frame, area: Rect) {
    let lines = lines();
    let width = lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 4;
    let r = popup(area, width, lines.len() as u16 + 4);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys (any key closes) ")),
        r,
    );
}
