//! The rule index, built once per rule set and shared by all files: lookup tables from a
//! qualified name, method, attribute or keyword to the rules that match it, and the needle
//! prefilter ([`RuleIndex::active`]) that tells which rules could fire on a text at all.

use std::collections::HashSet;
use std::path::Path;

use rustc_hash::FxHashMap as HashMap;

use super::facts;
use super::needles::Needles;
use super::rules::{Matcher, RuleSet};

/// Lookup tables over a rule set, built once and shared by all files.
pub struct RuleIndex {
    pub(super) calls: HashMap<String, Vec<usize>>,
    pub(super) refs: HashMap<String, Vec<usize>>,
    pub(super) prefixes: Vec<(String, usize)>,
    pub(super) methods: HashMap<String, Vec<usize>>,
    pub(super) attributes: HashMap<String, Vec<usize>>,
    pub(super) keywords: HashMap<String, Vec<usize>>,
    pub(super) strings: Vec<usize>,
    /// Rules that run a built-in analysis ([`Matcher::Lint`]).
    pub(super) lints: Vec<usize>,
    pub(super) roots: HashSet<String>,
    needle_set: Needles,
    /// Per rule: all of these groups must be present, each group = any of its needles.
    needle_ids: Vec<Vec<Vec<usize>>>,
    /// Lints that report only in a file that runs as a program, or where its text spells one
    /// of some words ([`crate::port::rules::Lint::program_gate`]): off in any other file (a
    /// module-level call is what makes a program: [`facts::could_run_as_program`]), so that a
    /// library module with nothing else to check is not parsed for them.
    gated: Vec<(usize, &'static [&'static str])>,
    /// Lints that report only in a tree whose `setup.py` builds a CUDA extension (KRN005): off
    /// elsewhere, so that their common needle (`torch`) makes no other file be parsed.
    extension_trees: Vec<usize>,
    /// Gated lints said once per package off programs ([`crate::port::rules::Lint::once_per_package`]).
    package_once: Vec<usize>,
    /// Lints that read notebooks only ([`crate::port::rules::Lint::notebooks_only`]): off in
    /// any other file, so that their common needle (`import`) makes no other file be parsed.
    notebooks: Vec<usize>,
}

impl RuleIndex {
    pub fn new(set: &RuleSet) -> RuleIndex {
        let mut ix = RuleIndex {
            calls: HashMap::default(),
            refs: HashMap::default(),
            prefixes: vec![],
            methods: HashMap::default(),
            attributes: HashMap::default(),
            keywords: HashMap::default(),
            strings: vec![],
            lints: vec![],
            roots: set.module_roots(),
            needle_set: Needles::new::<&str>(&[]),
            needle_ids: vec![],
            gated: vec![],
            extension_trees: vec![],
            package_once: vec![],
            notebooks: vec![],
        };
        let mut needles: Vec<String> = vec![];
        for (i, r) in set.rules.iter().enumerate() {
            match &r.matcher {
                Matcher::Call(names) => {
                    for n in names {
                        ix.calls.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Reference { exact, prefixes } => {
                    for n in exact {
                        ix.refs.entry(n.clone()).or_default().push(i);
                    }
                    for p in prefixes {
                        ix.prefixes.push((p.clone(), i));
                    }
                }
                Matcher::Method(names) => {
                    for n in names {
                        ix.methods.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Attribute(names) => {
                    for n in names {
                        ix.attributes.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::Keyword { names, .. } => {
                    for n in names {
                        ix.keywords.entry(n.clone()).or_default().push(i);
                    }
                }
                Matcher::String { .. } => ix.strings.push(i),
                Matcher::Lint(lint) => {
                    ix.lints.push(i);
                    if let Some(words) = lint.program_gate() {
                        ix.gated.push((i, words));
                    }
                    if lint.once_per_package() {
                        ix.package_once.push(i);
                    }
                    if lint.notebooks_only() {
                        ix.notebooks.push(i);
                    }
                    if *lint == crate::port::rules::Lint::CudaExtensionImport {
                        ix.extension_trees.push(i);
                    }
                }
            }
            let mut groups = vec![];
            for group in &r.needles {
                let mut ids = vec![];
                for n in group.split('|') {
                    let lower = n.to_ascii_lowercase();
                    let id = match needles.iter().position(|x| *x == lower) {
                        Some(id) => id,
                        None => {
                            needles.push(lower);
                            needles.len() - 1
                        }
                    };
                    ids.push(id);
                }
                groups.push(ids);
            }
            ix.needle_ids.push(groups);
        }
        // Longest prefix first, so the most specific fallback wins.
        ix.prefixes
            .sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        // Every file is searched once, with every needle ([`Needles`]), ASCII case ignored.
        ix.needle_set = Needles::new(&needles);
        ix
    }

    /// Which rules could fire on this text, of the file at `path` (every needle of the rule
    /// occurs in it, and a program's lint has a program or its words).
    pub fn active(&self, source: &str, path: Option<&Path>) -> Vec<bool> {
        let present = self.needle_set.present(source);
        let mut active: Vec<bool> = self
            .needle_ids
            .iter()
            .map(|groups| groups.iter().all(|g| g.iter().any(|i| present[*i])))
            .collect();
        if self.gated.iter().any(|(i, _)| active[*i]) {
            let program = facts::could_run_as_program(source)
                || path.is_some_and(|p| p.file_name().is_some_and(|n| n == "__main__.py"));
            if !program {
                for (i, words) in &self.gated {
                    active[*i] = active[*i] && words.iter().any(|w| source.contains(w));
                }
                if self.package_once.iter().any(|i| active[*i]) {
                    let reports = path.is_none_or(|p| {
                        crate::port::program::networks::reports_for_package(p, source)
                    });
                    for i in &self.package_once {
                        active[*i] = active[*i] && reports;
                    }
                }
            }
        }
        if self.notebooks.iter().any(|i| active[*i]) {
            let notebook = path.is_some_and(crate::port::notebook::is_notebook);
            for i in &self.notebooks {
                active[*i] = active[*i] && notebook;
            }
        }
        if self.extension_trees.iter().any(|i| active[*i]) {
            let built =
                path.is_some_and(|p| !crate::port::program::extensions::built_for(p).is_empty());
            for i in &self.extension_trees {
                active[*i] = active[*i] && built;
            }
        }
        active
    }
}
