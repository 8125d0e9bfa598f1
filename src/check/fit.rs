//! Will it fit: the port's peak device memory on the sim against each TPU generation's HBM per
//! device, and the largest batch that would fit, taking the memory that grows with the batch as
//! linear in it: `resident` (parameters, gradients, optimizer state: the live bytes between
//! steps) stays, `peak − resident` (activations) scales with the batch.

use serde::Serialize;

use crate::runtime::chips::{Chip, chip_by_name};

/// The generations a check reports on.
pub const CHIPS: &[&str] = &["v5e", "v5p", "v6e", "v7x"];

#[derive(Debug, Clone, Serialize)]
pub struct ChipFit {
    pub chip: &'static str,
    pub hbm_per_device: u64,
    pub devices_per_chip: u32,
    pub peak: u64,
    pub fits: bool,
    /// Peak as a share of the device's HBM.
    pub used: f64,
    /// How many times the batch that ran would fit (None when the batch's share is unknown).
    pub batch_factor: Option<f64>,
    /// The largest batch that would fit, when the script reported its batch (`samples`).
    pub largest_batch: Option<u64>,
}

pub fn fit(peak: u64, resident: Option<u64>, batch: Option<f64>) -> Vec<ChipFit> {
    CHIPS
        .iter()
        .filter_map(|n| chip_by_name(n))
        .map(|c| one(c, peak, resident, batch))
        .collect()
}

fn one(c: &'static Chip, peak: u64, resident: Option<u64>, batch: Option<f64>) -> ChipFit {
    let hbm = c.hbm_per_device;
    let batch_factor = resident.and_then(|r| {
        let grows = peak.saturating_sub(r);
        (grows > 0 && hbm > r).then(|| (hbm - r) as f64 / grows as f64)
    });
    ChipFit {
        chip: c.name,
        hbm_per_device: hbm,
        devices_per_chip: c.devices_per_chip,
        peak,
        fits: peak <= hbm,
        used: peak as f64 / hbm as f64,
        batch_factor,
        largest_batch: match (batch, batch_factor) {
            (Some(b), Some(k)) if b > 0.0 => Some((b * k).floor() as u64),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn fits_per_chip_and_the_largest_batch_is_linear_in_the_activations() {
        let rows = fit(20 * GIB, Some(4 * GIB), Some(8.0));
        let v5e = rows.iter().find(|r| r.chip == "v5e").unwrap();
        assert!(!v5e.fits); // 16 GiB per device
        // (16 - 4) / (20 - 4) = 0.75 of the batch of 8 → 6
        assert_eq!(v5e.largest_batch, Some(6));
        let v5p = rows.iter().find(|r| r.chip == "v5p").unwrap();
        assert!(v5p.fits);
        assert_eq!(rows.len(), 4);
        assert!(fit(GIB, None, None)[0].batch_factor.is_none());
    }
}
