//! The dashboard's view state and what keys do to it, apart from the data (a
//! [`profile::aggregate::Aggregator`](crate::profile::aggregate::Aggregator)) and from drawing
//! ([`super::draw`]). Keys go through the one key table ([`super::keys::KEYS`]). Pure: keys in,
//! state and [`Action`]s out, so it is tested without a terminal.

use crossterm::event::{KeyEvent, KeyEventKind};

use super::keys::{self, Cmd, When};

/// Time windows for the charts and windowed statistics, in seconds (`←` longer, `→` shorter).
pub const WINDOWS: &[f64] = &[10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];
/// Redraw intervals in milliseconds (`+` faster, `-` slower); never more than 10 frames a second.
pub const RATES_MS: &[u64] = &[100, 200, 500, 1000, 2000, 5000];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Steps,
    Memory,
    Compiles,
    Syncs,
    Output,
}

impl Pane {
    pub const ALL: [Pane; 5] = [
        Pane::Steps,
        Pane::Memory,
        Pane::Compiles,
        Pane::Syncs,
        Pane::Output,
    ];
}

/// What the driver must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Stop the running script (the user confirmed `q`, or pressed Ctrl-C).
    Interrupt,
    /// Leave the dashboard.
    Leave,
    /// Show the next / previous events file (`tpuport top DIR`).
    NextFile,
    PrevFile,
}

#[derive(Debug, Clone, PartialEq)]
pub struct App {
    /// The time the view ends at while frozen (`None`: live).
    pub frozen_at: Option<f64>,
    /// Data before this time is left out of the charts and windowed numbers (`r`).
    pub reset_at: f64,
    pub window: usize,
    pub rate: usize,
    pub focus: Pane,
    /// Lines scrolled up from the newest, per scrollable pane.
    pub scroll_compiles: usize,
    pub scroll_syncs: usize,
    pub scroll_output: usize,
    pub help: bool,
    /// Asking "stop the running script?".
    pub confirm_quit: bool,
    /// The script has ended: the summary screen is shown (`s` toggles back to the dashboard).
    pub show_summary: bool,
    pub ended: bool,
    /// The user asked to stop the script; leave as soon as it has ended.
    pub leaving: bool,
    /// `tpuport top`: there is no script to stop, `q` leaves at once.
    pub attached: bool,
    /// Something in the view changed (keys); the driver redraws and clears it.
    pub dirty: bool,
}

impl Default for App {
    fn default() -> Self {
        App {
            frozen_at: None,
            reset_at: f64::NEG_INFINITY,
            window: 2,
            rate: 1,
            focus: Pane::Steps,
            scroll_compiles: 0,
            scroll_syncs: 0,
            scroll_output: 0,
            help: false,
            confirm_quit: false,
            show_summary: false,
            ended: false,
            leaving: false,
            attached: false,
            dirty: true,
        }
    }
}

impl App {
    pub fn new(attached: bool) -> App {
        App {
            attached,
            ..App::default()
        }
    }

    pub fn window_secs(&self) -> f64 {
        WINDOWS[self.window]
    }

    pub fn rate_ms(&self) -> u64 {
        RATES_MS[self.rate]
    }

    /// The time range shown, given the latest event time.
    pub fn view(&self, last_t: f64) -> (f64, f64) {
        let end = self.frozen_at.unwrap_or(last_t);
        let start = (end - self.window_secs()).max(self.reset_at).max(0.0);
        (start.min(end), end)
    }

    /// The script ended: show the summary screen.
    pub fn script_ended(&mut self) {
        if !self.ended {
            self.ended = true;
            self.show_summary = true;
            self.confirm_quit = false;
            self.dirty = true;
        }
    }

    /// Whether a row of the key table applies now, outside popups (they have their own rows).
    pub fn applies(&self, when: When) -> bool {
        match when {
            When::Always => true,
            When::Ended => self.ended,
            When::Top => self.attached,
            When::Asking | When::Help => false,
        }
    }

    /// Handle a key through the [key table](keys::KEYS); `now` is the latest event time (for freeze
    /// and reset).
    pub fn key(&mut self, k: KeyEvent, now: f64) -> Option<Action> {
        if k.kind == KeyEventKind::Release {
            return None;
        }
        self.dirty = true;
        let cmd = keys::lookup(&k, |w| self.applies(w));
        if cmd == Some(Cmd::Interrupt) {
            // Raw mode turns Ctrl-C into a key: it means what it means without a dashboard.
            return Some(self.stop_or_leave());
        }
        if self.confirm_quit {
            self.confirm_quit = false;
            if keys::lookup(&k, |w| w == When::Asking) == Some(Cmd::Confirm) {
                self.leaving = true;
                return Some(Action::Interrupt);
            }
            return None;
        }
        let closed_help = std::mem::take(&mut self.help);
        if closed_help && keys::lookup(&k, |w| w == When::Help).is_some() {
            return None;
        }
        match cmd {
            Some(cmd) => self.run(cmd, now),
            None => {
                self.dirty = closed_help;
                None
            }
        }
    }

