//! The charts of a check report, as SVG: the two runs' losses overlaid, the port's peak HBM
//! against each TPU generation's HBM per device, and the port's compiles over time.

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::compare::LossRow;
use super::fit::ChipFit;
use crate::profile::aggregate::Aggregator;
use crate::profile::charts::{self, COLORS, ChartSpec, Series};

const GIB: f64 = (1u64 << 30) as f64;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing the HBM chart: {e}")
}

/// Loss by step: the original (host, float32) and the port (sim, TPU precision).
pub fn losses(rows: &[LossRow]) -> Result<String> {
    let line = |i: usize, label: &str, pick: fn(&LossRow) -> Option<f64>| Series {
        label: label.to_string(),
        color: COLORS[i],
        points: rows
            .iter()
            .filter_map(|r| {
                pick(r)
                    .filter(|l| l.is_finite())
                    .map(|l| (r.step as f64, l))
            })
            .collect(),
        reference: false,
    };
    charts::svg(&ChartSpec {
        title: "Loss by step: original vs port".into(),
        x_label: "step".into(),
        y_label: "loss".into(),
        series: vec![
            line(0, "original (host, float32)", |r| r.original),
            line(1, "port (sim, TPU precision)", |r| r.port),
        ],
        legend: SeriesLabelPosition::UpperRight,
    })
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
            chart
                .draw_series([Rectangle::new(
                    [(x + 0.15, 0.0), (x + 0.5, cap)],
                    light.filled(),
                )])
                .map_err(err)?
                .label(if i == 0 { "HBM per device" } else { "" })
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], light.filled())
                });
            chart
                .draw_series([Rectangle::new(
                    [(x + 0.5, 0.0), (x + 0.85, peak.max(top * 0.004))],
                    color.filled(),
                )])
                .map_err(err)?
                .label(if i == 0 { "port's peak" } else { "" })
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 14, y + 5)], COLORS[0].filled())
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}
