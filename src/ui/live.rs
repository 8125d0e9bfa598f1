//! The dashboard driven by someone else's loop: `tpuport run` feeds it events as they are
//! recorded and calls [`Dashboard::tick`] often; it reads keys without waiting and redraws at
//! most at the chosen rate (never more than 10 times a second), and only when something changed.
//! [`LiveRun`] is the dashboard as the runtime's [`RunObserver`].

use std::time::{Duration, Instant};

use anyhow::Result;
use crossterm::event::{self, Event as TermEvent};

use super::app::{Action, App};
use super::draw::{self, Context};
use super::terminal::TerminalGuard;
use crate::profile::aggregate::Aggregator;
use crate::profile::event::Event;
use crate::runtime::launcher::{Control, RunObserver};

/// Never redraw more often than this, whatever the rate.
const MIN_FRAME: Duration = Duration::from_millis(100);

pub struct Dashboard {
    guard: TerminalGuard,
    pub app: App,
    pub agg: Aggregator,
    started: Instant,
    last_draw: Option<Instant>,
    drawn_generation: u64,
    drawn_second: u64,
    pub source: Option<String>,
    /// A multi-process run: every rank's numbers over the window, and the rank on screen.
    pub ranks: Vec<crate::profile::ranks::RankStats>,
    pub current_rank: Option<u32>,
}

impl Dashboard {
    /// Take over the terminal (restored when the dashboard is dropped, or on a panic).
    pub fn start(attached: bool) -> Result<Dashboard> {
        Ok(Dashboard {
            guard: TerminalGuard::enter()?,
            app: App::new(attached),
            agg: Aggregator::new(),
            started: Instant::now(),
            last_draw: None,
            drawn_generation: u64::MAX,
            drawn_second: u64::MAX,
            source: None,
            ranks: vec![],
            current_rank: None,
        })
    }

    /// A new run in the same terminal (`run --watch`): fresh data and a fresh view, the chosen
    /// window and redraw rate kept.
    pub fn restart(&mut self) {
        let (window, rate) = (self.app.window, self.app.rate);
        self.app = App::new(self.app.attached);
        self.app.window = window;
        self.app.rate = rate;
        self.agg = Aggregator::new();
        self.started = Instant::now();
        self.drawn_generation = u64::MAX;
    }

    pub fn event(&mut self, e: &Event) {
        self.agg.add(e);
        if matches!(e, Event::RunEnd(_)) {
            self.app.script_ended();
        }
    }

    pub fn note(&mut self, line: &str) {
        self.agg.note(line);
    }

    fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Handle the keys pressed since the last call (without waiting) and redraw if due.
    pub fn tick(&mut self) -> Result<Vec<Action>> {
        let mut actions = vec![];
        while event::poll(Duration::ZERO)? {
            match event::read()? {
                TermEvent::Key(k) => {
                    let now = self.agg.last_t;
                    if let Some(a) = self.app.key(k, now) {
                        actions.push(a);
                    }
                }
                TermEvent::Resize(..) => self.app.dirty = true,
                _ => {}
            }
        }
        self.draw_if_due()?;
        Ok(actions)
    }

    fn draw_if_due(&mut self) -> Result<()> {
        let second = self.elapsed() as u64;
        let changed = self.app.dirty
            || self.agg.generation != self.drawn_generation
            || (second != self.drawn_second && !self.app.ended && self.app.frozen_at.is_none());
        if !changed {
            return Ok(());
        }
        // Keys get an answer at the fastest rate; data waits for the chosen one.
        let wait = if self.app.dirty {
            MIN_FRAME
        } else {
            Duration::from_millis(self.app.rate_ms()).max(MIN_FRAME)
        };
        if self.last_draw.is_some_and(|t| t.elapsed() < wait) {
            return Ok(());
        }
        self.draw()?;
        self.drawn_second = second;
        Ok(())
    }

    pub fn draw(&mut self) -> Result<()> {
        let ctx = Context {
            elapsed: self.elapsed(),
            source: self.source.clone(),
            ranks: self.ranks.clone(),
            current_rank: self.current_rank,
        };
        let (app, agg) = (&self.app, &self.agg);
        self.guard
            .terminal
            .draw(|f| draw::draw(f, app, agg, &ctx))?;
        self.app.dirty = false;
        self.drawn_generation = self.agg.generation;
        self.last_draw = Some(Instant::now());
        Ok(())
    }

    /// The script has ended: keep the summary screen until the user leaves, or until `stop`
    /// says so (a signal arrived). Returns at once if the user already asked to quit.
    pub fn wait_until_leave(&mut self, stop: impl Fn() -> bool) -> Result<()> {
        self.app.script_ended();
        if self.app.leaving {
            return Ok(());
        }
        loop {
            if stop() {
                return Ok(());
            }
            if event::poll(Duration::from_millis(100))? {
                match event::read()? {
                    TermEvent::Key(k) => {
                        let now = self.agg.last_t;
                        if let Some(Action::Leave | Action::Interrupt) = self.app.key(k, now) {
                            return Ok(());
                        }
                    }
                    TermEvent::Resize(..) => self.app.dirty = true,
                    _ => {}
                }
            }
            self.draw_if_due()?;
        }
    }
}

/// The dashboard watching a `tpuport run`: it shows the script's output in its own pane (no
/// passthrough), turns an interrupt asked for with keys into [`Control::Interrupt`], and keeps
/// its summary screen at the end until the user leaves.
pub struct LiveRun {
    dash: Dashboard,
}

impl LiveRun {
    /// Take over the terminal; an error says why it cannot be (the caller falls back).
    pub fn start() -> Result<LiveRun> {
        Ok(LiveRun {
            dash: Dashboard::start(false)?,
        })
    }
}

impl RunObserver for LiveRun {
    fn passthrough(&self) -> bool {
        false
    }

    fn event(&mut self, e: &Event) -> Result<()> {
        self.dash.event(e);
        Ok(())
    }

    fn note(&mut self, msg: &str) {
        self.dash.note(msg);
    }

    fn tick(&mut self) -> Result<Vec<Control>> {
        let actions = self.dash.tick()?;
        Ok(actions
            .into_iter()
            .filter(|a| *a == Action::Interrupt)
            .map(|_| Control::Interrupt)
            .collect())
    }

    fn finish(&mut self, stop: &dyn Fn() -> bool) -> Result<()> {
        self.dash.wait_until_leave(stop)
    }

    fn restart(&mut self) {
        self.dash.restart();
    }
}
