//! `tpuport run --watch`: run the script, and run it again whenever it or a Python file in its
//! folder changes (debounced: [`crate::watch`]). A change while the script runs interrupts it
//! (as Ctrl-C would) and starts it again; a change after it ended starts it again. One observer
//! shows every run: the dashboard restarts in place (fresh numbers, same terminal), step lines
//! print a line between runs. Leaving the dashboard, or Ctrl-C while waiting, ends the watch.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;

use super::RunOptions;
use super::launcher::{Control, ObserverChoice, RunObserver, StepLines};
use crate::profile::event::Event;
use crate::watch::Changes;

type Slot = Rc<RefCell<Option<Box<dyn RunObserver>>>>;

/// Run `options()` until the user stops; `observer` shows every run (None: step lines). Returns
/// the last run's exit code.
pub fn run_watching(
    mut options: impl FnMut() -> RunOptions,
    observer: Option<Box<dyn RunObserver>>,
    script: &Path,
) -> Result<i32> {
    let folder = script
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let changes = Rc::new(RefCell::new(Changes::new(
        &[folder.clone(), script.to_path_buf()],
        false,
    )?));
    let stop = Arc::new(AtomicBool::new(false));
    let slot: Slot = Rc::new(RefCell::new(Some(
        observer.unwrap_or_else(|| Box::new(StepLines::default())),
    )));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    let mut code;
    loop {
        let restart = Rc::new(Cell::new(None::<Vec<PathBuf>>));
        let mut opts = options();
        let shared = Shared {
            slot: Rc::clone(&slot),
            changes: Rc::clone(&changes),
            restart: Rc::clone(&restart),
            left: false,
        };
        opts.observer = ObserverChoice::Start(Box::new(move || Box::new(shared)));
        code = super::run(opts)?;
        let changed = match restart.take() {
            Some(changed) => changed,
            None => {
                let Some(mut o) = slot.borrow_mut().take() else {
                    return Ok(code); // the user left the dashboard
                };
                // Step lines: wait here for a change (Ctrl-C ends the watch, also one that
                // stopped the run).
                eprintln!(
                    "tpuport: watching {} for changes to Python files (Ctrl-C to stop)",
                    folder.display()
                );
                let changed = loop {
                    if stop.load(Ordering::SeqCst) {
                        return Ok(code);
                    }
                    let c = changes.borrow_mut().wait(Duration::from_millis(200));
                    if !c.is_empty() {
                        break c;
                    }
                };
                o.restart();
                *slot.borrow_mut() = Some(o);
                changed
            }
        };
        let line = format!("tpuport: {} changed: running it again", names(&changed));
        match slot.borrow_mut().as_mut() {
            Some(o) if !o.passthrough() => {
                o.restart();
                o.note(&line);
            }
            _ => eprintln!("\n{line}\n"),
        }
        changes.borrow_mut().clear();
    }
}

fn names(paths: &[PathBuf]) -> String {
    let n: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name()
                .map(|f| f.to_string_lossy().to_string())
                .unwrap_or_else(|| p.display().to_string())
        })
        .collect();
    n.join(", ")
}

/// The watch's observer as one run sees it: the run's events go to the shared observer, and a
/// change interrupts the run (while it runs) or ends its summary screen (after).
struct Shared {
    slot: Slot,
    changes: Rc<RefCell<Changes>>,
    /// Set when a change asks for another run: the files that changed.
    restart: Rc<Cell<Option<Vec<PathBuf>>>>,
    /// The user left the dashboard: the watch ends, and this run's summary is printed.
    left: bool,
}

impl Shared {
    fn changed(&self) -> bool {
        let c = self.changes.borrow_mut().wait(Duration::ZERO);
        if c.is_empty() {
            return false;
        }
        self.restart.set(Some(c));
        true
    }

    fn with<T>(&self, default: T, f: impl FnOnce(&mut Box<dyn RunObserver>) -> T) -> T {
        match self.slot.borrow_mut().as_mut() {
            Some(o) => f(o),
            None => default,
        }
    }
}

impl RunObserver for Shared {
    fn passthrough(&self) -> bool {
        self.with(true, |o| o.passthrough())
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        self.with(Ok(()), |o| o.event(e))
    }

    fn note(&mut self, msg: &str) {
        self.with((), |o| o.note(msg))
    }

    fn tick(&mut self) -> Result<Vec<Control>> {
        let mut controls = self.with(Ok(vec![]), |o| o.tick())?;
        if !controls.contains(&Control::Interrupt) && self.changed() {
            self.note("tpuport: a file changed: stopping the script to run it again");
            controls.push(Control::Interrupt);
        }
        Ok(controls)
    }

    fn finish(&mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        // Interrupted because of a change: straight to the next run.
        let restarting = {
            let r = self.restart.take();
            let yes = r.is_some();
            self.restart.set(r);
            yes
        };
        if restarting || self.passthrough() {
            return Ok(());
        }
        let result = self.with(Ok(()), |o| {
            o.finish(&|| {
                if stop() {
                    return true;
                }
                let c = self.changes.borrow_mut().wait(Duration::ZERO);
                if c.is_empty() {
                    return false;
                }
                self.restart.set(Some(c));
                true
            })
        });
        let r = self.restart.take();
        let again = r.is_some();
        self.restart.set(r);
        if !again {
            // The user left: give the terminal back, and the launcher prints the summary.
            self.slot.borrow_mut().take();
            self.left = true;
        }
        result
    }

    fn prints_summary(&self) -> bool {
        self.left || self.passthrough()
    }
}
