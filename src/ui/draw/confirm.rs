//! The quit question shown while the script still runs (its keys: the key table's
//! "in the quit question" row; any other key answers no).

use ratatui::Frame;
use ratatui::layout::{Alignment, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph};

use super::popup;

pub fn draw(f: &mut Frame, area: Rect) {
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
