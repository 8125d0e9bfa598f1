//! Charts for reports, drawn with plotters into SVG and PNG: step time, device memory (HBM)
//! against the chip's capacity, and compiles over time, with two runs overlaid for an A/B; and
//! where the step goes, a stacked bar per run.
//! Text uses the DejaVu Sans font shipped in `assets/` (no system font needed).

use std::sync::Once;

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::aggregate::Aggregator;
use super::breakdown::{Breakdown, PHASES};

pub const WIDTH: u32 = 1000;
pub const HEIGHT: u32 = 480;
/// Points drawn per series at most (a long run is reduced to each bucket's mean).
pub const MAX_POINTS: usize = 2000;

static FONT: Once = Once::new();

/// Register the bundled font (once) before drawing text.
pub fn register_font() {
    FONT.call_once(|| {
        plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            include_bytes!("../../assets/DejaVuSans.ttf"),
        )
        .unwrap_or_else(|_| panic!("assets/DejaVuSans.ttf is a valid font"));
    });
}

pub struct Series {
    pub label: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// A reference line (capacity): drawn thinner and dashed.
    pub reference: bool,
}

pub struct ChartSpec {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// Where the legend goes: away from where the lines usually end.
    pub legend: SeriesLabelPosition,
    /// The axis counts whole things (steps, compiles): labelled `1, 2, 3`, never `1.0, 1.5`.
    pub whole_x: bool,
    pub whole_y: bool,
}

/// How many labels an axis over `lo..hi` may have for plotters to put them on whole numbers
/// only (at most its default 10): with no more labels than whole numbers in the range, its
/// nice steps (1, 2, 5, 10, ...) are whole.
pub fn whole_labels(lo: f64, hi: f64) -> usize {
    ((hi - lo).max(0.0).floor() as usize + 1).min(10)
}

/// The label of a whole-number axis: `3`, not `3.0` (nothing between whole numbers).
pub fn whole(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{:.0}", x.round())
    } else {
        String::new()
    }
}

/// Run colours: A blue, B orange.
pub const COLORS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(255, 127, 14)];

/// Reduce to at most `n` points: the mean of each bucket (x: the bucket's first x).
pub fn reduce(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    if points.len() <= n || n == 0 {
        return points.to_vec();
    }
    (0..n)
        .map(|b| {
            let (lo, hi) = (b * points.len() / n, (b + 1) * points.len() / n);
            let s = &points[lo..hi.max(lo + 1)];
            let mean = s.iter().map(|p| p.1).sum::<f64>() / s.len() as f64;
            (s[0].0, mean)
        })
        .collect()
}

/// Run `i`'s line (its colour; at most MAX_POINTS points).
fn run_line(i: usize, label: &str, pts: &[(f64, f64)]) -> Series {
    Series {
        label: label.to_string(),
        color: COLORS[i % 2],
        points: reduce(pts, MAX_POINTS),
        reference: false,
    }
}

/// Step time (ms) by step number, one series per run.
pub fn step_time(runs: &[(&str, &Aggregator)]) -> ChartSpec {
    let series = runs
        .iter()
        .enumerate()
        .map(|(i, (label, a))| {
            // The first step (start-up and first compiles) and the steps the HBM tracker
            // sampled are left out, as in the numbers.
            let pts: Vec<(f64, f64)> = a
                .summary
                .step_times
                .iter()
                .enumerate()
                .filter(|(k, _)| a.summary.steady_step(*k))
                .map(|(k, dt)| ((k + 1) as f64, dt * 1e3))
                .collect();
            run_line(i, label, &pts)
        })
        .collect();
    ChartSpec {
        title: "Step time (without step 1: start-up)".into(),
        x_label: "step".into(),
        y_label: "ms".into(),
        series,
        legend: SeriesLabelPosition::UpperRight,
        whole_x: true,
        whole_y: false,
    }
}

/// Device memory (GiB) over time with each run's capacity; RSS where no device memory exists.
pub fn memory(runs: &[(&str, &Aggregator)]) -> ChartSpec {
    let gib = (1u64 << 30) as f64;
    let mut series = vec![];
    let mut what = "device memory";
    for (i, (label, a)) in runs.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = a
            .memory
            .iter()
            .filter_map(|m| m.device().map(|d| (m.t, d as f64 / gib)))
            .collect();
        let device = !pts.is_empty();
        if !device {
            what = "device memory (process RSS where none)";
            pts = a
                .memory
                .iter()
                .filter_map(|m| m.rss().map(|d| (m.t, d as f64 / gib)))
                .collect();
        }
        let end = a.last_t.max(pts.last().map(|p| p.0).unwrap_or(0.0));
        series.push(Series {
            label: format!("{label}{}", if device { "" } else { " (RSS)" }),
            color: COLORS[i % 2],
            points: reduce(&pts, MAX_POINTS),
            reference: false,
        });
        if let Some(c) = a.capacity().filter(|_| device) {
            series.push(Series {
                label: format!("{label} capacity"),
                color: COLORS[i % 2],
                points: vec![(0.0, c as f64 / gib), (end, c as f64 / gib)],
                reference: true,
            });
        }
    }
    ChartSpec {
        title: format!("HBM: {what}"),
        x_label: "seconds".into(),
        y_label: "GiB".into(),
        series,
        legend: SeriesLabelPosition::LowerRight,
        whole_x: false,
        whole_y: false,
    }
}

