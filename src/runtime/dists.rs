//! What is installed in a Python environment, read from its site-packages folders without
//! importing anything: a distribution's version from its `*.dist-info` folder name.

use std::path::PathBuf;

/// The installed version of a distribution, from its `*.dist-info` folder name.
pub fn dist_version(site_packages: &[PathBuf], dist: &str) -> Option<String> {
    let want = dist.replace('-', "_").to_ascii_lowercase();
    site_packages.iter().find_map(|sp| {
        std::fs::read_dir(sp)
            .ok()?
            .filter_map(|e| e.ok())
            .find_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let stem = name.strip_suffix(".dist-info")?;
                let (n, v) = stem.split_once('-')?;
                (n.replace('-', "_").to_ascii_lowercase() == want).then(|| v.to_string())
            })
    })
}

/// `2.15.0+cu132` → (2, 15, 0)
pub fn numbers(v: &str) -> Vec<u32> {
    v.split(['+', '-'])
        .next()
        .unwrap_or("")
        .split('.')
        .map_while(|p| {
            p.chars()
                .take_while(|c| c.is_ascii_digit())
                .collect::<String>()
                .parse()
                .ok()
        })
        .collect()
}
