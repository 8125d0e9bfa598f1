//! Step by step and layer by layer: the loss of each step of the original (host float32) and the
//! port (TPU precision on the sim), the first step where they part beyond a tolerance, and, on
//! the first step, the first module whose output parts (the comparison the port's agent wrote,
//! TorchTPU `assert_close`-style: mismatched elements, worst differences, tolerances that pass).

use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize)]
pub struct LossRow {
    pub step: u64,
    pub original: Option<f64>,
    pub port: Option<f64>,
    /// |port − original| / |original|
    pub rel: Option<f64>,
}

/// The two runs' losses side by side, by step.
pub fn loss_table(original: &[(u64, f64)], port: &[(u64, f64)]) -> Vec<LossRow> {
    let last = original
        .iter()
        .chain(port)
        .map(|(s, _)| *s)
        .max()
        .unwrap_or(0);
    (1..=last)
        .filter_map(|step| {
            let o = original.iter().find(|(s, _)| *s == step).map(|(_, l)| *l);
            let p = port.iter().find(|(s, _)| *s == step).map(|(_, l)| *l);
            if o.is_none() && p.is_none() {
                return None;
            }
            let rel = match (o, p) {
                (Some(o), Some(p)) => Some(rel_diff(o, p)),
                _ => None,
            };
            Some(LossRow {
                step,
                original: o,
                port: p,
                rel,
            })
        })
        .collect()
}

pub fn rel_diff(reference: f64, value: f64) -> f64 {
    if !reference.is_finite() || !value.is_finite() {
        return if reference.to_bits() == value.to_bits() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let d = (value - reference).abs();
    if reference == 0.0 {
        d
    } else {
        d / reference.abs()
    }
}

/// The first step whose losses part by more than `rtol`.
pub fn first_parting(rows: &[LossRow], rtol: f64) -> Option<&LossRow> {
    rows.iter().find(|r| r.rel.is_some_and(|d| d > rtol))
}

/// The same number, bit for bit (two NaNs count as the same: neither run has a loss to train on).
pub fn same_bits(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// The first step where two runs on the same machine did not compute the same loss: a value
/// that differs in any bit, or a step that one run recorded and the other did not.
pub fn first_unequal(rows: &[LossRow]) -> Option<&LossRow> {
    rows.iter().find(|r| match (r.original, r.port) {
        (Some(o), Some(p)) => !same_bits(o, p),
        _ => true,
    })
}

/// One module call of the first step, port against original.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerRow {
    pub index: usize,
    pub name: String,
    pub class: String,
    pub shape: Vec<u64>,
    pub elements: u64,
    pub mismatched: u64,
    pub max_abs: f64,
    pub max_rel: f64,
    pub rel_fro: f64,
    pub atol_to_pass: f64,
    pub rtol_to_pass: f64,
}

impl LayerRow {
    pub fn mismatched_pct(&self) -> f64 {
        if self.elements == 0 {
            0.0
        } else {
            100.0 * self.mismatched as f64 / self.elements as f64
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Layers {
    pub layers: Vec<LayerRow>,
    /// Module calls recorded: [port, original].
    pub calls: [u64; 2],
}

pub fn read_layers(path: &Path) -> Result<Layers> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the layer comparison {}", path.display()))?;
    serde_json::from_str(&text).context("the layer comparison is not valid JSON")
}

/// The first module whose output parts from the original's by more than `rtol` (relative
/// Frobenius difference).
pub fn first_diverging(layers: &Layers, rtol: f64) -> Option<&LayerRow> {
    layers
        .layers
        .iter()
        .find(|l| !l.rel_fro.is_finite() || l.rel_fro > rtol)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_line_up_by_step_and_the_first_parting_is_found() {
        let rows = loss_table(&[(1, 4.0), (2, 3.0), (3, 2.0)], &[(1, 4.001), (2, 3.3)]);
        assert_eq!(rows.len(), 3);
        assert!((rows[0].rel.unwrap() - 0.00025).abs() < 1e-9);
        assert_eq!(rows[2].port, None);
        assert_eq!(first_parting(&rows, 1e-2).unwrap().step, 2);
        assert!(first_parting(&rows, 0.2).is_none());
        assert_eq!(rel_diff(f64::NAN, 1.0), f64::INFINITY);
    }

    #[test]
    fn bit_for_bit_the_first_unequal_step_and_a_missing_one() {
        let same = loss_table(&[(1, 4.25), (2, 3.5)], &[(1, 4.25), (2, 3.5)]);
        assert!(first_unequal(&same).is_none());
        // One unit in the last place is a difference.
        let ulp = f64::from_bits(3.5f64.to_bits() + 1);
        let off = loss_table(&[(1, 4.25), (2, 3.5)], &[(1, 4.25), (2, ulp)]);
        assert_eq!(first_unequal(&off).unwrap().step, 2);
        let short = loss_table(&[(1, 4.25), (2, 3.5)], &[(1, 4.25)]);
        let row = first_unequal(&short).unwrap();
        assert_eq!((row.step, row.port), (2, None));
        assert!(same_bits(f64::NAN, f64::NAN) && !same_bits(0.0, -0.0));
    }

    #[test]
    fn the_first_diverging_layer() {
        let row = |i: usize, rel: f64| LayerRow {
            index: i,
            name: format!("GPT.h.{i}"),
            class: "Linear".into(),
            shape: vec![2, 4],
            elements: 8,
            mismatched: 4,
            max_abs: rel,
            max_rel: rel,
            rel_fro: rel,
            atol_to_pass: rel,
            rtol_to_pass: rel,
        };
        let l = Layers {
            layers: vec![row(0, 1e-4), row(1, 5e-2), row(2, 1e-1)],
            calls: [3, 3],
        };
        assert_eq!(first_diverging(&l, 1e-2).unwrap().index, 1);
        assert_eq!(l.layers[0].mismatched_pct(), 50.0);
    }
}
