//! Aggregation of an event stream into what the dashboard and the report draw: the step-time,
//! throughput and memory series, the compiles with their reasons, host syncs per step and their
//! call sites, and the script's output. The headline numbers (steps, median/p90 step time,
//! compiles, peak memory, syncs) stay in [`Summary`], which this wraps, so the end-of-run summary,
//! the dashboard and the report agree.
//!
//! Memory is bounded for long runs: per step it keeps 8 bytes of step time (in the summary) and
//! 8 bytes of timestamp, plus 4 bytes each for samples and tokens only once a step reports them,
//! and 24 for its phases (the step breakdown);
//! memory samples take 24 bytes each, and a flat stretch of them only two; the output pane and
//! the compile table keep the latest lines only.

use std::collections::{HashMap, VecDeque};

use super::event::{Compile, Event, RunEnd, RunStart};
use super::skipped::{Skip, Skipped};
use super::summary::{Summary, percentile};

/// Output lines kept for the output pane.
pub const MAX_LOG_LINES: usize = 5_000;
/// Compile rows kept for the compile table (counts and totals cover all of them).
pub const MAX_COMPILE_ROWS: usize = 1_000;

#[derive(Debug, Clone, PartialEq)]
pub struct LogLine {
    pub t: f64,
    /// `stdout`, `stderr`, `tpuport` (the runtime's notes) or `warning`.
    pub stream: String,
    pub line: String,
}

/// One memory sample: device bytes (allocated, else peak) and the process RSS; 24 bytes
/// (`u64::MAX` stands for "not reported").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemPoint {
    pub t: f64,
    device: u64,
    rss: u64,
}

impl MemPoint {
    pub fn new(t: f64, device: Option<u64>, rss: Option<u64>) -> MemPoint {
        MemPoint {
            t,
            device: device.unwrap_or(u64::MAX),
            rss: rss.unwrap_or(u64::MAX),
        }
    }

    pub fn device(&self) -> Option<u64> {
        (self.device != u64::MAX).then_some(self.device)
    }

    pub fn rss(&self) -> Option<u64> {
        (self.rss != u64::MAX).then_some(self.rss)
    }
}

/// Compile time per window of the run, for the "compiles over time" chart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompilePoint {
    pub t: f64,
    /// Forward compiles so far (first compiles and recompiles), as counted by [`Summary`].
    pub total: u64,
    pub seconds: f64,
    pub recompile: bool,
}

/// Statistics of the steps inside a time window.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowStats {
    pub steps: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub samples_per_s: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub syncs_per_step: Option<f64>,
    /// Where these steps' time goes (steady steps with phases).
    pub breakdown: Option<super::breakdown::Breakdown>,
}

#[derive(Debug, Default, Clone)]
pub struct Aggregator {
    /// The headline numbers: one source of truth with the end-of-run summary.
    pub summary: Summary,
    /// `t` of each step event; `summary.step_times[i]` is its duration.
    pub step_t: Vec<f64>,
    pub memory: Vec<MemPoint>,
    pub compiles: Vec<CompilePoint>,
    /// The latest compile events, oldest first (at most [`MAX_COMPILE_ROWS`]).
    pub compile_rows: VecDeque<Compile>,
    /// The last compile that hit the recompile limit.
    pub limit_hit: Option<Compile>,
    /// Recompile reasons (normalised: without ids and sizes) with their counts.
    pub reasons: HashMap<String, u64>,
    /// Host syncs per step: (step, count), in order.
    pub syncs: Vec<(u64, u64)>,
    /// `file:line` → host syncs there, over the whole run.
    pub sync_sites: HashMap<String, u64>,
    pub logs: VecDeque<LogLine>,
    pub logs_dropped: u64,
    /// Lines of an events file that were skipped: unreadable, or events of an unknown type.
    pub skipped: Skipped,
    /// The latest event time seen.
    pub last_t: f64,
    /// Bumped on every change: a view redraws only when this moved.
    pub generation: u64,
}

