//! The charts of a check report, as SVG: the two runs' losses overlaid, the port's peak HBM
//! against each TPU generation's HBM per device, and the port's compiles over time.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::compare::LossRow;
use super::fit::ChipFit;
use crate::profile::aggregate::Aggregator;
use crate::profile::charts::{self, COLORS};

const GIB: f64 = (1u64 << 30) as f64;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing a check chart: {e}")
}

/// Loss by step: the original (host, float32) as a wide line, the port (sim, TPU precision)
/// dashed on top, on a y axis fitted to the losses (so that where they part shows).
pub fn losses(rows: &[LossRow]) -> Result<String> {
    let pick = |f: fn(&LossRow) -> Option<f64>| -> Vec<(f64, f64)> {
        rows.iter()
            .filter_map(|r| f(r).filter(|l| l.is_finite()).map(|l| (r.step as f64, l)))
            .collect()
    };
    let (original, port) = (pick(|r| r.original), pick(|r| r.port));
    let (lo, hi) = original
        .iter()
        .chain(&port)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
            (a.min(p.1), b.max(p.1))
        });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 1e-3).max(1e-9);
    let x1 = rows.iter().map(|r| r.step as f64).fold(2.0, f64::max);
    charts::register_font();
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (charts::WIDTH, charts::HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Loss by step: original vs port", ("sans-serif", 24))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(1.0..x1, (lo - pad)..(hi + pad))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("step")
            .y_desc("loss")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        let (a, b) = (COLORS[0], COLORS[1]);
        chart
            .draw_series(LineSeries::new(original, a.stroke_width(5)))
            .map_err(err)?
            .label("original (host, float32)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], a.stroke_width(5)));
        chart
            .draw_series(DashedLineSeries::new(port, 8, 5, b.stroke_width(2)))
            .map_err(err)?
            .label("port (sim, TPU precision)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], b.stroke_width(2)));
        crate::profile::charts::legend(&mut chart, SeriesLabelPosition::UpperRight).map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

/// The port's compiles over time.
pub fn compiles(port: &Aggregator) -> Result<String> {
    charts::svg(&charts::compiles(&[("port (sim)", port)]))
}

/// Per generation: HBM per device (light) and the port's peak (dark), in GiB.
pub fn hbm(fit: &[ChipFit]) -> Result<String> {
    charts::register_font();
    let mut out = String::new();
    {
        let root =
            SVGBackend::with_string(&mut out, (charts::WIDTH, charts::HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let top = fit
            .iter()
            .map(|c| (c.hbm_per_device.max(c.peak)) as f64 / GIB)
            .fold(1.0, f64::max)
            * 1.1;
        let names: Vec<&str> = fit.iter().map(|c| c.chip).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption("Peak HBM of the port vs HBM per device", ("sans-serif", 24))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..fit.len() as f64, 0.0..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(fit.len() * 2 + 1)
            .x_label_formatter(&|x| {
                let i = x.floor() as usize;
                if (x - x.floor() - 0.5).abs() < 0.26 {
                    names.get(i).map(|s| s.to_string()).unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .y_desc("GiB")
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        let light = RGBColor(198, 219, 239);
        for (i, c) in fit.iter().enumerate() {
            let x = i as f64;
            let cap = c.hbm_per_device as f64 / GIB;
            let peak = c.peak as f64 / GIB;
            let color = if c.fits { COLORS[0] } else { RED };
            let capacity = chart
                .draw_series([Rectangle::new(
                    [(x + 0.15, 0.0), (x + 0.5, cap)],
                    light.filled(),
                )])
                .map_err(err)?;
            if i == 0 {
                capacity.label("HBM per device").legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], light.filled())
                });
            }
            let bar = [Rectangle::new(
                [(x + 0.5, 0.0), (x + 0.85, peak.max(top * 0.004))],
                color.filled(),
            )];
            let used = chart.draw_series(bar).map_err(err)?;
            if i == 0 {
                used.label("port's peak (red: does not fit)")
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 14, y + 5)], COLORS[0].filled())
                    });
            }
        }
        crate::profile::charts::legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}
