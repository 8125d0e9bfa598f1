//! For unit tests: a default migration with one rule alone, and its findings as
//! `line: message`.

use std::path::Path;

use super::{Outcome, RuleIndex, RuleSet, Settings, migrate_source_at};

/// A default migration of `src` (the file at `path`, if given) with the rule `id` alone.
pub fn migrate(id: &str, src: &str, path: Option<&Path>) -> Outcome {
    let mut rules = RuleSet::builtin();
    rules.filter(&[id.to_string()], &[]).unwrap();
    let index = RuleIndex::new(&rules);
    migrate_source_at(src, path, &rules, &index, Settings::default())
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
