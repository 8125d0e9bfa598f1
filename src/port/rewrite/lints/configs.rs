//! LIB025: a Lightning Trainer built from a Hydra config. `hydra.utils.instantiate(cfg.trainer)`
//! builds whatever the YAML's `_target_` names, so a program whose config says
//! `_target_: lightning.pytorch.Trainer` with `accelerator: 'gpu'` trains through Lightning,
//! which has no TorchTPU accelerator, and no Python line names the Trainer for LIB012 to see
//! (set N: an image-classification framework whose `main.py` and `inference.py` instantiate
//! their Trainer from `cli_configs/train.yaml`). The finding sits on the `instantiate` call
//! that builds the trainer (its argument or its target names a trainer) and names the YAML file
//! and line, with the accelerator the config sets.
//!
//! The configs looked at: the `.yaml`/`.yml` files of the script's project (the folder above its
//! top package, or a loose script's folder) and the folders under it (4 levels, hidden folders skipped, files over 1 MB skipped), read once per folder
//! in a run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use ruff_python_ast::AnyNodeRef;
use ruff_text_size::Ranged;

use super::super::Checker;
use super::{Found, walk};

/// A config that builds a Lightning Trainer (or Fabric).
static TARGET: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?m)^[ \t]*_target_[ \t]*:[ \t]*['"]?(?:lightning\.pytorch|pytorch_lightning|lightning)(?:\.trainer(?:\.trainer)?)?\.Trainer['"]?[ \t]*(?:#.*)?\r?$"#,
    )
    .unwrap()
});

/// The accelerator a config sets.
static ACCELERATOR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*accelerator[ \t]*:[ \t]*['"]?([\w${}.:]+)"#).unwrap()
});

/// Lightning 1.x's device count (`gpus: 1`), where no accelerator is set.
static GPUS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?m)^[ \t]*gpus[ \t]*:[ \t]*['"]?([\w${}.:-]+)"#).unwrap());

/// Hydra's builders.
const INSTANTIATE: &[&str] = &["hydra.utils.instantiate", "hydra.utils.call"];

/// A Trainer config found: its path, its `_target_` line (1-based) and its accelerator.
type TrainerConfig = Option<(PathBuf, usize, Option<String>)>;
static FOLDERS: LazyLock<Mutex<HashMap<PathBuf, TrainerConfig>>> = LazyLock::new(Default::default);

/// Forget the folders read (the start of a run).
pub(in crate::port::rewrite) fn forget() {
    if let Ok(mut f) = FOLDERS.lock() {
        f.clear();
    }
}

/// What `find` says about the folder `dir`, asked once per run (`cache` holds the answers).
pub(super) fn once_per_folder<T: Clone>(
    cache: &Mutex<HashMap<PathBuf, T>>,
    dir: &Path,
    find: impl FnOnce() -> T,
) -> T {
    if let Some(known) = cache.lock().ok().and_then(|f| f.get(dir).cloned()) {
        return known;
    }
    let found = find();
    if let Ok(mut f) = cache.lock() {
        f.insert(dir.to_path_buf(), found.clone());
    }
    found
}

/// The first config file under `dir` (sorted, breadth first, 4 levels; hidden folders and files
/// over 1 MB skipped) whose name ends with one of `exts` and whose text `find` accepts: its path
/// and what `find` made of it.
pub(super) fn first_config<T>(
    dir: &Path,
    exts: &[&str],
    find: &dyn Fn(&str) -> Option<T>,
) -> Option<(PathBuf, T)> {
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..=4 {
        let mut next = vec![];
        for d in level {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for p in paths {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                if name.starts_with('.') || name == "__pycache__" || name == "node_modules" {
                    continue;
                }
                if p.is_dir() {
                    next.push(p);
                    continue;
                }
                if !exts.iter().any(|x| name.ends_with(x))
                    || p.metadata().is_ok_and(|m| m.len() > 1 << 20)
                {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                if let Some(found) = find(&text) {
                    return Some((p, found));
                }
            }
        }
        level = next;
    }
    None
}

/// The first config under `dir` (sorted, breadth first) that builds a Lightning Trainer.
fn trainer_config(dir: &Path) -> TrainerConfig {
    once_per_folder(&FOLDERS, dir, || {
        first_config(dir, &[".yaml", ".yml"], &|text| {
            let m = TARGET.find(text)?;
            let line = text[..m.start()].matches('\n').count() + 1;
            let accelerator = ACCELERATOR
                .captures(&text[m.start()..])
                .map(|c| c[1].to_string())
                .or_else(|| GPUS.captures(text).map(|c| format!("gpus: {}", &c[1])));
            Some((line, accelerator))
        })
        .map(|(p, (line, accelerator))| (p, line, accelerator))
    })
}

impl Checker<'_> {
    /// The folder of this file's project, where its configs are looked for.
    pub(super) fn project_dir(&self) -> Option<PathBuf> {
        let path = std::path::absolute(self.facts.path.as_deref()?).ok()?;
        Some(crate::port::program::tree::project_of(&path))
    }

    /// LIB025's findings (see the module doc).
    pub(super) fn trainers_from_configs(&self) -> Vec<Found> {
        let mut calls = vec![];
        walk(&self.parsed.module.body, true, &mut |node, stack| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            if self
                .callee_named(call, &["instantiate", "call"])
                .is_none_or(|q| !INSTANTIATE.contains(&q.as_str()))
            {
                return;
            }
            // The trainer is what it builds: its argument or the name it is bound to says so.
            let statement = stack
                .iter()
                .rev()
                .find(|n| n.is_statement())
                .map_or(call.range(), |n| n.range());
            if self.text(statement).to_lowercase().contains("trainer") {
                calls.push(call.range());
            }
        });
        if calls.is_empty() {
            return vec![];
        }
        // The project's configs: a pipeline module in a package (`src/training_pipeline.py`)
        // reads the `configs/` beside the package (set T).
        let Some(dir) = self.project_dir() else {
            return vec![];
        };
        let Some((config, line, accelerator)) = trainer_config(&dir) else {
            return vec![];
        };
        let shown = config.strip_prefix(&dir).unwrap_or(&config).display();
        let detail = match accelerator {
            Some(a) => format!("{shown}:{line}, accelerator: {a}"),
            None => format!("{shown}:{line}, no accelerator: \"auto\""),
        };
        calls
            .into_iter()
            .map(|r| Found::with(r, detail.clone()))
            .collect()
    }
}
