//! The dashboard's one key table, [`KEYS`]: each row is the keys, what each does ([`Cmd`]), the
//! description and when it applies ([`When`]). [`App::key`](super::app::App::key) dispatches
//! through it, and the footer and the help screen are written from it, so they cannot disagree.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key does; [`App::key`](super::app::App::key) carries it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    Quit,
    Interrupt,
    Freeze,
    Reset,
    Faster,
    Slower,
    Longer,
    Shorter,
    NextPane,
    PrevPane,
    ScrollUp,
    ScrollDown,
    PageUp,
    PageDown,
    Newest,
    ShowHelp,
    Summary,
    NextFile,
    PrevFile,
    /// Yes to "stop the running script?".
    Confirm,
    /// Close the help screen and do nothing else.
    CloseHelp,
}

/// When a row applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// On the dashboard and the summary screen; Ctrl-C even over a popup.
    Always,
    /// Once the script has ended.
    Ended,
    /// Only in `tpuport top` (events files, no script to stop).
    Top,
    /// While the quit question is shown (any other key answers no).
    Asking,
    /// While the help screen is shown (any other key closes it and then does its job).
    Help,
}

impl When {
    /// Said after the description in the help screen.
    pub fn label(self) -> &'static str {
        match self {
            When::Always => "",
            When::Ended => "after the run",
            When::Top => "top only",
            When::Asking => "in the quit question",
            When::Help => "in this help",
        }
    }

    /// A popup's own keys, looked up only while it is shown.
    pub fn modal(self) -> bool {
        matches!(self, When::Asking | When::Help)
    }
}

/// A key, as the table names it; other modifiers than Ctrl are ignored (`?` comes with Shift).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
}

impl Key {
    pub fn matches(&self, k: &KeyEvent) -> bool {
        k.code == self.code && (!self.ctrl || k.modifiers.contains(KeyModifiers::CONTROL))
    }

    /// `q`, `space`, `Ctrl-C`, `←`, `PgUp`, `shift-tab`.
    pub fn name(&self) -> String {
        let name = match self.code {
            KeyCode::Char(' ') => "space".to_string(),
            KeyCode::Char(c) if self.ctrl => c.to_ascii_uppercase().to_string(),
            KeyCode::Char(c) => c.to_string(),
            KeyCode::Esc => "Esc".into(),
            KeyCode::Enter => "Enter".into(),
            KeyCode::Tab => "tab".into(),
            KeyCode::BackTab => "shift-tab".into(),
            KeyCode::Left => "←".into(),
            KeyCode::Right => "→".into(),
            KeyCode::Up => "↑".into(),
            KeyCode::Down => "↓".into(),
            KeyCode::PageUp => "PgUp".into(),
            KeyCode::PageDown => "PgDn".into(),
            KeyCode::End => "End".into(),
            other => format!("{other:?}"),
        };
        if self.ctrl {
            format!("Ctrl-{name}")
        } else {
            name
        }
    }
}

/// One row of the table.
#[derive(Debug)]
pub struct Binding {
    /// The keys and what each does; keys doing the same come together (`+, = / -`).
    pub keys: &'static [(Key, Cmd)],
    /// The help screen's description.
    pub what: &'static str,
    pub when: When,
    /// The footer's word for the row, if the footer shows it.
    pub footer: Option<&'static str>,
}

