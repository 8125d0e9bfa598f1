//! The HBM outlook of a run, as data: which memory to show (device memory where any was
//! reported, else the process RSS), its samples in a time window, and whether the peak fits the
//! capacity or, at the window's trend, when it would be full. The dashboard draws it
//! (`ui::draw::memory`); nothing here draws.

use super::aggregate::{Aggregator, MemPoint};

/// The memory figures for one time window.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryView {
    /// Device memory (`true`) or the process RSS (no device memory was reported).
    pub device: bool,
    /// `(t, bytes)` of the samples in the window, oldest first.
    pub series: Vec<(f64, u64)>,
    /// The latest sample, in or after the window.
    pub current: Option<u64>,
    /// The highest ever seen.
    pub peak: Option<u64>,
    /// The device capacity; `None` for RSS or when no capacity was reported.
    pub capacity: Option<u64>,
}

impl MemoryView {
    /// The figures of `agg` between `view.0` and `view.1` (seconds); only the window is copied.
    pub fn new(agg: &Aggregator, view: (f64, f64)) -> MemoryView {
        let device = agg.summary.peak_device.is_some();
        let value = |m: &MemPoint| if device { m.device() } else { m.rss() };
        let a = agg.memory.partition_point(|m| m.t < view.0);
        let b = agg.memory.partition_point(|m| m.t <= view.1);
        let series = agg.memory[a..b]
            .iter()
            .filter_map(|m| value(m).map(|v| (m.t, v)))
            .collect();
        MemoryView {
            device,
            series,
            current: agg.memory.iter().rev().find_map(value),
            peak: if device {
                agg.summary.peak_device
            } else {
                agg.summary.peak_rss
            },
            capacity: agg.capacity().filter(|_| device),
        }
    }

    /// Whether the peak fits, from this window's samples.
    pub fn forecast(&self) -> Option<Forecast> {
        forecast(&self.series, self.capacity, self.peak)
    }
}

/// The peak and how it compares with the capacity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Forecast {
    pub peak: u64,
    /// `None` when the capacity is unknown.
    pub fit: Option<Fit>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fit {
    /// The peak is over the capacity by this many bytes.
    Over(u64),
    /// It fits so far, but grows by `per_s` bytes a second: full in `full_in` seconds.
    Growing { per_s: f64, full_in: f64 },
    /// It fits and is not growing; the peak is this percentage of the capacity.
    Fits { percent: f64 },
}

/// The peak against `cap`; the trend is the line from the first to the last of `series` (the
/// window's `(t, bytes)` samples), counted only when it climbs.
pub fn forecast(series: &[(f64, u64)], cap: Option<u64>, peak: Option<u64>) -> Option<Forecast> {
    let peak = peak?;
    let fit = cap.map(|c| {
        if peak > c {
            return Fit::Over(peak - c);
        }
        if let (Some(first), Some(last)) = (series.first(), series.last())
            && last.0 > first.0
            && last.1 > first.1
        {
            let per_s = (last.1 - first.1) as f64 / (last.0 - first.0);
            let full_in = (c - last.1.min(c)) as f64 / per_s;
            return Fit::Growing { per_s, full_in };
        }
        Fit::Fits {
            percent: peak as f64 * 100.0 / c as f64,
        }
    });
    Some(Forecast { peak, fit })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn no_peak_no_forecast() {
        assert_eq!(forecast(&[], Some(GIB), None), None);
    }

    #[test]
    fn unknown_capacity() {
        let f = forecast(&[(0.0, 1), (1.0, 2)], None, Some(2)).unwrap();
        assert_eq!(f, Forecast { peak: 2, fit: None });
    }

    #[test]
    fn over_capacity() {
        let f = forecast(&[(0.0, GIB)], Some(GIB), Some(3 * GIB)).unwrap();
        assert_eq!(f.fit, Some(Fit::Over(2 * GIB)));
    }

    #[test]
    fn growing_fills_up() {
        // 1 GiB at t=0, 2 GiB at t=10: 0.1 GiB/s, 8 GiB left of 10 GiB: full in 80 s.
        let s = [(0.0, GIB), (5.0, GIB + GIB / 4), (10.0, 2 * GIB)];
        let f = forecast(&s, Some(10 * GIB), Some(2 * GIB)).unwrap();
        let Some(Fit::Growing { per_s, full_in }) = f.fit else {
            panic!("{f:?}")
        };
        assert!((per_s - GIB as f64 / 10.0).abs() < 1.0);
        assert!((full_in - 80.0).abs() < 1e-6);
    }

    #[test]
    fn steady_or_falling_fits() {
        for s in [vec![], vec![(0.0, GIB)], vec![(0.0, 2 * GIB), (9.0, GIB)]] {
            let f = forecast(&s, Some(4 * GIB), Some(2 * GIB)).unwrap();
            assert_eq!(f.fit, Some(Fit::Fits { percent: 50.0 }), "{s:?}");
        }
    }

    #[test]
    fn view_picks_device_memory_and_the_window() {
        let mut agg = Aggregator::new();
        agg.memory = vec![
            MemPoint::new(1.0, Some(10), Some(100)),
            MemPoint::new(2.0, None, Some(200)),
            MemPoint::new(3.0, Some(30), Some(300)),
            MemPoint::new(4.0, Some(40), Some(400)),
        ];
        agg.summary.peak_device = Some(40);
        agg.summary.peak_rss = Some(400);
        let v = MemoryView::new(&agg, (1.5, 3.0));
        assert!(v.device);
        assert_eq!(v.series, vec![(3.0, 30)]);
        assert_eq!((v.current, v.peak), (Some(40), Some(40)));
        agg.summary.peak_device = None;
        let v = MemoryView::new(&agg, (1.5, 3.0));
        assert!(!v.device);
        assert_eq!(v.series, vec![(2.0, 200), (3.0, 300)]);
        assert_eq!(
            (v.current, v.peak, v.capacity),
            (Some(400), Some(400), None)
        );
    }
}