impl Aggregator {
    pub fn new() -> Aggregator {
        Aggregator::default()
    }

    pub fn run_start(&self) -> Option<&RunStart> {
        self.summary.run_start.as_ref()
    }

    pub fn run_end(&self) -> Option<&RunEnd> {
        self.summary.run_end.as_ref()
    }

    /// HBM capacity of one device, when known (see [`Summary::capacity`]).
    pub fn capacity(&self) -> Option<u64> {
        self.summary.capacity()
    }

    pub fn add(&mut self, e: &Event) {
        self.generation += 1;
        self.last_t = self.last_t.max(e.time());
        self.summary.add(e);
        match e {
            Event::Step(s) => {
                self.step_t.push(s.t);
            }
            Event::Compile(c) => {
                if c.status == "limit_hit" {
                    self.limit_hit = Some(c.clone());
                }
                if c.status == "ok" && c.kind == "forward" {
                    if let Some(r) = &c.reason {
                        *self.reasons.entry(normalize_reason(r)).or_default() += 1;
                    }
                    self.compiles.push(CompilePoint {
                        t: c.t,
                        total: self.summary.compiles,
                        seconds: c.seconds,
                        recompile: c.reason.is_some(),
                    });
                }
                if self.compile_rows.len() == MAX_COMPILE_ROWS {
                    self.compile_rows.pop_front();
                }
                self.compile_rows.push_back(c.clone());
            }
            Event::Memory(m) => {
                let p = MemPoint::new(m.t, m.allocated.or(m.peak), m.rss);
                // A flat stretch keeps its first and its latest sample only.
                let n = self.memory.len();
                let same = |q: &MemPoint| q.device == p.device && q.rss == p.rss;
                if n >= 2 && same(&self.memory[n - 1]) && same(&self.memory[n - 2]) {
                    self.memory[n - 1].t = p.t;
                } else {
                    self.memory.push(p);
                }
            }
            Event::Sync(s) => {
                let n = s.total();
                match self.syncs.last_mut() {
                    Some((step, count)) if *step == s.step => *count = count.saturating_add(n),
                    _ => self.syncs.push((s.step, n)),
                }
                for (site, n) in &s.sites {
                    let at = self.sync_sites.entry(site.clone()).or_default();
                    *at = at.saturating_add(*n);
                }
            }
            Event::Log(l) => self.log(l.t, &l.stream, &l.line),
            Event::Warning(w) => {
                let line = format!("{}: {} ({}:{})", w.category, w.message, w.file, w.line);
                self.log(w.t, "warning", &line)
            }
            Event::RunStart(_) | Event::RunEnd(_) => {}
        }
    }

    /// A line for the output pane that is not an event (tpuport's own notes in a live run).
    pub fn note(&mut self, line: &str) {
        self.generation += 1;
        self.log(self.last_t, "tpuport", line);
    }

    /// Count a line of an events file that is not an event this reader can use.
    pub fn skip_line(&mut self, line_no: u64, why: Skip) {
        self.generation += 1;
        self.skipped.add(line_no, why);
    }

    fn log(&mut self, t: f64, stream: &str, line: &str) {
        if self.logs.len() == MAX_LOG_LINES {
            self.logs.pop_front();
            self.logs_dropped += 1;
        }
        self.logs.push_back(LogLine {
            t,
            stream: stream.to_string(),
            line: line.to_string(),
        });
    }

    /// Index of the first step at or after `t`.
    pub fn step_index_at(&self, t: f64) -> usize {
        self.step_t.partition_point(|&x| x < t)
    }

