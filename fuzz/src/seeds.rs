//! Where the seed inputs come from: the repository's own real inputs (rule fixtures, examples,
//! test data, rule files), folders given with `--corpus`, and the real-code corpus
//! `scripts/corpus` caches under `~/.cache/tpuport/corpus` (with `--real-corpus`).

use std::path::{Path, PathBuf};

use crate::runner::Input;

/// The repository this harness belongs to.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The real-code corpus folder of `scripts/corpus`, if it is there.
pub fn real_corpus() -> Option<PathBuf> {
    let root = std::env::var_os("TPUPORT_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tpuport")))?;
    let dir = root.join("corpus");
    dir.is_dir().then_some(dir)
}

/// Where seeds are looked for besides the repository's own.
#[derive(Clone, Default)]
pub struct Extra {
    /// `--corpus DIR` folders: every file with the target's extension.
    pub dirs: Vec<PathBuf>,
    /// `--real-corpus`: the cached real code (Python files only).
    pub real: bool,
}

impl Extra {
    /// The extra seeds with extension `ext`, sorted by path, at most `max_bytes` each.
    pub fn inputs(&self, ext: &str, max_bytes: u64) -> Vec<Input> {
        let mut dirs = self.dirs.clone();
        if self.real && ext == "py" {
            match real_corpus() {
                Some(d) => dirs.push(d),
                None => eprintln!(
                    "tpuport-fuzz: --real-corpus: no corpus under ~/.cache/tpuport/corpus; run `bash scripts/corpus` first"
                ),
            }
        }
        let mut out = vec![];
        for d in &dirs {
            out.extend(files(d, &[ext], max_bytes));
        }
        out
    }
}

/// Every file under `dir` (recursively) with one of `exts`, sorted by path.
pub fn files(dir: &Path, exts: &[&str], max_bytes: u64) -> Vec<Input> {
    let mut paths = vec![];
    walk(dir, exts, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= max_bytes))
        .filter_map(|p| {
            let data = std::fs::read(&p).ok()?;
            Some(Input {
                name: p.display().to_string(),
                data,
            })
        })
        .collect()
}

fn walk(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if p.is_dir() {
            if !matches!(
                name.as_ref(),
                "target" | "__pycache__" | ".git" | "artifacts"
            ) {
                walk(&p, exts, out);
            }
        } else if exts.iter().any(|x| p.extension().is_some_and(|e| e == *x)) {
            out.push(p);
        }
    }
}

/// Seeds from folders of the repository.
pub fn from_repo(dirs: &[&str], exts: &[&str]) -> Vec<Input> {
    let root = repo();
    dirs.iter()
        .flat_map(|d| files(&root.join(d), exts, 1 << 20))
        .collect()
}
