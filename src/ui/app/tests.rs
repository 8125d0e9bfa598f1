//! Tests of the view state: the keys' effects, and that the handler, the help screen and the
//! key table agree on every key.

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

/// `q` while the script runs, and it ends before the question is answered: the user asked to
/// leave, so the dashboard leaves, with no second `q` on the summary screen.
#[test]
fn quit_asked_then_the_script_ends_leaves() {
    let mut a = App::new(false);
    assert_eq!(a.key(key(KeyCode::Char('q')), 1.0), None);
    assert!(a.confirm_quit);
    a.script_ended();
    assert!(!a.confirm_quit);
    assert!(a.leaving, "the script ended while asking: leave");
    // A `q` answered with no (or never pressed) does not leave on its own.
    let mut a = App::new(false);
    a.key(key(KeyCode::Char('q')), 1.0);
    a.key(key(KeyCode::Char('n')), 1.0);
    a.script_ended();
    assert!(!a.leaving && a.show_summary);
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
    // The help screen's rows (drawn as they are by ui::draw::help): keys, and when.
    let help: Vec<(String, When)> = keys::help_rows()
        .map(|(label, _, when)| {
            let when = CONTEXTS.into_iter().find(|w| w.label() == when).unwrap();
            (label, when)
        })
        .collect();
    assert_eq!(help.len(), KEYS.len());
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