/// Cumulative forward compiles over time.
pub fn compiles(runs: &[(&str, &Aggregator)]) -> ChartSpec {
    let series = runs
        .iter()
        .enumerate()
        .map(|(i, (label, a))| {
            // A staircase: the count holds until the next compile.
            let mut pts = vec![(0.0, 0.0)];
            for c in &a.compiles {
                let before = pts.last().map(|p| p.1).unwrap_or(0.0);
                pts.push((c.t, before));
                pts.push((c.t, c.total as f64));
            }
            pts.push((a.last_t, a.summary.compiles as f64));
            run_line(i, label, &pts)
        })
        .collect();
    ChartSpec {
        title: "Compiles over time".into(),
        x_label: "seconds".into(),
        y_label: "compiles".into(),
        series,
        legend: SeriesLabelPosition::LowerRight,
        whole_x: false,
        whole_y: true,
    }
}

/// The legend as every chart of tpuport draws it: framed, on a light background.
pub fn legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(at)
        .draw()
}

/// A chart that draws itself on any plotters backend (SVG or bitmap).
pub trait Drawable {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

impl Drawable for ChartSpec {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw(root, self)
    }
}

/// Phase colours of the step breakdown, [`PHASES`] order (`other` grey).
pub const PHASE_COLORS: [RGBColor; super::breakdown::N] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(214, 39, 40),
    RGBColor(23, 190, 207),
    RGBColor(160, 160, 160),
];

/// Where the step goes: one horizontal bar per run, its mean step split into the phases.
pub struct StackedSpec {
    pub title: String,
    /// (run label, its breakdown).
    pub bars: Vec<(String, Breakdown)>,
}

/// The breakdown chart, when any run measured its phases.
pub fn breakdown(runs: &[(&str, &Aggregator)]) -> Option<StackedSpec> {
    let bars: Vec<(String, Breakdown)> = runs
        .iter()
        .filter_map(|(l, a)| Some((l.to_string(), a.summary.breakdown()?)))
        .collect();
    (!bars.is_empty()).then(|| StackedSpec {
        title: "Where the step goes (mean of the steady steps)".into(),
        bars,
    })
}

impl Drawable for StackedSpec {
    fn draw<DB: DrawingBackend>(&self, root: DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing {}: {e}", self.title);
        root.fill(&WHITE).map_err(err)?;
        let xmax = self
            .bars
            .iter()
            .map(|(_, b)| b.total() * 1e3)
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max)
            .clamp(1e-3, f64::MAX / 2.0)
            * 1.3; // room on the right for the legend
        let n = self.bars.len() as f64;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 24))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..xmax, 0.0..n)
            .map_err(err)?;
        let labels: Vec<String> = self.bars.iter().map(|(l, _)| l.clone()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(self.bars.len() * 2 + 1)
            .y_label_formatter(&|y| {
                let i = (n - y - 0.5).round();
                if (n - y - 0.5 - i).abs() < 0.01 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_desc("ms per step")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        for (p, name) in PHASES.iter().enumerate() {
            let color = PHASE_COLORS[p];
            let rects = self.bars.iter().enumerate().map(|(i, (_, b))| {
                let x0 = within(b.mean[..p].iter().sum::<f64>() * 1e3, xmax);
                let x1 = within(x0 + b.mean[p] * 1e3, xmax);
                let y = n - i as f64 - 1.0;
                Rectangle::new([(x0, y + 0.2), (x1, y + 0.8)], color.filled())
            });
            let label = match self.bars.as_slice() {
                [(_, b)] => format!("{name} ({:.0} %)", b.shares()[p] * 100.0),
                _ => name.to_string(),
            };
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled())
                });
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(err)?;
        root.present().map_err(err)?;
        Ok(())
    }
}