    /// Carry out what a key of the table does.
    fn run(&mut self, cmd: Cmd, now: f64) -> Option<Action> {
        match cmd {
            Cmd::Quit if self.ended || self.attached => return Some(Action::Leave),
            Cmd::Quit => self.confirm_quit = true,
            Cmd::Interrupt => return Some(self.stop_or_leave()),
            Cmd::Confirm => {
                self.leaving = true;
                return Some(Action::Interrupt);
            }
            Cmd::Freeze => self.toggle_freeze(now),
            Cmd::Reset => self.reset(now),
            Cmd::Faster => self.rate = self.rate.saturating_sub(1),
            Cmd::Slower => self.rate = (self.rate + 1).min(RATES_MS.len() - 1),
            Cmd::Longer => self.window = (self.window + 1).min(WINDOWS.len() - 1),
            Cmd::Shorter => self.window = self.window.saturating_sub(1),
            Cmd::NextPane => self.focus = self.next_pane(1),
            Cmd::PrevPane => self.focus = self.next_pane(Pane::ALL.len() - 1),
            Cmd::ScrollUp => *self.scroll_mut() += 1,
            Cmd::ScrollDown => self.scroll_down(1),
            Cmd::PageUp => *self.scroll_mut() += 10,
            Cmd::PageDown => self.scroll_down(10),
            Cmd::Newest => *self.scroll_mut() = 0,
            Cmd::ShowHelp => self.help = true,
            Cmd::CloseHelp => self.help = false,
            Cmd::Summary => self.show_summary = !self.show_summary,
            Cmd::NextFile => return Some(Action::NextFile),
            Cmd::PrevFile => return Some(Action::PrevFile),
        }
        None
    }

    /// Ctrl-C: stop the script, or leave when there is none running.
    fn stop_or_leave(&self) -> Action {
        if self.ended || self.attached {
            Action::Leave
        } else {
            Action::Interrupt
        }
    }

    fn toggle_freeze(&mut self, now: f64) {
        self.frozen_at = match self.frozen_at {
            Some(_) => None,
            None => Some(now),
        }
    }

    /// Show only what comes from `now` on.
    fn reset(&mut self, now: f64) {
        self.reset_at = now;
        self.frozen_at = None;
        self.scroll_compiles = 0;
        self.scroll_syncs = 0;
        self.scroll_output = 0;
    }

    fn scroll_down(&mut self, by: usize) {
        let s = self.scroll_mut();
        *s = s.saturating_sub(by);
    }

    fn next_pane(&self, by: usize) -> Pane {
        let i = Pane::ALL.iter().position(|p| *p == self.focus).unwrap_or(0);
        Pane::ALL[(i + by) % Pane::ALL.len()]
    }

