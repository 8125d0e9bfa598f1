//! The charts of a check report, as SVG: the two runs' losses overlaid, the port's peak HBM
//! against each TPU generation's HBM per device, and the port's compiles over time.

use anyhow::{Result, anyhow};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::compare::LossRow;
use super::fit::ChipFit;
use crate::profile::aggregate::Aggregator;
use crate::profile::charts::{self, COLORS};
use crate::profile::summary::bytes;

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
            .x_labels(charts::whole_labels(1.0, x1))
            .x_label_formatter(&charts::whole)
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

/// The port's compiles over time (drawn when it compiled something: else the report says "no
/// compiles").
pub fn compiles(port: &Aggregator) -> Result<String> {
    charts::svg(&charts::compiles(&[("port (sim)", port)]))
}

/// A share of HBM as a label: `0.03 %`, `0.5 %`, `37 %`.
fn share(used: f64) -> String {
    let pct = used * 100.0;
    match pct {
        p if p >= 10.0 => format!("{p:.0} %"),
        p if p >= 0.1 => format!("{p:.1} %"),
        p if p >= 0.01 => format!("{p:.2} %"),
        _ => "< 0.01 %".into(),
    }
}

/// Per generation: HBM per device (light) and the port's peak (dark), in GiB; each peak bar is
/// labelled with the peak and its share of that device's HBM (a peak of a few MiB is a bar too
/// thin to see beside 16–96 GiB).
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
            * 1.4; // room above the tallest bar for its label, and above that the legend
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
            .y_labels(charts::whole_labels(0.0, top))
            .y_label_formatter(&charts::whole)
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
                used.label("port's peak, its share of the device's HBM (red: does not fit)")
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 14, y + 5)], COLORS[0].filled())
                    });
            }
        }
        // The labels: the peak, and under it its share, just above each peak bar.
        let style = TextStyle::from(("sans-serif", 14).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(fit.iter().enumerate().map(|(i, c)| {
                let top_of_bar = (c.peak as f64 / GIB).max(top * 0.004);
                EmptyElement::at((i as f64 + 0.675, top_of_bar))
                    + Text::new(bytes(c.peak), (0, -22), style.clone())
                    + Text::new(share(c.used), (0, -4), style.clone())
            }))
            .map_err(err)?;
        crate::profile::charts::legend(&mut chart, SeriesLabelPosition::UpperLeft).map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::compare::loss_table;
    use crate::check::fit::fit;

    /// The text of every `<text>` element of an SVG.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("</text>")
            .filter_map(|t| t.rsplit_once('>').map(|(_, s)| s.trim().to_string()))
            .filter(|t| !t.is_empty())
            .collect()
    }

    #[test]
    fn loss_chart_labels_steps_as_whole_numbers() {
        let by_step = [(1, 4.37), (2, 4.19), (3, 3.94), (4, 3.71)];
        let svg = losses(&loss_table(&by_step, &by_step)).unwrap();
        let t = texts(&svg);
        for step in ["1", "2", "3", "4"] {
            assert!(t.iter().any(|x| x == step), "no step {step} in {t:?}");
        }
        for not in ["1.0", "1.5", "2.0", "2.5", "3.0", "3.5"] {
            assert!(!t.iter().any(|x| x == not), "{not} in {t:?}");
        }
    }

    /// 78.7 MiB beside 16–96 GiB: a bar too thin to see, so each is labelled with the peak and
    /// its share of that device's HBM.
    #[test]
    fn hbm_chart_labels_a_small_peak_with_its_share() {
        let peak = (78.7 * 1024.0 * 1024.0) as u64;
        let svg = hbm(&fit(peak, None, None)).unwrap();
        let t = texts(&svg);
        assert_eq!(t.iter().filter(|x| *x == "78.7 MiB").count(), 4, "{t:?}");
        // v5e 16 GiB, v5p 95 GiB, v6e 32 GiB, v7x 96 GiB per device.
        for share in ["0.5 %", "0.08 %", "0.2 %"] {
            assert!(t.iter().any(|x| x == share), "no {share} in {t:?}");
        }
        assert!(t.iter().any(|x| x == "80"), "GiB as whole numbers: {t:?}");
        assert_eq!(super::share(1.25), "125 %");
        assert_eq!(super::share(1e-5), "< 0.01 %");
    }
}
