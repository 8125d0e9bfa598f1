//! The summary screen shown once the script has ended: how it ended (and its exception), the
//! run summary, the top recompile reasons and host-sync call sites.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};

use crate::profile::aggregate::Aggregator;
use crate::ui::format::duration;
use crate::ui::keys::{Cmd, key_for};

pub fn draw(f: &mut Frame, area: Rect, agg: &Aggregator) {
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
    top(&mut lines, "top recompile reasons:", agg.top_reasons(5));
    top(
        &mut lines,
        "top host-sync call sites:",
        agg.top_sync_sites(5),
    );
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        format!(
            "{}: leave   {}: back to the dashboard",
            key_for(Cmd::Quit),
            key_for(Cmd::Summary)
        ),
        Style::new().fg(Color::DarkGray),
    )));
    let p = Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(Block::bordered().title(" Summary "));
    f.render_widget(p, area);
}

/// A bold title and `  count × what` lines, after a blank line; nothing when `items` is empty.
fn top(lines: &mut Vec<Line>, title: &'static str, items: Vec<(&str, u64)>) {
    if items.is_empty() {
        return;
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(title, Style::new().bold())));
    for (what, n) in items {
        lines.push(Line::from(format!("  {n:>4} × {what}")));
    }
}
