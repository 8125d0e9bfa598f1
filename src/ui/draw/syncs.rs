//! The host-syncs pane: the count and syncs per step in the title, and the call sites that
//! synced most (`.item()`, `.cpu()`, ...), busiest first.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

use super::pane_block;
use crate::profile::aggregate::{Aggregator, WindowStats};
use crate::ui::app::{App, Pane};
use crate::ui::format::short_path;

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator, stats: &WindowStats) {
    let title = format!(
        "Host syncs: {} ({} per step)",
        agg.summary.syncs,
        stats
            .syncs_per_step
            .map(|s| format!("{s:.1}"))
            .unwrap_or("-".into())
    );
    let block = pane_block(&title, app, Pane::Syncs);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let sites = agg.top_sync_sites(usize::MAX);
    if sites.is_empty() {
        f.render_widget(
            Paragraph::new("no host syncs (.item(), .cpu(), .tolist(), .numpy())")
                .fg(Color::DarkGray),
            inner,
        );
        return;
    }
    let skip = app.scroll_syncs.min(sites.len().saturating_sub(1));
    let rows = sites.iter().skip(skip).map(|(site, n)| {
        Row::new(vec![
            Cell::from(n.to_string()),
            Cell::from(short_path(site)),
        ])
    });
    let table = Table::new(rows, [Constraint::Length(8), Constraint::Fill(1)]).header(
        Row::new(vec!["syncs", "call site"]).style(Style::new().fg(Color::DarkGray).bold()),
    );
    f.render_widget(table, inner);
}
