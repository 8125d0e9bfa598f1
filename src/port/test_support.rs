//! What the unit tests share: a file written into a temporary tree, and a default migration
//! with one rule alone (with its findings as `line: message`).

use std::path::{Path, PathBuf};

use super::{Outcome, RuleIndex, RuleSet, Settings, migrate_source_at};

/// Writes `text` to `dir/rel` (folders made as needed) and returns the path.
pub fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}

/// A default migration of `src` (the file at `path`, if given) with the rule `id` alone.
pub fn migrate(id: &str, src: &str, path: Option<&Path>) -> Outcome {
    let mut rules = RuleSet::builtin();
    rules.filter(&[id.to_string()], &[]).unwrap();
    let index = RuleIndex::new(&rules);
    migrate_source_at(src, path, &rules, &index, Settings::default())
}

/// Migrate `src` with every built-in rule, under the default `--to portable`.
pub fn migrate_all(src: &str) -> Outcome {
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    migrate_source_at(src, None, &rules, &index, Settings::default())
}

/// [`migrate_all`] of the file at `path`: the port, or `src` where nothing changes.
pub fn migrate_all_at(src: &str, path: &Path) -> String {
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    migrate_source_at(src, Some(path), &rules, &index, Settings::default())
        .output
        .unwrap_or_else(|| src.to_string())
}

/// [`migrate_all`]'s text: the port, or `src` where nothing changes.
pub fn ported(src: &str) -> String {
    migrate_all(src).output.unwrap_or_else(|| src.to_string())
}

/// The findings of [`migrate`], each as `line: message`.
pub fn findings(id: &str, src: &str, path: Option<&Path>) -> Vec<String> {
    migrate(id, src, path)
        .diagnostics
        .iter()
        .map(|d| {
            let line = src[..usize::from(d.range.start())].matches('\n').count() + 1;
            format!("{line}: {}", d.message)
        })
        .collect()
}
