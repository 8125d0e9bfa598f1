//! Advice about a whole program rather than a file, given once: on the entry script, for itself
//! and the project modules it imports ([`crate::port::program`]), or, for library modules no
//! entry script imports, on the first module of their package, naming the others. A library of
//! 64 model files gets one channels-last finding (PERF001), not 64. (PRC008, the float32 matmul
//! precision of a program that trains, is `precision.rs`.)
//!
//! This file's own code is judged from its syntax tree; the other files of its program or
//! package from their text, each read once per run. A file given without a path (a test, a
//! pipe) is its own program.

use std::path::Path;

use ruff_text_size::{TextRange, TextSize};

use super::super::Checker;
use super::{Found, model};
use crate::port::program::networks::{
    Convs, convs_of, convs_on_disk, package_nets, words, words_on_disk,
};
use crate::port::program::{imports, tree};

/// How many other modules a finding names before it counts the rest.
const NAMED: usize = 3;

/// "a.py (class `A`), b.py (class `B`) and 2 more", at most [`NAMED`] named.
pub(super) fn listed(items: &[(String, String)]) -> String {
    let mut parts: Vec<String> = items
        .iter()
        .take(NAMED)
        .map(|(file, what)| format!("{file} ({what})"))
        .collect();
    let more = items.len().saturating_sub(NAMED);
    if more > 0 {
        parts.push(format!("{more} more"));
    }
    match parts.len() {
        0 => String::new(),
        1 => parts.remove(0),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    }
}

/// The first line of the statement at `at` in `src`, as a range (an import the finding points
/// at).
pub(super) fn line_at(src: &str, at: &std::ops::Range<usize>) -> TextRange {
    let line = src[at.clone()].lines().next().unwrap_or("");
    let start = TextSize::try_from(at.start).unwrap_or_default();
    TextRange::at(start, TextSize::try_from(line.len()).unwrap_or_default())
}

/// "class `Net`", "class `Net` and 1 other place".
fn own_detail(places: &[String]) -> String {
    match places.len() {
        0 | 1 => places.first().cloned().unwrap_or_default(),
        2 => format!("{} and 1 other place", places[0]),
        n => format!("{} and {} other places", places[0], n - 1),
    }
}

impl Checker<'_> {
    /// PERF001: the convolutional networks of this file's program, reported once (see the
    /// module doc).
    pub(super) fn conv_nets_of_program(&self) -> Vec<Found> {
        if self.src.contains("channels_last") {
            return vec![];
        }
        let own = || model::conv_places(self).map(|(r, p)| (r, own_detail(&p)));
        let Some(path) = self.facts.path.as_deref() else {
            return own()
                .map(|(r, d)| Found::with(r, format!(" ({d})")))
                .into_iter()
                .collect();
        };
        if tree::is_entry(path, self.src) {
            return self.conv_nets_of_entry(path, own());
        }
        // A test is neither a program nor a module programs use.
        if tree::is_test(path) {
            return vec![];
        }
        // A library module: the text decides whether it counts with its package (as the
        // package's other modules are judged); the syntax tree, where it finds the network.
        let Convs::Net(net) = convs_of(self.src) else {
            return vec![];
        };
        let (what, at) = (net.what, net.at);
        let (range, here) = own().unwrap_or_else(|| {
            let end = self.src[at..].find('(').map_or(at, |i| at + i + 1);
            let range = TextRange::new(
                TextSize::try_from(at).unwrap_or_default(),
                TextSize::try_from(end).unwrap_or_default(),
            );
            (range, what)
        });
        if imports::entry_importing(path).is_some() {
            // The entry script that imports this module reports it.
            return vec![];
        }
        // The first module of the package (in path order) with a network that no entry script
        // imports reports for the package, naming the others.
        let (dir, name) = tree::package_of(path);
        let base = dir.parent().unwrap_or(&dir);
        let Some(nets) = package_nets(path) else {
            return vec![];
        };
        let others: Vec<(String, String)> = nets
            .into_iter()
            .map(|(f, net)| (tree::shown(&f, base), net.what))
            .collect();
        let detail = match others.len() {
            0 => format!(" ({here})"),
            n => format!(
                " ({here}; one finding for package `{name}`: {n} more of its modules build convolutional networks, {})",
                listed(&others)
            ),
        };
        vec![Found::with(range, detail)]
    }

    /// PERF001 on an entry script: its own networks and those of the project modules it imports
    /// that it uses (one of the module's names that build a network appears in the program's
    /// other files, or the module builds one on import), unless a file of the program converts
    /// to channels-last.
    fn conv_nets_of_entry(&self, path: &Path, own: Option<(TextRange, String)>) -> Vec<Found> {
        let base = path.parent().unwrap_or(path);
        let members = imports::modules_of(path, self.src);
        let mut candidates = vec![];
        for m in &members {
            match convs_on_disk(&m.file) {
                Convs::ChannelsLast => return vec![],
                Convs::Net(net) => candidates.push((m, net)),
                Convs::None => {}
            }
        }
        if candidates.is_empty() && own.is_none() {
            return vec![];
        }
        // Re-exports (`__init__.py`) are no use.
        let mut texts = vec![(path.to_path_buf(), std::sync::Arc::new(words(self.src)))];
        for m in &members {
            if m.file.file_name().is_some_and(|n| n != "__init__.py") {
                texts.push((m.file.clone(), words_on_disk(&m.file)));
            }
        }
        let mut nets: Vec<(String, String, std::ops::Range<usize>)> = vec![];
        for (m, net) in candidates {
            let used = net.on_import
                || texts
                    .iter()
                    .any(|(f, w)| *f != m.file && net.names.iter().any(|n| w.contains(n)));
            if used {
                nets.push((tree::shown(&m.file, base), net.what, m.via.clone()));
            }
        }
        let modules: Vec<(String, String)> = nets
            .iter()
            .map(|(f, w, _)| (f.clone(), w.clone()))
            .collect();
        let found = match (own, nets.first()) {
            (Some((range, here)), None) => Found::with(range, format!(" ({here})")),
            (Some((range, here)), Some(_)) => Found::with(
                range,
                format!(
                    " ({here}; also in the project modules this program imports: {})",
                    listed(&modules)
                ),
            ),
            (None, Some((_, _, via))) => Found::with(
                line_at(self.src, via),
                format!(
                    " (in the project modules this program imports: {})",
                    listed(&modules)
                ),
            ),
            (None, None) => return vec![],
        };
        vec![found]
    }
}

#[cfg(test)]
#[path = "programs_tests.rs"]
mod tests;
