//! Is there a TPU, and is TorchTPU installed? Both answered from files only, as TorchTPU itself
//! does (no torch import, no TPU runtime).
//!
//! A TPU is a device under `/sys/bus/pci/devices` with vendor `0x1ae0` (Google), a device id in
//! the chip table ([`super::chips`]), and its IOMMU group present under `/dev/vfio`. TorchTPU is
//! installed when a `torch_tpu-*.dist-info` folder is in the environment's site-packages.

use std::path::{Path, PathBuf};

use super::chips::{Chip, chip_by_pci_device};

pub const GOOGLE_PCI_VENDOR: &str = "0x1ae0";

/// A TPU device found on the PCI bus and exposed through VFIO.
#[derive(Debug, Clone, PartialEq)]
pub struct TpuDevice {
    pub pci_address: String,
    pub chip: &'static Chip,
    pub iommu_group: String,
}

/// Scan `<sys>/bus/pci/devices` for TPUs whose IOMMU group is present under `<dev>/vfio`.
/// Reads files only; never imports torch or talks to a TPU runtime.
pub fn scan_tpus(sys_root: &Path, dev_root: &Path) -> Vec<TpuDevice> {
    let mut found = vec![];
    let Ok(entries) = std::fs::read_dir(sys_root.join("bus/pci/devices")) else {
        return found;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for dev in entries {
        let read =
            |f: &str| std::fs::read_to_string(dev.join(f)).map(|s| s.trim().to_ascii_lowercase());
        if read("vendor").ok().as_deref() != Some(GOOGLE_PCI_VENDOR) {
            continue;
        }
        let Ok(device) = read("device") else { continue };
        let Ok(id) = u16::from_str_radix(device.trim_start_matches("0x"), 16) else {
            continue;
        };
        let Some(chip) = chip_by_pci_device(id) else {
            continue;
        };
        let Ok(group) = std::fs::read_link(dev.join("iommu_group")) else {
            continue;
        };
        let Some(group) = group.file_name().map(|g| g.to_string_lossy().to_string()) else {
            continue;
        };
        if dev_root.join("vfio").join(&group).exists() {
            found.push(TpuDevice {
                pci_address: dev
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .to_string(),
                chip,
                iommu_group: group,
            });
        }
    }
    found
}

/// Is TorchTPU installed in these site-packages folders? (Looks for its dist-info; no import.)
pub fn torch_tpu_installed(site_packages: &[PathBuf]) -> bool {
    site_packages.iter().any(|sp| {
        std::fs::read_dir(sp).is_ok_and(|rd| {
            rd.filter_map(|e| e.ok()).any(|e| {
                let n = e.file_name().to_string_lossy().to_ascii_lowercase();
                n.starts_with("torch_tpu-") && n.ends_with(".dist-info")
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_machine(devices: &[(&str, &str, &str, bool)]) -> tempfile::TempDir {
        // (pci address, vendor, device, vfio group present)
        let root = tempfile::tempdir().unwrap();
        let sys = root.path().join("sys/bus/pci/devices");
        let groups = root.path().join("sys/kernel/iommu_groups");
        std::fs::create_dir_all(&sys).unwrap();
        std::fs::create_dir_all(root.path().join("dev/vfio")).unwrap();
        for (i, (addr, vendor, device, vfio)) in devices.iter().enumerate() {
            let d = sys.join(addr);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            std::fs::write(d.join("device"), format!("{device}\n")).unwrap();
            let g = groups.join(format!("{}", 10 + i));
            std::fs::create_dir_all(&g).unwrap();
            std::os::unix::fs::symlink(&g, d.join("iommu_group")).unwrap();
            if *vfio {
                std::fs::write(root.path().join("dev/vfio").join(format!("{}", 10 + i)), "")
                    .unwrap();
            }
        }
        root
    }

    #[test]
    fn detection_reads_pci_and_vfio_only() {
        let m = fake_machine(&[
            ("0000:00:04.0", "0x1ae0", "0x0063", true), // v5e with VFIO
            ("0000:00:05.0", "0x1ae0", "0x0063", false), // v5e without VFIO: invisible
            ("0000:00:06.0", "0x1ae0", "0x9999", true), // Google, not a TPU
            ("0000:00:07.0", "0x8086", "0x0063", true), // other vendor
            ("0000:00:08.0", "0x1AE0", "0x0076", true), // v7, upper-case hex
        ]);
        let found = scan_tpus(&m.path().join("sys"), &m.path().join("dev"));
        let names: Vec<(&str, &str)> = found
            .iter()
            .map(|d| (d.pci_address.as_str(), d.chip.name))
            .collect();
        assert_eq!(
            names,
            vec![("0000:00:04.0", "v5e"), ("0000:00:08.0", "v7x")]
        );
        assert_eq!(found[0].iommu_group, "10");
        // No sysfs at all: no TPU, no error.
        assert!(scan_tpus(Path::new("/nonexistent"), Path::new("/nonexistent")).is_empty());
    }
}
