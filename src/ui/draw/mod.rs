//! Drawing the dashboard: [`draw`] lays out the frame and calls one module per pane, each
//! reading the aggregated data ([`Aggregator`]) and the view state ([`App`]) and writing into a
//! ratatui frame. Nothing here changes state, so any screen can be drawn into a `TestBackend`
//! from a recorded stream.

mod compiles;
mod confirm;
mod footer;
mod header;
mod help;
mod memory;
mod output;
mod ranks;
mod steps;
mod summary;
mod syncs;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::Span;
use ratatui::widgets::{Block, Dataset, GraphType};

use super::app::{App, Pane};
use crate::profile::aggregate::Aggregator;

/// What the frame needs besides the data and the view state.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Seconds since the run started, by the clock (live) or the latest event (replay).
    pub elapsed: f64,
    /// `tpuport top`: which file is shown (`rank0.jsonl (1/4)`).
    pub source: Option<String>,
    /// A multi-process run: every rank's numbers over the window, and the rank on screen.
    pub ranks: Vec<crate::profile::ranks::RankStats>,
    pub current_rank: Option<u32>,
}

/// One frame: the header, the panes (or the summary screen once the script has ended), the
/// footer, and the help or quit popup over them.
pub fn draw(f: &mut Frame, app: &App, agg: &Aggregator, ctx: &Context) {
    let area = f.area();
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Min(6),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(f, header, app, agg, ctx);
    if app.show_summary && app.ended {
        if ctx.ranks.len() > 1 {
            let rows = ctx.ranks.len() as u16 + 5;
            let [top, bottom] =
                Layout::vertical([Constraint::Fill(1), Constraint::Length(rows)]).areas(body);
            summary::draw(f, top, agg);
            ranks::draw(f, bottom, &ctx.ranks, ctx.current_rank);
        } else {
            summary::draw(f, body, agg);
        }
    } else {
        let [top, middle, bottom] = Layout::vertical([
            Constraint::Percentage(38),
            Constraint::Percentage(30),
            Constraint::Fill(1),
        ])
        .areas(body);
        let [steps, memory] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(top);
        let [compiles, syncs] =
            Layout::horizontal([Constraint::Percentage(60), Constraint::Fill(1)]).areas(middle);
        let view = app.view(agg.last_t);
        let stats = agg.window_stats(view.0, view.1);
        steps::draw(f, steps, app, agg, view, &stats);
        memory::draw(f, memory, app, agg, view);
        compiles::draw(f, compiles, app, agg);
        syncs::draw(f, syncs, app, agg, &stats);
        if ctx.ranks.len() > 1 {
            let [left, right] =
                Layout::horizontal([Constraint::Percentage(55), Constraint::Fill(1)]).areas(bottom);
            ranks::draw(f, left, &ctx.ranks, ctx.current_rank);
            output::draw(f, right, app, agg);
        } else {
            output::draw(f, bottom, app, agg);
        }
    }
    footer::draw(f, footer, app, agg);
    if app.help {
        help::draw(f, area);
    } else if app.confirm_quit {
        confirm::draw(f, area);
    }
}

/// A pane's border and bold title, cyan when it has the focus.
fn pane_block<'a>(title: &'a str, app: &App, pane: Pane) -> Block<'a> {
    let b = Block::bordered().title(Span::styled(
        format!(" {title} "),
        Style::new().add_modifier(Modifier::BOLD),
    ));
    if app.focus == pane {
        b.border_style(Style::new().fg(Color::Cyan))
    } else {
        b.border_style(Style::new().fg(Color::DarkGray))
    }
}

/// A `w` × `h` rectangle centred in `area` (clipped to it).
/// A chart line: the series itself in Braille dots, reference lines (p50, peak, capacity) in
/// plain dots.
fn line<'a>(marker: Marker, color: Color, data: &'a [(f64, f64)]) -> Dataset<'a> {
    Dataset::default()
        .marker(marker)
        .graph_type(GraphType::Line)
        .style(Style::new().fg(color))
        .data(data)
}

fn popup(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// At most `n` chart points `(xs[i], ys(i))`, keeping each bucket's highest y so spikes show.
fn downsample(xs: &[f64], ys: impl Fn(usize) -> f64, n: usize) -> Vec<(f64, f64)> {
    let len = xs.len();
    if len == 0 || n == 0 {
        return vec![];
    }
    if len <= n {
        return (0..len).map(|i| (xs[i], ys(i))).collect();
    }
    let mut out = Vec::with_capacity(n);
    for b in 0..n {
        let (lo, hi) = (b * len / n, ((b + 1) * len / n).max(b * len / n + 1));
        let mut best = lo;
        for i in lo..hi {
            if ys(i) > ys(best) {
                best = i;
            }
        }
        out.push((xs[best], ys(best)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsample_keeps_spikes() {
        let xs: Vec<f64> = (0..10).map(f64::from).collect();
        let ys = |i: usize| if i == 7 { 100.0 } else { i as f64 };
        assert_eq!(downsample(&xs, ys, 20).len(), 10);
        let d = downsample(&xs, ys, 2);
        assert_eq!(d, vec![(4.0, 4.0), (7.0, 100.0)]);
        assert!(downsample(&[], ys, 5).is_empty());
        assert!(downsample(&xs, ys, 0).is_empty());
    }

    #[test]
    fn popup_is_centred_and_clipped() {
        let area = Rect::new(0, 0, 100, 40);
        assert_eq!(popup(area, 50, 10), Rect::new(25, 15, 50, 10));
        assert_eq!(
            popup(Rect::new(0, 0, 20, 5), 50, 10),
            Rect::new(0, 0, 20, 5)
        );
    }
}
