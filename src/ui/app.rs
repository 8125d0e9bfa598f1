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
    /// The user asked to stop the script, or pressed `q` and the script ended before they
    /// answered; leave as soon as it has ended.
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

    /// The script ended: show the summary screen; or, if the user was being asked whether to
    /// stop it and quit, leave without asking for another `q` (they asked to leave).
    pub fn script_ended(&mut self) {
        if !self.ended {
            self.ended = true;
            self.show_summary = true;
            self.leaving |= self.confirm_quit;
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

    /// Handle a key through the [key table](keys::KEYS); `now` is the latest event time (for
    /// freeze and reset).
    pub fn key(&mut self, k: KeyEvent, now: f64) -> Option<Action> {
        if k.kind == KeyEventKind::Release {
            return None;
        }
        self.dirty = true;
        let cmd = keys::lookup(&k, |w| self.applies(w));
        if cmd == Some(Cmd::Interrupt) {
            // Raw mode turns Ctrl-C into a key: it means what it means without a dashboard,
            // popups or not.
            return self.run(Cmd::Interrupt, now);
        }
        if self.confirm_quit {
            self.confirm_quit = false;
            // Any key but the question's own answers no.
            return match keys::lookup(&k, |w| w == When::Asking) {
                Some(yes) => self.run(yes, now),
                None => None,
            };
        }
        // Any key closes the help; its own keys do nothing else.
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
            // Ctrl-C: stop the script, or leave when there is none running.
            Cmd::Interrupt if self.ended || self.attached => return Some(Action::Leave),
            Cmd::Interrupt => return Some(Action::Interrupt),
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
mod tests;
