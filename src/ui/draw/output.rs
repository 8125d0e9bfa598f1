//! The output pane: the script's newest stdout / stderr lines and tpuport's notes, coloured by
//! stream, scrolled up on request.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::pane_block;
use crate::profile::aggregate::Aggregator;
use crate::ui::app::{App, Pane};

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
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