/// `v` in `0..=hi` (NaN at 0).
fn within(v: f64, hi: f64) -> f64 {
    if v.is_nan() { 0.0 } else { v.clamp(0.0, hi) }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, spec: &ChartSpec) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing {}: {e}", spec.title);
    root.fill(&WHITE).map_err(err)?;
    let all = spec.series.iter().flat_map(|s| s.points.iter());
    let (mut x1, mut y1) = (0.0f64, 0.0f64);
    for &(x, y) in all {
        if x.is_finite() {
            x1 = x1.max(x);
        }
        if y.is_finite() {
            y1 = y1.max(y);
        }
    }
    let x1 = if x1 > 0.0 { x1 } else { 1.0 };
    let y1 = if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
    let y1 = if y1.is_finite() { y1 } else { f64::MAX };
    // Every point inside the axes: an events file can hold values no run measures (a negative
    // step time, a time before the start), and the plotting library maps a point far outside
    // its range to pixels past i32 (an overflow).
    let inside = |&(x, y): &(f64, f64)| (within(x, x1), within(y, y1));
    let mut chart = ChartBuilder::on(&root)
        .caption(&spec.title, ("sans-serif", 24))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x1, 0.0..y1)
        .map_err(err)?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&spec.x_label)
        .y_desc(&spec.y_label)
        .label_style(("sans-serif", 14));
    if spec.whole_x {
        mesh.x_labels(whole_labels(0.0, x1))
            .x_label_formatter(&whole);
    }
    if spec.whole_y {
        mesh.y_labels(whole_labels(0.0, y1))
            .y_label_formatter(&whole);
    }
    mesh.draw().map_err(err)?;
    for s in &spec.series {
        let color = s.color;
        let style = if s.reference {
            color.stroke_width(1)
        } else {
            color.stroke_width(2)
        };
        let anno = if s.reference {
            chart
                .draw_series(DashedLineSeries::new(
                    s.points.iter().map(inside),
                    8,
                    6,
                    style,
                ))
                .map_err(err)?
        } else {
            chart
                .draw_series(LineSeries::new(s.points.iter().map(inside), style))
                .map_err(err)?
        };
        anno.label(s.label.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
        });
    }
    legend(&mut chart, spec.legend.clone()).map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The chart as an SVG document.
pub fn svg(spec: &impl Drawable) -> Result<String> {
    register_font();
    let mut out = String::new();
    spec.draw(SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area())?;
    Ok(out)
}

/// The chart as a PNG file's bytes.
pub fn png(spec: &impl Drawable) -> Result<Vec<u8>> {
    register_font();
    let mut rgb = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    spec.draw(BitMapBackend::with_buffer(&mut rgb, (WIDTH, HEIGHT)).into_drawing_area())?;
    let mut out = vec![];
    let mut enc = png::Encoder::new(&mut out, WIDTH, HEIGHT);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header()?;
    w.write_image_data(&rgb)?;
    w.finish()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::event::{Compile, Event, Step};

    /// The text of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, s)| s.trim().to_string()))
            .filter(|t| !t.is_empty())
            .collect()
    }

    /// Steps and compiles are counted: their axes say `1, 2, 3`, never `1.0, 1.5`.
    #[test]
    fn steps_and_compiles_are_labelled_as_whole_numbers() {
        let mut a = Aggregator::new();
        for n in 1..=5u64 {
            a.add(&Event::Step(Step {
                t: n as f64,
                step: n,
                dt: 0.01 * n as f64,
                ..Default::default()
            }));
        }
        // Over 40 s, so the seconds axis is labelled in fives.
        a.add(&Event::Step(Step {
            t: 40.0,
            step: 6,
            dt: 0.05,
            ..Default::default()
        }));
        for t in [1.5, 3.5] {
            a.add(&Event::Compile(Compile {
                t,
                kind: "forward".into(),
                status: "ok".into(),
                ..Default::default()
            }));
        }
        let steps = texts(&svg(&step_time(&[("a", &a)])).unwrap());
        for want in ["2", "3", "4", "5", "6"] {
            assert!(steps.iter().any(|x| x == want), "no {want}: {steps:?}");
        }
        assert!(!steps.iter().any(|x| x == "2.5" || x == "3.0"), "{steps:?}");
        let compiles = texts(&svg(&compiles(&[("a", &a)])).unwrap());
        for want in ["0", "1", "2"] {
            assert!(
                compiles.iter().any(|x| x == want),
                "no {want}: {compiles:?}"
            );
        }
        assert!(
            !compiles
                .iter()
                .any(|x| ["0.5", "1.0", "1.5", "2.0"].contains(&x.as_str())),
            "{compiles:?}"
        );
    }

    /// Found by the fuzz harness (target events): a step with `dt` = -9.2e18 made the plotting
    /// library's pixel arithmetic overflow (a panic with overflow checks on, a wrong picture
    /// without). Points outside the axes, infinite and NaN values draw without a panic.
    fn spec(points: Vec<(f64, f64)>) -> ChartSpec {
        ChartSpec {
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                label: "a".into(),
                color: COLORS[0],
                points,
                reference: false,
            }],
            legend: SeriesLabelPosition::UpperRight,
            whole_x: true,
            whole_y: false,
        }
    }

    #[test]
    fn values_no_run_measures_still_draw() {
        let odd = [
            vec![(1.0, 0.5), (2.0, -9.2e21), (3.0, 0.7)],
            vec![
                (1.0, 0.5),
                (-1e300, 1.0),
                (3.0, f64::NAN),
                (f64::INFINITY, 2.0),
            ],
            vec![(1.0, 0.5), (4.0, 1.7e308)],
        ];
        for points in odd {
            let s = spec(points);
            assert!(svg(&s).unwrap().contains("<svg"));
            assert!(!png(&s).unwrap().is_empty());
        }
    }
}
