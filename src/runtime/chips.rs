//! The TPU generations tpuport knows: the one chip table, from TorchTPU's hardware tables.
//!
//! Everything else reads it: PCI detection ([`super::detect`]), the `--chip` choices of the
//! command line, and the sim target, which receives the chosen [`Chip`] in the agent's
//! configuration ([`super::config`]) and keeps no table of its own.

use serde::{Serialize, Serializer};

/// A TPU generation, from TorchTPU's hardware table (`torch_tpu/_internal/utils/hardware.py`).
/// Serialised as it is into the agent's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Chip {
    /// The `--chip` name.
    pub name: &'static str,
    /// `get_device_name()` text.
    pub device_name: &'static str,
    pub pci_device: u16,
    pub hbm_per_device: u64,
    pub devices_per_chip: u32,
    /// Peak bf16 FLOP/s of the whole chip (all its devices).
    pub bf16_flops_per_chip: f64,
    /// Single-host `TORCH_TPU_TOPOLOGY` for each device count (other counts have none); sent as
    /// a JSON object keyed by the count.
    #[serde(serialize_with = "as_map")]
    pub topologies: &'static [(u32, &'static str)],
}

const GIB: u64 = 1 << 30;
const TFLOPS: f64 = 1e12;

/// v4 and v5p: 3-D torus slices.
const TORUS_TOPOLOGIES: &[(u32, &str)] = &[(1, "1,1,1"), (2, "1,2,1"), (4, "2,2,1"), (8, "2,2,2")];
/// v5e and v6e: 2-D slices.
const PLANE_TOPOLOGIES: &[(u32, &str)] = &[(1, "1,1,1"), (4, "2,2,1"), (8, "2,4,1")];

pub const CHIPS: &[Chip] = &[
    Chip {
        name: "v4",
        device_name: "TPU v4",
        pci_device: 0x005e,
        hbm_per_device: 32 * GIB,
        devices_per_chip: 1,
        bf16_flops_per_chip: 275.0 * TFLOPS,
        topologies: TORUS_TOPOLOGIES,
    },
    Chip {
        name: "v5e",
        device_name: "TPU v5e",
        pci_device: 0x0063,
        hbm_per_device: 16 * GIB,
        devices_per_chip: 1,
        bf16_flops_per_chip: 197.0 * TFLOPS,
        topologies: PLANE_TOPOLOGIES,
    },
    Chip {
        name: "v5p",
        device_name: "TPU v5p",
        pci_device: 0x0062,
        hbm_per_device: 95 * GIB,
        devices_per_chip: 1,
        bf16_flops_per_chip: 459.0 * TFLOPS,
        topologies: TORUS_TOPOLOGIES,
    },
    Chip {
        name: "v6e",
        device_name: "TPU v6e",
        pci_device: 0x006f,
        hbm_per_device: 32 * GIB,
        devices_per_chip: 1,
        bf16_flops_per_chip: 918.0 * TFLOPS,
        topologies: PLANE_TOPOLOGIES,
    },
    Chip {
        name: "v7x",
        device_name: "TPU v7",
        pci_device: 0x0076,
        hbm_per_device: 96 * GIB,
        devices_per_chip: 2,
        bf16_flops_per_chip: 2307.0 * TFLOPS,
        topologies: &[(2, "1,1,1,2"), (4, "1,2,1,2"), (8, "2,2,1,2")],
    },
];

/// The chip the sim target simulates when none is chosen.
pub const DEFAULT_SIM_CHIP: &str = "v5e";

/// The chip called `name` (any case; `v7` is `v7x`).
pub fn chip_by_name(name: &str) -> Option<&'static Chip> {
    CHIPS
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name) || (name == "v7" && c.name == "v7x"))
}

/// The chip with this PCI device id (vendor Google).
pub fn chip_by_pci_device(id: u16) -> Option<&'static Chip> {
    CHIPS.iter().find(|c| c.pci_device == id)
}

/// The `--chip` names, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CHIPS.iter().map(|c| c.name)
}

fn as_map<S: Serializer>(pairs: &&'static [(u32, &'static str)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(pairs.iter().map(|(count, topology)| (count, topology)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_pci_ids_are_unique() {
        for (i, a) in CHIPS.iter().enumerate() {
            for b in &CHIPS[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.pci_device, b.pci_device);
            }
        }
        assert!(chip_by_name(DEFAULT_SIM_CHIP).is_some());
        assert_eq!(chip_by_name("v7").unwrap().name, "v7x");
        assert_eq!(chip_by_name("V5E").unwrap().name, "v5e");
        assert_eq!(chip_by_pci_device(0x0063).unwrap().name, "v5e");
    }

    /// The record the sim reads (`state.CHIP` in the agent): these keys, FLOP/s per chip, and
    /// the topologies as an object keyed by device count.
    #[test]
    fn a_chip_serialises_as_the_record_the_sim_reads() {
        let v = serde_json::to_value(chip_by_name("v7x").unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "name": "v7x",
                "device_name": "TPU v7",
                "pci_device": 0x0076,
                "hbm_per_device": 96u64 << 30,
                "devices_per_chip": 2,
                "bf16_flops_per_chip": 2307e12,
                "topologies": {"2": "1,1,1,2", "4": "1,2,1,2", "8": "2,2,1,2"},
            })
        );
    }
}
