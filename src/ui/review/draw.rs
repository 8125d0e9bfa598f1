//! The review screen's widgets (`tpuport migrate -i`): the header with the progress, the fix's
//! place, rule and message, the diff of this one fix, the rule's documentation (scrolled), the
//! key line, and the help popup. Reads the state and the [`View`], changes neither.

use crate::port::review::{Plan, Proposal};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

use super::app::{KEYS, Review};

/// What the screen shows of the fix on offer.
pub struct View<'a> {
    pub path: &'a str,
    pub line: usize,
    pub column: usize,
    pub rule: &'a str,
    pub title: &'a str,
    pub message: &'a str,
    pub unsafe_fix: bool,
    /// The unified diff of this fix alone.
    pub diff: &'a str,
    /// The text of `tpuport rule ID`.
    pub doc: &'a str,
    /// Whether the person edited this fix.
    pub edited: bool,
}

impl<'a> View<'a> {
    /// The screen's view of proposal `p` of `plan`, with its diff and rule doc.
    pub fn of(plan: &'a Plan, p: &'a Proposal, diff: &'a str, doc: &'a str, edited: bool) -> Self {
        View {
            path: &plan.files[p.file].display,
            line: p.line,
            column: p.column,
            rule: &p.rule,
            title: &p.title,
            message: &p.message,
            unsafe_fix: p.unsafe_fix,
            diff,
            doc,
            edited,
        }
    }
}

pub fn draw(f: &mut Frame, app: &Review, v: &View) {
    let diff: Vec<Line> = v.diff.lines().map(diff_line).collect();
    let area = f.area();
    let diff_h = (diff.len() as u16 + 2).min(area.height.saturating_sub(8) * 3 / 5);
    let [head, place, msg, diff_area, doc_area, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(diff_h.max(3)),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    let (n, total) = app.progress();
    let (acc, skip, _) = app.counts();
    f.render_widget(
        Line::from(vec![
            Span::styled(" tpuport migrate -i ", Style::new().bold().reversed()),
            Span::styled(format!("  fix {n} of {total}"), Style::new().bold()),
            Span::raw(format!("   accepted {acc}  skipped {skip}")),
        ]),
        head,
    );
    let mut spans = vec![
        Span::styled(
            format!("{}:{}:{}", v.path, v.line, v.column),
            Style::new().bold(),
        ),
        Span::raw("  "),
        Span::styled(v.rule.to_string(), Style::new().bold().fg(Color::Yellow)),
        Span::raw(format!("  {}", v.title)),
    ];
    if v.unsafe_fix {
        spans.push(Span::styled("  [unsafe fix]", Style::new().fg(Color::Red)));
    }
    if v.edited {
        spans.push(Span::styled("  [edited]", Style::new().fg(Color::Cyan)));
    }
    f.render_widget(Line::from(spans), place);
    f.render_widget(Line::raw(format!("  {}", v.message)), msg);
    f.render_widget(
        Paragraph::new(diff).block(Block::bordered().title(" This fix ")),
        diff_area,
    );
    f.render_widget(
        Paragraph::new(v.doc)
            .wrap(Wrap { trim: false })
            .scroll((app.scroll, 0))
            .block(Block::bordered().title(format!(" Rule {} (↑/↓ scroll) ", v.rule))),
        doc_area,
    );
    let footer = match &app.note {
        Some(n) => Line::styled(format!(" {n}"), Style::new().fg(Color::Green)),
        None => Line::from(vec![Span::styled(
            format!(
                " y/a accept  n/s skip  A accept all {}  e edit  q quit  ? help",
                v.rule
            ),
            Style::new().fg(Color::DarkGray),
        )]),
    };
    f.render_widget(footer, foot);
    if app.help {
        help(f, area);
    }
}

fn diff_line(l: &str) -> Line<'_> {
    let style = if l.starts_with("+++") || l.starts_with("---") {
        Style::new().bold()
    } else if l.starts_with('+') {
        Style::new().fg(Color::Green)
    } else if l.starts_with('-') {
        Style::new().fg(Color::Red)
    } else if l.starts_with("@@") {
        Style::new().fg(Color::Cyan)
    } else {
        Style::new()
    };
    Line::styled(l, style)
}

fn help(f: &mut Frame, area: Rect) {
    let width = KEYS
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(
                    format!("{k:>width$}  "),
                    Style::new().bold().fg(Color::Cyan),
                ),
                Span::raw(*what),
            ])
        })
        .collect();
    let w = (lines.iter().map(Line::width).max().unwrap_or(0) as u16 + 4).min(area.width);
    let h = (lines.len() as u16 + 2).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" Keys (any key closes) ")),
        r,
    );
}
