//! insta's `glob!` without its global state. `glob!` keeps a process-wide stack of running globs,
//! and any snapshot that fails while one runs (in another test, on another thread) is counted
//! against that glob and does not fail its own test: a changed snapshot in `portable::` passed
//! silently while the rule fixtures ran beside it, and the fixtures' test failed instead, with
//! no diff. Here every file's snapshot is asserted in its own test, as a plain
//! `assert_snapshot!` does, under the same snapshot names (`<test>@<dir>__<file>.snap`).

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::{Path, PathBuf};

/// The `.py` files under `tests/<dir>` (`depth` 0: in it; 1: in its folders), sorted, kept by
/// `INSTA_GLOB_FILTER` where set (`;`-separated globs over the path below `tests/<dir>`, `*`
/// any characters: `INSTA_GLOB_FILTER='DEV/DEV004.py'`).
fn files(dir: &Path, depth: usize) -> Vec<PathBuf> {
    let mut level = vec![dir.to_path_buf()];
    for _ in 0..depth {
        level = level
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()))
            .filter(|p| p.is_dir())
            .collect();
    }
    let mut out: Vec<PathBuf> = level
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "py"))
        .collect();
    out.sort();
    if let Ok(filter) = std::env::var("INSTA_GLOB_FILTER") {
        let globs: Vec<regex::Regex> = filter
            .split(';')
            .filter(|g| !g.is_empty())
            .map(|g| {
                let parts: Vec<String> = g.split('*').map(regex::escape).collect();
                regex::Regex::new(&format!("^{}$", parts.join(".*"))).unwrap()
            })
            .collect();
        out.retain(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy();
            globs.iter().any(|g| g.is_match(&rel))
        });
    }
    out
}

/// The snapshots of one test, one per `.py` file under `tests/<dir>` at `depth` (0: in it; 1:
/// in its folders).
pub struct Snapshots {
    /// The test's module and function (`fixtures`, `rule_fixtures`): its snapshot files' names.
    pub module: &'static str,
    pub test: &'static str,
    pub dir: &'static str,
    pub depth: usize,
}

thread_local! {
    /// The first changed lines of each snapshot that changed, noted on the test's thread.
    static CHANGED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Snapshots {
    fn base(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(self.dir)
    }

    /// Run `check` (which asserts a snapshot) on each file, with the file as the snapshot's
    /// input and its path below `tests/<dir>` as the name's suffix; every file is checked, then
    /// the test fails naming the files whose check failed, with what [`Self::note`] saw.
    pub fn each(&self, check: impl Fn(&Path)) {
        let base = self.base();
        let files = files(&base, self.depth);
        assert!(!files.is_empty(), "no .py files in {}", base.display());
        CHANGED.with(|c| c.borrow_mut().clear());
        let mut failed = vec![];
        let mut first = None;
        for path in &files {
            let rel = path
                .strip_prefix(&base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let mut settings = insta::Settings::clone_current();
            settings.set_input_file(path);
            settings.set_snapshot_suffix(rel.as_str());
            let run = catch_unwind(AssertUnwindSafe(|| settings.bind(|| check(path))));
            if let Err(e) = run {
                failed.push(rel);
                first.get_or_insert(e);
            }
        }
        if let Some(e) = first {
            // Printed last: the end of a failing test's output is what CI shows.
            let changed = CHANGED.with(|c| c.borrow().join("\n\n"));
            eprintln!(
                "{changed}\nfailed for {} file(s): {}",
                failed.len(),
                failed.join(", ")
            );
            resume_unwind(e);
        }
    }

    /// Note the first changed lines of `path`'s snapshot, where `snap` differs from the stored
    /// one (insta's own report, printed before, may be cut from what CI shows).
    pub fn note(&self, path: &Path, snap: &str) {
        let Ok(rel) = path.strip_prefix(self.base()) else {
            return;
        };
        let suffix = rel.to_string_lossy().replace(['/', '\\'], "__");
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/integration/snapshots")
            .join(format!(
                "integration__{}__{}@{suffix}.snap",
                self.module, self.test
            ));
        let Ok(text) = std::fs::read_to_string(file) else {
            return;
        };
        let Some((_, old)) = text
            .strip_prefix("---\n")
            .and_then(|t| t.split_once("\n---\n"))
        else {
            return;
        };
        if old.trim_end() == snap.trim_end() {
            return;
        }
        let diff = tpuport::port::render::unified_diff("stored", old, snap);
        let head: Vec<&str> = diff.lines().take(40).collect();
        let entry = format!("{} changed:\n{}", rel.display(), head.join("\n"));
        CHANGED.with(|c| c.borrow_mut().push(entry));
    }
}
