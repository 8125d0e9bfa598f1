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
use std::sync::LazyLock;

use regex::Regex;
use ruff_text_size::{TextRange, TextSize};

use super::super::Checker;
use super::{Found, model};
use crate::port::program::{imports, tree};

/// A 2-D/3-D convolution constructed (`nn.Conv2d(`, `ConvTranspose3d(`).
static CONV_CALL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)(?:Lazy)?Conv(?:Transpose)?[23]d\(").unwrap());

/// A torchvision or timm model built (`torchvision.models.resnet50(`, `timm.create_model(`).
static BUILDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)(?-u:\b)torchvision\.models\.[a-z]\w*\s*\(|(?-u:\b)timm\.create_model\s*\(|^from torchvision\.models import |^from torchvision import models\b")
        .unwrap()
});

/// A class statement, for naming where a convolution is built.
static CLASS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*class\s+(\w+)").unwrap());

/// How many other modules a finding names before it counts the rest.
const NAMED: usize = 3;

/// What a module's text says about convolutional networks.
#[derive(Clone, Debug, PartialEq)]
enum Convs {
    /// It mentions `channels_last`: the program converts its model.
    ChannelsLast,
    /// It builds a convolutional network: where (`class `ResNet``), and at which byte.
    Net(String, usize),
    None,
}

/// Module file → what its text says.
static CONVS: tree::Kept<Convs> = LazyLock::new(Default::default);

fn convs_on_disk(path: &Path) -> Convs {
    tree::fact(&CONVS, path, convs_of).unwrap_or(Convs::None)
}

/// Two convolutions or more (a ViT's one patch embedding is no CNN), or a torchvision/timm model.
fn convs_of(text: &str) -> Convs {
    if text.contains("channels_last") {
        return Convs::ChannelsLast;
    }
    if !text.contains("Conv") && !text.contains("torchvision") && !text.contains("timm") {
        return Convs::None;
    }
    let calls: Vec<regex::Match> = conv_calls(text).take(2).collect();
    let at = match (&calls[..], BUILDER.find(text)) {
        ([first, _], b) => b.map_or(first.start(), |b| b.start().min(first.start())),
        (_, Some(b)) => b.start(),
        _ => return Convs::None,
    };
    let class = CLASS
        .captures_iter(&text[..at])
        .last()
        .map(|c| format!("class `{}`", &c[1]));
    Convs::Net(class.unwrap_or_else(|| "module level".into()), at)
}

/// The convolutions constructed in `text`: `nn.Conv2d(` (dotted), or a bare `Conv2d(` where the
/// module imports that name from torch (not a `class Conv2d(`/`def Conv2d(` statement, nor a
/// wrapper of the same name imported from elsewhere: peft's adapters).
fn conv_calls(text: &str) -> impl Iterator<Item = regex::Match<'_>> {
    let from_torch = |name: &str| {
        FROM_TORCH.captures_iter(text).any(|c| {
            c[1].split(|ch: char| !ch.is_alphanumeric() && ch != '_')
                .any(|n| n == name)
        })
    };
    CONV_CALL.find_iter(text).filter(move |m| {
        let name = m.as_str().trim_end_matches('(');
        text[..m.start()].ends_with('.') || from_torch(name)
    })
}

/// `from torch.nn import Conv2d, ReLU` (the names, to the end of the line or parentheses).
static FROM_TORCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*from\s+torch(?:\.[\w.]+)?\s+import\s+(\([^)]*\)|[^\n]*)").unwrap()
});

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
        // A library module: the text decides whether it counts with its package (as the
        // package's other modules are judged); the syntax tree, where it finds the network.
        let Convs::Net(what, at) = convs_of(self.src) else {
            return vec![];
        };
        let (range, here) = own().unwrap_or_else(|| {
            let end = self.src[at..].find('(').map_or(at, |i| at + i + 1);
            let range = TextRange::new(
                TextSize::try_from(at).unwrap_or_default(),
                TextSize::try_from(end).unwrap_or_default(),
            );
            (range, what)
        });
        if tree::entry_importing(path).is_some() {
            // The entry script that imports this module reports it.
            return vec![];
        }
        // The first module of the package (in path order) with a network that no entry script
        // imports reports for the package, naming the others.
        let (dir, name) = tree::package_of(path);
        let base = dir.parent().unwrap_or(&dir);
        let mut others: Vec<(String, String)> = vec![];
        for f in tree::package_files(path).iter() {
            if f == path || tree::is_test(f) {
                continue;
            }
            let Convs::Net(what, _) = convs_on_disk(f) else {
                continue;
            };
            if tree::entry_importing(f).is_some() || tree::entry_on_disk(f) {
                continue;
            }
            if f < &path.to_path_buf() {
                return vec![];
            }
            others.push((tree::shown(f, base), what));
        }
        let detail = match others.len() {
            0 => format!(" ({here})"),
            n => format!(
                " ({here}; one finding for package `{name}`: {n} more of its modules build convolutional networks, {})",
                listed(&others)
            ),
        };
        vec![Found::with(range, detail)]
    }

    /// PERF001 on an entry script: its own networks and those of the project modules it imports,
    /// unless one of them converts to channels-last.
    fn conv_nets_of_entry(&self, path: &Path, own: Option<(TextRange, String)>) -> Vec<Found> {
        let base = path.parent().unwrap_or(path);
        let mut nets: Vec<(String, String, std::ops::Range<usize>)> = vec![];
        for m in imports::modules_of(path, self.src) {
            match convs_on_disk(&m.file) {
                Convs::ChannelsLast => return vec![],
                Convs::Net(what, _) => nets.push((tree::shown(&m.file, base), what, m.via)),
                Convs::None => {}
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
