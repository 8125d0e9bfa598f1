//! The dashboard's view state and its key bindings, apart from the data (a
//! [`profile::aggregate::Aggregator`](crate::profile::aggregate::Aggregator)) and from drawing
//! ([`super::widgets`]). Pure: keys in, state and [`Action`]s out, so it is tested without a
//! terminal.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

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

#[derive(Debug, Clone)]
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

    /// Handle a key; `now` is the latest event time (for freeze and reset).
    pub fn key(&mut self, k: KeyEvent, now: f64) -> Option<Action> {
        if k.kind == KeyEventKind::Release {
            return None;
        }
        self.dirty = true;
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            // Raw mode turns Ctrl-C into a key: it means what it means without a dashboard.
            return Some(if self.ended || self.attached {
                Action::Leave
            } else {
                Action::Interrupt
            });
        }
        if self.confirm_quit {
            self.confirm_quit = false;
            return match k.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.leaving = true;
                    Some(Action::Interrupt)
                }
                _ => None,
            };
        }
        if self.help {
            self.help = false;
            if matches!(k.code, KeyCode::Char('?') | KeyCode::Esc) {
                return None;
            }
        }
        match k.code {
            KeyCode::Char('q') | KeyCode::Esc => {
                if self.ended || self.attached {
                    return Some(Action::Leave);
                }
                self.confirm_quit = true;
            }
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = true,
            KeyCode::Char('f') | KeyCode::Char(' ') => {
                self.frozen_at = match self.frozen_at {
                    Some(_) => None,
                    None => Some(now),
                }
            }
            KeyCode::Char('r') => {
                self.reset_at = now;
                self.frozen_at = None;
                self.scroll_compiles = 0;
                self.scroll_syncs = 0;
                self.scroll_output = 0;
            }
            KeyCode::Char('+') | KeyCode::Char('=') => self.rate = self.rate.saturating_sub(1),
            KeyCode::Char('-') => self.rate = (self.rate + 1).min(RATES_MS.len() - 1),
            KeyCode::Left => self.window = (self.window + 1).min(WINDOWS.len() - 1),
            KeyCode::Right => self.window = self.window.saturating_sub(1),
            KeyCode::Tab => self.focus = self.next_pane(1),
            KeyCode::BackTab => self.focus = self.next_pane(Pane::ALL.len() - 1),
            KeyCode::Up => *self.scroll_mut() += 1,
            KeyCode::Down => {
                let s = self.scroll_mut();
                *s = s.saturating_sub(1);
            }
            KeyCode::PageUp => *self.scroll_mut() += 10,
            KeyCode::PageDown => {
                let s = self.scroll_mut();
                *s = s.saturating_sub(10);
            }
            KeyCode::End => *self.scroll_mut() = 0,
            KeyCode::Char('s') if self.ended => self.show_summary = !self.show_summary,
            KeyCode::Char('n') => return Some(Action::NextFile),
            KeyCode::Char('p') => return Some(Action::PrevFile),
            _ => self.dirty = false,
        }
        None
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
}
