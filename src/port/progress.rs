//! The progress bar of `tpuport migrate` on large trees: `migrating 1234/6540 files` on stderr
//! while the rayon workers run, cleared before the findings, the diff or the summary are
//! printed, so it never mixes with them (stdout is often piped while stderr is a terminal).
//!
//! [`wanted`] decides whether it is shown: only when stderr is a terminal, the run is not
//! `--quiet`, there are at least [`MIN_FILES`] files, and the environment does not say no
//! (`CI` set, `TPUPORT_NO_PROGRESS` set, `TERM=dumb`). `NO_COLOR` does not hide it: the bar has
//! no colour. Otherwise [`Progress`] holds no bar and costs one branch per file.
//!
//! Cost when shown: [`Progress::inc`] is an atomic add, plus at most about one lock a
//! millisecond (indicatif's own rate limit); drawing happens on indicatif's ticker thread every
//! [`TICK`], and the terminal is redrawn at most [`MAX_HZ`] times a second.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Runs with fewer files finish before a bar would tell anything: no bar.
pub const MIN_FILES: usize = 200;
/// How often the ticker thread redraws the bar.
pub const TICK: Duration = Duration::from_millis(100);
/// The most redraws a second, whatever the ticker or the workers ask for.
pub const MAX_HZ: u8 = 10;

/// Whether a variable counts as set: present, not empty, and not `0` or `false`.
fn set(value: Option<String>) -> bool {
    value.is_some_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// Whether to show the bar for a run over `files` files. `env` reads an environment variable
/// (`|k| std::env::var(k).ok()` in the program; a table in the tests).
pub fn wanted(
    stderr_tty: bool,
    quiet: bool,
    files: usize,
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    stderr_tty
        && !quiet
        && files >= MIN_FILES
        && !set(env("CI"))
        && !set(env("TPUPORT_NO_PROGRESS"))
        && env("TERM").as_deref() != Some("dumb")
}

/// The bar, or nothing when [`wanted`] said no. Share it with the workers by reference (it is
/// `Sync`); it is cleared by [`Progress::clear`] or, at the latest, when dropped.
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over `files` files if [`wanted`] for this process's stderr and environment.
    pub fn start(files: usize, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let tty = std::io::stderr().is_terminal();
        if !wanted(tty, quiet, files, |k| std::env::var(k).ok()) {
            return Progress(None);
        }
        let bar = ProgressBar::with_draw_target(
            Some(files as u64),
            ProgressDrawTarget::stderr_with_hz(MAX_HZ),
        );
        let style =
            ProgressStyle::with_template("migrating {pos}/{len} files [{bar:30}] {elapsed}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(TICK);
        Progress(Some(bar))
    }

    /// Whether a bar is shown.
    pub fn shown(&self) -> bool {
        self.0.is_some()
    }

    /// One more file done (called from the rayon workers).
    pub fn inc(&self) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
        }
    }

    /// Stop the ticker and erase the bar's line; call before printing anything.
    pub fn clear(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn shown_on_a_terminal_for_a_large_run() {
        assert!(wanted(true, false, MIN_FILES, env(&[])));
        assert!(wanted(
            true,
            false,
            6540,
            env(&[("TERM", "xterm-256color")])
        ));
    }

    #[test]
    fn not_when_stderr_is_not_a_terminal_or_quiet() {
        assert!(!wanted(false, false, 6540, env(&[])));
        assert!(!wanted(true, true, 6540, env(&[])));
    }

    #[test]
    fn not_for_a_small_run() {
        assert!(!wanted(true, false, MIN_FILES - 1, env(&[])));
        assert!(!wanted(true, false, 0, env(&[])));
    }

    #[test]
    fn the_environment_can_say_no() {
        for vars in [
            &[("CI", "true")][..],
            &[("CI", "1")],
            &[("TPUPORT_NO_PROGRESS", "1")],
            &[("TERM", "dumb")],
        ] {
            assert!(!wanted(true, false, 6540, env(vars)), "{vars:?}");
        }
        // Set to nothing, 0 or false means unset; NO_COLOR is about colour, which the bar has not.
        for vars in [
            &[("CI", "")][..],
            &[("CI", "false")],
            &[("CI", "0")],
            &[("TPUPORT_NO_PROGRESS", "0")],
            &[("NO_COLOR", "1")],
        ] {
            assert!(wanted(true, false, 6540, env(vars)), "{vars:?}");
        }
    }

    #[test]
    fn no_bar_is_free_and_quiet() {
        let p = Progress(None);
        assert!(!p.shown());
        p.inc();
        p.clear();
    }
}
