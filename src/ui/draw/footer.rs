//! The footer: the key table's rows that have a footer word and apply now (`q quit  f freeze
//! ...`), with the refresh rate and window, then how many old output lines were dropped.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::Paragraph;

use crate::profile::aggregate::Aggregator;
use crate::ui::app::App;
use crate::ui::format::duration;
use crate::ui::keys::{Cmd, KEYS};

/// ` q quit  f freeze  r reset  +/- refresh 200 ms  ←/→ window 1m00s  ...`.
pub fn text(app: &App) -> String {
    let items: Vec<String> = KEYS
        .iter()
        .filter(|b| app.applies(b.when))
        .filter_map(|b| {
            let word = b.footer?;
            let value = match b.keys.first().map(|k| k.1) {
                Some(Cmd::Faster) => format!(" {} ms", app.rate_ms()),
                Some(Cmd::Longer) => format!(" {}", duration(app.window_secs())),
                _ => String::new(),
            };
            Some(format!("{} {word}{value}", b.short_label()))
        })
        .collect();
    format!(" {}", items.join("  "))
}

pub fn draw(f: &mut Frame, area: Rect, app: &App, agg: &Aggregator) {
    let mut s = text(app);
    if agg.logs_dropped > 0 {
        s.push_str(&format!(
            "  ({} old output lines dropped)",
            agg.logs_dropped
        ));
    }
    f.render_widget(
        Paragraph::new(s).style(Style::new().fg(Color::Black).bg(Color::Gray)),
        area,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_follows_the_table() {
        let mut app = App::new(false);
        let base = " q quit  f freeze  r reset  +/- refresh 200 ms  ←/→ window 1m00s  tab focus  \
                    ↑/↓ scroll  ? help";
        assert_eq!(text(&app), base);
        app.script_ended();
        assert_eq!(text(&app), format!("{base}  s summary"));
        let mut top = App::new(true);
        top.script_ended();
        assert_eq!(text(&top), format!("{base}  s summary  n/p file"));
    }
}
