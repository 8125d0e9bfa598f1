//! The review screen's state (`tpuport migrate -i`) and what keys do to it: keys in, state and
//! an [`Action`] out; no terminal, no files, so it is tested on its own. [`KEYS`] is the one key
//! table, read by the footer and the help screen.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub use crate::port::review::Decision;

/// The keys, as the footer and the help screen show them.
pub const KEYS: &[(&str, &str)] = &[
    ("y a", "accept this fix"),
    ("n s", "skip this fix"),
    ("A", "accept this and every remaining fix of this rule"),
    ("e", "edit the fixed lines in $EDITOR (then accepted)"),
    ("↑ ↓ PgUp PgDn", "scroll the rule's documentation"),
    (
        "q Esc",
        "quit: write the fixes accepted so far, skip the rest",
    ),
    ("?", "this help"),
];

/// What the driver must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Draw again.
    Redraw,
    /// Open the fix `i` (a proposal index) in the editor.
    Edit(usize),
    /// The review is over (every fix decided, or `q`).
    Done,
}

#[derive(Debug)]
pub struct Review {
    /// The rule id of each fix on offer, in order.
    rules: Vec<String>,
    pub decisions: Vec<Decision>,
    /// The fix shown.
    pub current: usize,
    /// Lines the rule's documentation is scrolled down.
    pub scroll: u16,
    pub help: bool,
    /// Ended with `q` (the undecided fixes are skipped).
    pub quit: bool,
    /// A line for the person (after an edit).
    pub note: Option<String>,
}

impl Review {
    pub fn new(rules: Vec<String>) -> Review {
        Review {
            decisions: vec![Decision::Pending; rules.len()],
            rules,
            current: 0,
            scroll: 0,
            help: false,
            quit: false,
            note: None,
        }
    }

    /// No fix left undecided.
    pub fn done(&self) -> bool {
        self.quit || !self.decisions.contains(&Decision::Pending)
    }

    /// "fix 3 of 12": the one shown (from 1) and the total.
    pub fn progress(&self) -> (usize, usize) {
        (self.current + 1, self.rules.len())
    }

    /// Accepted, skipped and undecided fixes so far.
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |x| self.decisions.iter().filter(|d| **d == x).count();
        (
            n(Decision::Accepted),
            n(Decision::Skipped),
            n(Decision::Pending),
        )
    }

    pub fn key(&mut self, k: KeyEvent) -> Action {
        if self.done() {
            return Action::Done;
        }
        let ctrl_c = k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
        if self.help && !ctrl_c {
            // Any key closes the help; `?` and Esc do nothing else.
            self.help = false;
            if matches!(k.code, KeyCode::Char('?') | KeyCode::Esc) {
                return Action::Redraw;
            }
        }
        self.note = None;
        match k.code {
            _ if ctrl_c => return self.quit(),
            KeyCode::Char('y' | 'a') => self.decide(Decision::Accepted),
            KeyCode::Char('n' | 's') => self.decide(Decision::Skipped),
            KeyCode::Char('A') => {
                let rule = self.rules[self.current].clone();
                for (d, r) in self.decisions.iter_mut().zip(&self.rules) {
                    if *r == rule && *d == Decision::Pending {
                        *d = Decision::Accepted;
                    }
                }
                self.decisions[self.current] = Decision::Accepted;
                self.advance();
            }
            KeyCode::Char('e') => return Action::Edit(self.current),
            KeyCode::Char('q') | KeyCode::Esc => return self.quit(),
            KeyCode::Char('?') => self.help = true,
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(10),
            _ => {}
        }
        if self.done() {
            Action::Done
        } else {
            Action::Redraw
        }
    }

    /// The fix `i` was edited and saved: it is accepted (with the edit).
    pub fn edited(&mut self, i: usize) -> Action {
        self.decisions[i] = Decision::Accepted;
        self.note = Some(format!("fix {} edited and accepted", i + 1));
        self.advance();
        if self.done() {
            Action::Done
        } else {
            Action::Redraw
        }
    }

    fn quit(&mut self) -> Action {
        self.quit = true;
        for d in &mut self.decisions {
            if *d == Decision::Pending {
                *d = Decision::Skipped;
            }
        }
        Action::Done
    }

    fn decide(&mut self, d: Decision) {
        self.decisions[self.current] = d;
        self.advance();
    }

    /// To the next undecided fix after this one (else the first before it).
    fn advance(&mut self) {
        let n = self.decisions.len();
        if let Some(i) = (1..=n)
            .map(|k| (self.current + k) % n)
            .find(|i| self.decisions[*i] == Decision::Pending)
        {
            self.current = i;
            self.scroll = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(rules: &[&str]) -> Review {
        Review::new(rules.iter().map(|r| r.to_string()).collect())
    }

    fn press(r: &mut Review, c: char) -> Action {
        r.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
    }

    use Decision::{Accepted as A, Pending as P, Skipped as S};

    #[test]
    fn accept_and_skip_move_on() {
        let mut r = review(&["DEV016", "CUD007", "DEV006"]);
        assert_eq!(r.progress(), (1, 3));
        assert_eq!(press(&mut r, 'y'), Action::Redraw);
        assert_eq!(r.progress(), (2, 3));
        press(&mut r, 's');
        assert_eq!(r.decisions, [A, S, P]);
        assert_eq!(press(&mut r, 'a'), Action::Done);
        assert_eq!(r.decisions, [A, S, A]);
        assert!(r.done() && !r.quit);
        assert_eq!(r.counts(), (2, 1, 0));
    }

    #[test]
    fn accept_all_of_a_rule() {
        let mut r = review(&["DEV001", "CUD001", "DEV001", "DEV001"]);
        press(&mut r, 'n');
        assert_eq!(r.current, 1);
        press(&mut r, 'n');
        // On the second DEV001: it and the fourth are accepted; the first stays skipped.
        assert_eq!(press(&mut r, 'A'), Action::Done);
        assert_eq!(r.decisions, [S, S, A, A]);
    }

    #[test]
    fn accept_all_leaves_other_rules_pending() {
        let mut r = review(&["DEV001", "CUD001", "DEV001"]);
        assert_eq!(press(&mut r, 'A'), Action::Redraw);
        assert_eq!(r.decisions, [A, P, A]);
        assert_eq!(r.current, 1);
    }

    #[test]
    fn quit_skips_the_rest_and_keeps_what_was_accepted() {
        let mut r = review(&["DEV016", "CUD007", "DEV006"]);
        press(&mut r, 'y');
        assert_eq!(press(&mut r, 'q'), Action::Done);
        assert!(r.quit);
        assert_eq!(r.decisions, [A, S, S]);
        let mut r = review(&["DEV016"]);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(r.key(ctrl_c), Action::Done);
        assert_eq!(r.decisions, [S]);
    }

    #[test]
    fn help_edit_and_scroll() {
        let mut r = review(&["DEV016", "CUD007"]);
        press(&mut r, '?');
        assert!(r.help);
        // A key closes the help and does its job.
        press(&mut r, 'j');
        assert!(!r.help);
        assert_eq!(r.scroll, 1);
        assert_eq!(press(&mut r, 'e'), Action::Edit(0));
        assert_eq!(r.edited(0), Action::Redraw);
        assert_eq!((r.decisions[0], r.current, r.scroll), (A, 1, 0));
        assert!(r.note.is_some());
    }
}
