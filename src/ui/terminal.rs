//! Taking over the terminal and always giving it back: raw mode and the alternate screen are
//! entered by [`TerminalGuard::enter`] and left when the guard is dropped (normal return, error,
//! or a panic unwinding), and a panic hook restores the terminal before the panic message is
//! printed, so the message is readable and the shell prompt works afterwards.

use std::io::{Stdout, Write, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use crossterm::cursor::Show;
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Whether the terminal is currently taken over (so restoring twice is harmless).
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

pub struct TerminalGuard {
    pub terminal: Term,
}

impl TerminalGuard {
    pub fn enter() -> Result<TerminalGuard> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode().context("cannot put the terminal in raw mode: use --no-tui")?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen) {
            restore();
            return Err(e).context("cannot open the dashboard screen: use --no-tui");
        }
        let terminal = match Terminal::new(CrosstermBackend::new(stdout())) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e).context("cannot draw on this terminal: use --no-tui");
            }
        };
        Ok(TerminalGuard { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Leave raw mode and the alternate screen and show the cursor; does nothing if not entered.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let mut out = stdout();
        let _ = execute!(out, LeaveAlternateScreen, Show);
        let _ = out.flush();
    }
}