impl Binding {
    /// The help screen's keys: `q, Esc`, `+, = / -`.
    pub fn label(&self) -> String {
        self.groups()
            .iter()
            .map(|g| g.iter().map(Key::name).collect::<Vec<_>>().join(", "))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    /// The footer's keys, the first of each group: `q`, `+/-`.
    pub fn short_label(&self) -> String {
        self.groups()
            .iter()
            .map(|g| g[0].name())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The keys, grouped by what they do, in order.
    fn groups(&self) -> Vec<Vec<Key>> {
        let mut out: Vec<(Cmd, Vec<Key>)> = vec![];
        for &(key, cmd) in self.keys {
            match out.last_mut() {
                Some((c, keys)) if *c == cmd => keys.push(key),
                _ => out.push((cmd, vec![key])),
            }
        }
        out.into_iter().map(|(_, keys)| keys).collect()
    }
}

const fn ch(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: false,
    }
}

const fn k(code: KeyCode) -> Key {
    Key { code, ctrl: false }
}

const fn ctrl(c: char) -> Key {
    Key {
        code: KeyCode::Char(c),
        ctrl: true,
    }
}

const fn row(
    keys: &'static [(Key, Cmd)],
    what: &'static str,
    when: When,
    footer: Option<&'static str>,
) -> Binding {
    Binding {
        keys,
        what,
        when,
        footer,
    }
}

use Cmd::*;
use When::*;

/// Every key of the dashboard, in the order of the help screen and the footer.
#[rustfmt::skip]
pub const KEYS: &[Binding] = &[
    row(&[(ch('q'), Quit), (k(KeyCode::Esc), Quit)],
        "quit (asks before stopping a running script)", Always, Some("quit")),
    row(&[(ctrl('c'), Interrupt)], "interrupt the script (again: kill it)", Always, None),
    row(&[(ch('f'), Freeze), (ch(' '), Freeze)],
        "freeze / unfreeze the view", Always, Some("freeze")),
    row(&[(ch('r'), Reset)], "reset: show only what comes from now on", Always, Some("reset")),
    row(&[(ch('+'), Faster), (ch('='), Faster), (ch('-'), Slower)],
        "redraw faster / slower (at most 10 a second)", Always, Some("refresh")),
    row(&[(k(KeyCode::Left), Longer), (k(KeyCode::Right), Shorter)],
        "longer / shorter time window", Always, Some("window")),
    row(&[(k(KeyCode::Tab), NextPane)], "focus the next pane", Always, Some("focus")),
    row(&[(k(KeyCode::BackTab), PrevPane)], "focus the previous pane", Always, None),
    row(&[(k(KeyCode::Up), ScrollUp), (k(KeyCode::Down), ScrollDown)],
        "scroll the focused pane", Always, Some("scroll")),
    row(&[(k(KeyCode::PageUp), PageUp), (k(KeyCode::PageDown), PageDown)],
        "scroll it by 10 lines", Always, None),
    row(&[(k(KeyCode::End), Newest)], "back to its newest line", Always, None),
    row(&[(ch('?'), ShowHelp), (ch('h'), ShowHelp)], "this help", Always, Some("help")),
    row(&[(ch('s'), Summary)], "summary screen / dashboard", Ended, Some("summary")),
    row(&[(ch('n'), NextFile), (ch('p'), PrevFile)],
        "next / previous events file", Top, Some("file")),
    row(&[(ch('y'), Confirm), (ch('Y'), Confirm), (k(KeyCode::Enter), Confirm)],
        "stop the script and quit", Asking, None),
    row(&[(ch('?'), CloseHelp), (ch('h'), CloseHelp), (k(KeyCode::Esc), CloseHelp)],
        "close it, doing nothing else", Help, None),
];

/// What `k` does among the rows that apply (`on`); the first row listing it wins.
pub fn lookup(k: &KeyEvent, on: impl Fn(When) -> bool) -> Option<Cmd> {
    KEYS.iter()
        .filter(|b| on(b.when))
        .flat_map(|b| b.keys)
        .find(|(key, _)| key.matches(k))
        .map(|&(_, cmd)| cmd)
}

/// The help screen's rows, one per row of the table: the keys (`q, Esc`), what they do, and
/// when (empty: always).
pub fn help_rows() -> impl Iterator<Item = (String, &'static str, &'static str)> {
    KEYS.iter().map(|b| (b.label(), b.what, b.when.label()))
}

/// The first key that does `cmd` (`q` for [`Cmd::Quit`]), for hints outside the footer.
pub fn key_for(cmd: Cmd) -> String {
    KEYS.iter()
        .flat_map(|b| b.keys)
        .find(|(_, c)| *c == cmd)
        .map_or_else(String::new, |(key, _)| key.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        let label = |i: usize| (KEYS[i].label(), KEYS[i].short_label());
        assert_eq!(label(0), ("q, Esc".into(), "q".into()));
        assert_eq!(label(1), ("Ctrl-C".into(), "Ctrl-C".into()));
        assert_eq!(label(4), ("+, = / -".into(), "+/-".into()));
        assert_eq!(label(5), ("← / →".into(), "←/→".into()));
        assert_eq!((key_for(Quit), key_for(Summary)), ("q".into(), "s".into()));
    }

    #[test]
    fn ctrl_c_needs_ctrl() {
        let c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE);
        assert_eq!(lookup(&c, |_| true), None);
        let c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&c, |_| true), Some(Interrupt));
        let q = KeyEvent::new(KeyCode::Char('?'), KeyModifiers::SHIFT);
        assert_eq!(lookup(&q, |w| w == Always), Some(ShowHelp));
        assert_eq!(lookup(&q, |w| w == When::Help), Some(CloseHelp));
    }

    #[test]
    fn a_key_means_one_thing_at_a_time() {
        // Outside popups, and inside each popup, no key is listed twice.
        for modal in [None, Some(Asking), Some(When::Help)] {
            let keys: Vec<Key> = KEYS
                .iter()
                .filter(|b| {
                    if b.when.modal() {
                        Some(b.when) == modal
                    } else {
                        modal.is_none()
                    }
                })
                .flat_map(|b| b.keys.iter().map(|(k, _)| *k))
                .collect();
            for (i, a) in keys.iter().enumerate() {
                assert!(!keys[i + 1..].contains(a), "{} twice", a.name());
            }
        }
    }
}