    /// Statistics of the steps with `from <= t <= to`. Like [`Summary`], the run's first step
    /// (start-up and first compiles) is left out of the percentiles when more than two remain.
    pub fn window_stats(&self, from: f64, to: f64) -> WindowStats {
        let (a, b) = (
            self.step_index_at(from),
            self.step_t.partition_point(|&x| x <= to),
        );
        let times = &self.summary.step_times;
        let b = b.min(times.len());
        if a >= b {
            return WindowStats::default();
        }
        let a_steady = if a == 0 && b > 2 { 1 } else { a };
        let steady = &times[a_steady..b];
        // The same figure as the step lines' (over other steps): see Summary::throughput_of.
        let rate = self.summary.throughput_of(a, b);
        let first_step = a as u64 + 1;
        let last_step = b as u64;
        let syncs: u64 = self
            .syncs
            .iter()
            .filter(|(s, _)| *s >= first_step && *s <= last_step)
            .fold(0, |a, (_, n)| a.saturating_add(*n));
        WindowStats {
            steps: b - a,
            p50: select_percentile(steady, 0.5),
            p90: select_percentile(steady, 0.9),
            samples_per_s: rate.samples_per_s,
            tokens_per_s: rate.tokens_per_s,
            syncs_per_step: Some(syncs as f64 / (b - a) as f64),
            breakdown: self.summary.breakdown_of(a, b),
        }
    }

    /// Host-sync call sites, busiest first (ties by name).
    pub fn top_sync_sites(&self, n: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self
            .sync_sites
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// Recompile reasons, most frequent first (ties by text).
    pub fn top_reasons(&self, n: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.reasons.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }

    /// True when recompiles were caused by changing input shapes.
    pub fn shapes_vary(&self) -> bool {
        self.reasons
            .keys()
            .any(|r| r.contains("size mismatch") || r.contains("shape") || r.contains("stride"))
    }

    /// Peak device memory seen, else the peak RSS, with what it is.
    pub fn peak_memory(&self) -> Option<(u64, &'static str)> {
        self.summary
            .peak_device
            .map(|d| (d, "device"))
            .or(self.summary.peak_rss.map(|r| (r, "RSS")))
    }

    /// Approximate heap bytes held (capacities of the growing buffers).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.summary.step_times.capacity() * 8
            + self.step_t.capacity() * 8
            + (self.summary.step_samples.capacity() + self.summary.step_tokens.capacity()) * 4
            + self.summary.step_phases.capacity()
                * std::mem::size_of::<super::breakdown::StepPhases>()
            + self.memory.capacity() * size_of::<MemPoint>()
            + self.compiles.capacity() * size_of::<CompilePoint>()
            + self.compile_rows.capacity() * size_of::<Compile>()
            + self.syncs.capacity() * 16
            + self
                .logs
                .iter()
                .map(|l| l.line.capacity() + l.stream.capacity())
                .sum::<usize>()
            + self.logs.capacity() * size_of::<LogLine>()
    }
}

/// The percentile over a slice without sorting all of it (same interpolation as
/// [`percentile`], so the numbers agree).
pub fn select_percentile(values: &[f64], q: f64) -> Option<f64> {
    if values.len() <= 64 {
        return percentile(values, q);
    }
    let mut v = values.to_vec();
    let pos = q * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let (_, &mut lo_v, rest) = v.select_nth_unstable_by(lo, |a, b| a.total_cmp(b));
    let hi_v = if hi == lo {
        lo_v
    } else {
        rest.iter().copied().min_by(|a, b| a.total_cmp(b))?
    };
    Some(lo_v + (hi_v - lo_v) * (pos - lo as f64))
}

