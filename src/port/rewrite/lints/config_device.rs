//! DEV022: a device a config file sets to CUDA. A program that reads its device from a YAML
//! or JSON config (`device: cuda`, `DEVICE: "cuda:0"`, `"device": "cuda"`) and hands it to
//! `torch.device(...)`/`.to(...)` runs there whatever the Python says: the port rewrites the
//! code's defaults, and on a TPU VM the config still asks for CUDA (set W: five scripts of a
//! microscopy project and a super-resolution trainer took `device: cuda` from their YAML while
//! the ported tensors went to the TPU). The finding sits on the call that loads the config
//! (`yaml.safe_load`, `yaml.load`, `OmegaConf.load`, `json.load`, Hydra's `@hydra.main(...)`)
//! and names the file and line;
//! it is manual, so the program counts as blocked until the config is changed.
//!
//! The configs looked at: the `.yaml`/`.yml`/`.json` files of the script's project and the
//! folders under it (4 levels, hidden folders skipped, files over 1 MB skipped), read once per
//! project in a run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use ruff_python_ast::AnyNodeRef;
use ruff_text_size::Ranged;

use super::super::Checker;
use super::{Found, walk};

/// A device key set to CUDA (`device: cuda`, `DEVICE: 'cuda:0'`, `"device": "cuda",`).
static CUDA_DEVICE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?mi)^[ \t]*["']?(?:[\w]*_)?device["']?[ \t]*:[ \t]*["']?cuda(?::\d+)?["']?[ \t]*,?[ \t]*(?:#.*)?\r?$"#,
    )
    .unwrap()
});

/// The loaders of a config file, by their last name.
const LOADERS: &[&str] = &["safe_load", "load", "full_load", "main", "compose"];
const QUALIFIED: &[&str] = &[
    "yaml.safe_load",
    "yaml.load",
    "yaml.full_load",
    "omegaconf.OmegaConf.load",
    "json.load",
    "hydra.main",
    "hydra.compose",
];

/// A config that sets a CUDA device: its path, line (1-based) and the line's text.
type DeviceConfig = Option<(PathBuf, usize, String)>;
static PROJECTS: LazyLock<Mutex<HashMap<PathBuf, DeviceConfig>>> = LazyLock::new(Default::default);

/// Forget the projects read (the start of a run).
pub(in crate::port::rewrite) fn forget() {
    if let Ok(mut f) = PROJECTS.lock() {
        f.clear();
    }
}

/// The first config under `dir` (sorted, breadth first) that sets a CUDA device.
fn device_config(dir: &Path) -> DeviceConfig {
    super::configs::once_per_folder(&PROJECTS, dir, || {
        super::configs::first_config(dir, &[".yaml", ".yml", ".json"], &|text| {
            let m = CUDA_DEVICE.find(text)?;
            let line = text[..m.start()].matches('\n').count() + 1;
            Some((line, m.as_str().trim().to_string()))
        })
        .map(|(p, (line, text))| (p, line, text))
    })
}

impl Checker<'_> {
    /// DEV022's findings (see the module doc).
    pub(super) fn devices_from_configs(&self) -> Vec<Found> {
        let mut calls = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            if let AnyNodeRef::ExprCall(call) = node
                && self
                    .callee_named(call, LOADERS)
                    .is_some_and(|q| QUALIFIED.contains(&q.as_str()))
            {
                calls.push(call.range());
            }
        });
        if calls.is_empty() {
            return vec![];
        }
        let Some(dir) = self.project_dir() else {
            return vec![];
        };
        let Some((config, line, text)) = device_config(&dir) else {
            return vec![];
        };
        let shown = config.strip_prefix(&dir).unwrap_or(&config).display();
        let detail = format!("{shown}:{line}: `{text}`");
        calls
            .into_iter()
            .map(|r| Found::with(r, detail.clone()))
            .collect()
    }
}