    fn scroll_mut(&mut self) -> &mut usize {
        match self.focus {
            Pane::Compiles => &mut self.scroll_compiles,
            Pane::Syncs => &mut self.scroll_syncs,
            _ => {
                self.focus = Pane::Output;
                &mut self.scroll_output
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyCode, KeyModifiers};

    use super::keys::KEYS;

    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn quit_asks_while_running() {
        let mut a = App::new(false);
        assert_eq!(a.key(key(KeyCode::Char('q')), 1.0), None);
        assert!(a.confirm_quit);
        assert_eq!(a.key(key(KeyCode::Char('n')), 1.0), None);
        assert!(!a.confirm_quit && !a.leaving);
        a.key(key(KeyCode::Char('q')), 1.0);
        assert_eq!(a.key(key(KeyCode::Char('y')), 1.0), Some(Action::Interrupt));
        assert!(a.leaving);
        a.script_ended();
        assert_eq!(a.key(key(KeyCode::Char('q')), 1.0), Some(Action::Leave));
    }

    #[test]
    fn freeze_window_rate() {
        let mut a = App::new(true);
        a.key(key(KeyCode::Char('f')), 5.0);
        assert_eq!(a.view(9.0), (0.0, 5.0));
        a.key(key(KeyCode::Char(' ')), 9.0);
        assert_eq!(a.frozen_at, None);
        a.key(key(KeyCode::Right), 0.0);
        a.key(key(KeyCode::Right), 0.0);
        a.key(key(KeyCode::Right), 0.0);
        assert_eq!(a.window_secs(), 10.0);
        assert_eq!(a.view(100.0), (90.0, 100.0));
        a.key(key(KeyCode::Char('r')), 95.0);
        assert_eq!(a.view(100.0), (95.0, 100.0));
        for _ in 0..10 {
            a.key(key(KeyCode::Char('+')), 0.0);
        }
        assert_eq!(a.rate_ms(), 100);
        a.key(key(KeyCode::Char('-')), 0.0);
        assert_eq!(a.rate_ms(), 200);
        assert_eq!(a.key(key(KeyCode::Char('q')), 0.0), Some(Action::Leave));
    }

    #[test]
    fn focus_and_scroll() {
        let mut a = App::new(true);
        a.key(key(KeyCode::Tab), 0.0);
        a.key(key(KeyCode::Tab), 0.0);
        assert_eq!(a.focus, Pane::Compiles);
        a.key(key(KeyCode::Up), 0.0);
        a.key(key(KeyCode::Up), 0.0);
        a.key(key(KeyCode::Down), 0.0);
        assert_eq!(a.scroll_compiles, 1);
        a.key(key(KeyCode::BackTab), 0.0);
        a.key(key(KeyCode::BackTab), 0.0);
        a.key(key(KeyCode::BackTab), 0.0);
        assert_eq!(a.focus, Pane::Output);
    }

    /// Every key the handler could be given: printable characters and the special keys, with
    /// and without Ctrl.
    fn all_keys() -> Vec<KeyEvent> {
        let special = [
            KeyCode::Esc,
            KeyCode::Enter,
            KeyCode::Tab,
            KeyCode::BackTab,
            KeyCode::Backspace,
            KeyCode::Left,
            KeyCode::Right,
            KeyCode::Up,
            KeyCode::Down,
            KeyCode::Home,
            KeyCode::End,
            KeyCode::PageUp,
            KeyCode::PageDown,
            KeyCode::Delete,
            KeyCode::F(1),
        ];
        let codes = (' '..='~').map(KeyCode::Char).chain(special);
        codes
            .flat_map(|c| [KeyModifiers::NONE, KeyModifiers::CONTROL].map(|m| KeyEvent::new(c, m)))
            .collect()
    }

    /// A view where the rows for `when` apply.
    fn state(when: When) -> App {
        let mut a = App::new(when == When::Top);
        match when {
            When::Always | When::Top => {}
            When::Ended => a.script_ended(),
            When::Asking => a.confirm_quit = true,
            When::Help => a.help = true,
        }
        a
    }

    /// Whether `k` does something in `base` beyond closing a popup.
    fn acts(base: &App, k: KeyEvent) -> bool {
        let mut a = base.clone();
        let action = a.key(k, 5.0);
        a.dirty = base.dirty;
        if base.confirm_quit {
            return action == Some(Action::Interrupt);
        }
        if base.help {
            let mut closed = base.clone();
            closed.help = false;
            return action.is_some() || a != closed;
        }
        action.is_some() || a != *base
    }

    const CONTEXTS: [When; 5] = [
        When::Always,
        When::Ended,
        When::Top,
        When::Asking,
        When::Help,
    ];

    #[test]
    fn the_handler_knows_exactly_the_keys_of_the_table() {
        for when in CONTEXTS {
            let base = state(when);
            for k in all_keys() {
                let own = keys::lookup(&k, |w| w == when);
                let listed = keys::lookup(&k, |w| base.applies(w));
                let expected = match when {
                    When::Asking => own == Some(Cmd::Confirm) || listed == Some(Cmd::Interrupt),
                    // The help's own keys only close it; any other key closes it and acts.
                    When::Help => own.is_none() && listed.is_some(),
                    _ => listed.is_some(),
                };
                assert_eq!(acts(&base, k), expected, "{k:?} in {base:?}");
            }
        }
    }

    #[test]
    fn the_help_lists_every_key_the_handler_knows() {
        let help: Vec<(String, When)> = KEYS.iter().map(|b| (b.label(), b.when)).collect();
        let listed = |name: &str, when: When| {
            help.iter()
                .any(|(l, w)| *w == when && l.split([',', '/']).any(|n| n.trim() == name))
        };
        for when in CONTEXTS {
            for k in all_keys() {
                if keys::lookup(&k, |w| w == when).is_none() {
                    continue;
                }
                let plain = keys::Key {
                    code: k.code,
                    ctrl: false,
                }
                .name();
                let ctrl = keys::Key {
                    code: k.code,
                    ctrl: true,
                }
                .name();
                assert!(
                    listed(&plain, when) || listed(&ctrl, when),
                    "{k:?} {when:?}"
                );
            }
        }
        // And every key the help shows is one the handler acts on, where the help says.
        for b in KEYS {
            for (key, _) in b.keys {
                let mods = if key.ctrl {
                    KeyModifiers::CONTROL
                } else {
                    KeyModifiers::NONE
                };
                let k = KeyEvent::new(key.code, mods);
                let base = state(b.when);
                let acts = acts(&base, k);
                assert_eq!(acts, b.when != When::Help, "{} {:?}", key.name(), b.when);
                assert!(listed(&key.name(), b.when));
            }
        }
    }
}