/// A recompile reason without the compile id and the sizes, so that the same cause groups:
/// `0/2: tensor 'x' size mismatch at index 0. expected 8, actual 16` →
/// `tensor 'x' size mismatch at index 0`.
pub fn normalize_reason(r: &str) -> String {
    let first = r.lines().next().unwrap_or("").trim();
    let mut s = first;
    if let Some((id, rest)) = s.split_once(": ")
        && !id.is_empty()
        && id.chars().all(|c| c.is_ascii_digit() || c == '/')
    {
        s = rest;
    }
    if let Some(i) = s.find(". expected ").or_else(|| s.find(", expected ")) {
        s = &s[..i];
    }
    s.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::*;

    fn step(n: u64, t: f64, dt: f64, samples: Option<f64>) -> Event {
        Event::Step(Step {
            t,
            step: n,
            dt,
            samples,
            ..Default::default()
        })
    }

    /// Found by the fuzz harness (target events): sync counts near u64::MAX in an events file
    /// overflowed the sums (a panic with overflow checks on, nonsense without).
    #[test]
    fn huge_sync_counts_saturate() {
        let mut a = Aggregator::new();
        let sync = Event::Sync(Sync {
            step: 1,
            counts: [("item".to_string(), u64::MAX), ("cpu".to_string(), 5)].into(),
            sites: vec![("a.py:3".into(), u64::MAX)],
            ..Default::default()
        });
        a.add(&step(1, 1.0, 1.0, None));
        a.add(&sync);
        a.add(&sync);
        assert_eq!(a.summary.syncs, u64::MAX);
        assert_eq!(a.syncs, vec![(1, u64::MAX)]);
        assert_eq!(a.top_sync_sites(1), vec![("a.py:3", u64::MAX)]);
        assert_eq!(
            a.window_stats(0.0, 2.0).syncs_per_step,
            Some(u64::MAX as f64)
        );
    }

    #[test]
    fn flat_memory_keeps_two_points() {
        let mut a = Aggregator::new();
        let mem = |t: f64, d: u64| {
            Event::Memory(Memory {
                t,
                allocated: Some(d),
                rss: None,
                ..Default::default()
            })
        };
        for (i, d) in [5, 7, 7, 7, 7, 9].iter().enumerate() {
            a.add(&mem(i as f64, *d));
        }
        let pts: Vec<(f64, Option<u64>)> = a.memory.iter().map(|m| (m.t, m.device())).collect();
        assert_eq!(
            pts,
            vec![
                (0.0, Some(5)),
                (1.0, Some(7)),
                (4.0, Some(7)),
                (5.0, Some(9))
            ]
        );
        assert_eq!(a.memory[0].rss(), None);
        assert_eq!(std::mem::size_of::<MemPoint>(), 24);
    }

    #[test]
    fn reasons_group() {
        assert_eq!(
            normalize_reason("0/2: tensor 'x' size mismatch at index 0. expected 8, actual 16"),
            "tensor 'x' size mismatch at index 0"
        );
        assert_eq!(
            normalize_reason("guard on L['n'] == 3"),
            "guard on L['n'] == 3"
        );
    }

    #[test]
    fn select_matches_sort() {
        let v: Vec<f64> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f64 * 0.5)
            .collect();
        for q in [0.0, 0.5, 0.9, 0.99, 1.0] {
            assert_eq!(select_percentile(&v, q), percentile(&v, q), "q={q}");
        }
    }

    #[test]
    fn windows_and_rates() {
        let mut a = Aggregator::new();
        a.add(&step(1, 1.0, 1.0, None));
        a.add(&step(2, 1.1, 0.1, Some(10.0)));
        a.add(&step(3, 1.3, 0.2, Some(10.0)));
        a.add(&Event::Sync(Sync {
            step: 3,
            counts: [("item".to_string(), 2)].into(),
            sites: vec![("a.py:3".into(), 2)],
            ..Default::default()
        }));
        assert_eq!(a.summary.step_samples.len(), 3);
        assert!(a.summary.step_samples[0].is_nan());
        let w = a.window_stats(0.0, 10.0);
        assert_eq!(w.steps, 3);
        assert!((w.p50.unwrap() - 0.15).abs() < 1e-12);
        assert!((w.samples_per_s.unwrap() - 20.0 / 0.3).abs() < 1e-4);
        assert!((w.syncs_per_step.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        let w = a.window_stats(1.2, 10.0);
        assert_eq!(w.steps, 1);
        assert_eq!(w.p50, Some(0.2));
        assert_eq!(a.top_sync_sites(5), vec![("a.py:3", 2)]);
    }
}
