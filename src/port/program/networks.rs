//! What a module's text says about convolutional networks, for PERF001's judgement of the other
//! files of a program or package (`programs.rs`): whether it converts to channels-last, where it
//! builds a network, and which of its top-level names build one (a class that constructs
//! convolutions, a function that constructs such a class), so that a program counts a module only
//! where it uses one of them: a layer library imported for its `Linear` is no CNN of the program.
//! Each file is read once per run.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use regex::Regex;

use super::{imports, tree};
use crate::port::rules::NETWORK_WORDS;

/// A 2-D/3-D convolution constructed (`nn.Conv2d(`, `ConvTranspose3d(`).
static CONV_CALL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)(?:Lazy)?Conv(?:Transpose)?[23]d\(").unwrap());

/// A torchvision or timm model built (`torchvision.models.resnet50(`, `timm.create_model(`).
static BUILDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)(?-u:\b)torchvision\.models\.[a-z]\w*\s*\(|(?-u:\b)timm\.create_model\s*\(|^from torchvision\.models import |^from torchvision import models\b")
        .unwrap()
});

/// `from torch.nn import Conv2d, ReLU` (the names, to the end of the line or parentheses).
static FROM_TORCH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^\s*from\s+torch(?:\.[\w.]+)?\s+import\s+(\([^)]*\)|[^\n]*)").unwrap()
});

/// A statement at column 0, with the name a `class`/`def` gives.
static TOP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?:(?:async\s+)?def\s+(\w+)|class\s+(\w+)|[A-Za-z_@])").unwrap()
});

/// An identifier.
static WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[A-Za-z_]\w*").unwrap());

/// A module's convolutional network, as its text shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Net {
    /// Where the first is built: "class `ResNet`", "function `build`" or "module level".
    pub what: String,
    /// The byte it starts at.
    pub at: usize,
    /// The top-level classes and functions that build one.
    pub names: Vec<String>,
    /// One is built when the module is imported (at module level).
    pub on_import: bool,
}

/// What a module's text says about convolutional networks.
#[derive(Clone, Debug, PartialEq)]
pub enum Convs {
    /// It mentions `channels_last`: the program converts its model.
    ChannelsLast,
    /// Two convolutions or more (a ViT's one patch embedding is no CNN), or a torchvision/timm
    /// model.
    Net(Net),
    None,
}

static CONVS: tree::Kept<Convs> = LazyLock::new(Default::default);

/// For a library module that builds a network, the other modules of its package that build one
/// and no entry script imports, in path order; None where one of them comes before it: that one
/// reports for the package (PERF001 is said once per package, on its first such module).
pub fn package_nets(path: &Path) -> Option<Vec<(PathBuf, Net)>> {
    if first_net(path).is_some_and(|f| f.as_path() < path) {
        return None;
    }
    // None before it reports (that is the first one's): only those after it are named. Read
    // side by side (a large package's modules, for one file: it would keep one core busy).
    use rayon::prelude::*;
    Some(
        tree::package_files(path)
            .par_iter()
            .filter(|f| f.as_path() > path)
            .filter_map(|f| reporting_net(f).map(|net| (f.clone(), net)))
            .collect(),
    )
}

/// The network of the module at `f` where it counts for its package: no test, no entry script,
/// not imported by one.
fn reporting_net(f: &Path) -> Option<Net> {
    if tree::is_test(f) {
        return None;
    }
    let Convs::Net(net) = convs_on_disk(f) else {
        return None;
    };
    (imports::entry_importing(f).is_none() && !tree::entry_on_disk(f)).then_some(net)
}

/// Package folder → its first module (in path order) with a [`reporting_net`]: the module
/// PERF001 reports the package on.
static FIRST_NET: tree::PackagePicks = LazyLock::new(Default::default);

/// [`FIRST_NET`] of the package around `path`, found once per run.
fn first_net(path: &Path) -> Option<PathBuf> {
    tree::first_in_package(&FIRST_NET, path, |f| reporting_net(f).is_some())
}

/// Forget the packages judged (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut m) = FIRST_NET.lock() {
        m.clear();
    }
}

/// Whether the library module at `path` (no program), whose text is `text`, is the one that
/// reports its package's networks: not a test, no entry script imports it (that script reports
/// it), no module before it in its package builds one (the first such reports:
/// [`package_nets`]), and it builds one. The prefilter asks it before parsing, so that the other
/// modules of a model library are not parsed for PERF001.
pub fn reports_for_package(path: &Path, text: &str) -> bool {
    // Its own text first: most modules build no network, and then the package is not read.
    matches!(convs_of(text), Convs::Net(_))
        && !tree::is_test(path)
        && imports::entry_importing(path).is_none()
        && first_net(path).is_none_or(|f| f.as_path() >= path)
}

/// [`convs_of`] the file at `path`.
pub fn convs_on_disk(path: &Path) -> Convs {
    tree::fact(&CONVS, path, convs_of).unwrap_or(Convs::None)
}

pub fn convs_of(text: &str) -> Convs {
    if text.contains("channels_last") {
        return Convs::ChannelsLast;
    }
    if !NETWORK_WORDS.iter().any(|w| text.contains(w)) {
        return Convs::None;
    }
    // The same test on the text as written first: blanking strings and comments only takes
    // matches away, and most files that say "Conv" ("Conv1D", "Convert") build no network.
    if CONV_CALL.find_iter(text).nth(1).is_none() && !BUILDER.is_match(text) {
        return Convs::None;
    }
    // Docstring examples (`>>> Lift(nn.Conv2d(1, 1, 3))`) and comments build nothing.
    let code = code_only(text);
    let text = code.as_str();
    let mut places: Vec<usize> = conv_calls(text).map(|m| m.start()).collect();
    let builders: Vec<usize> = BUILDER.find_iter(text).map(|m| m.start()).collect();
    if places.len() < 2 && builders.is_empty() {
        return Convs::None;
    }
    places.extend(builders);
    places.sort_unstable();
    let tops = tops(text);
    let enclosing = |at: usize| tops.iter().rev().find(|t| t.start <= at);
    let mut names: Vec<String> = vec![];
    let mut on_import = false;
    for &at in &places {
        match enclosing(at).and_then(|t| t.name.clone()) {
            Some(n) if !names.contains(&n) => names.push(n),
            Some(_) => {}
            None => on_import = true,
        }
    }
    // Factories: top-level functions whose body names a class that builds one.
    let classes: Vec<String> = tops
        .iter()
        .filter(|t| t.class && t.name.as_ref().is_some_and(|n| names.contains(n)))
        .filter_map(|t| t.name.clone())
        .collect();
    for t in tops.iter().filter(|t| !t.class) {
        let Some(n) = &t.name else { continue };
        let body = &text[t.start..t.end];
        if !names.contains(n)
            && WORD
                .find_iter(body)
                .any(|w| classes.iter().any(|c| c == w.as_str()))
        {
            names.push(n.clone());
        }
    }
    let at = places[0];
    let what = match enclosing(at) {
        Some(Top {
            name: Some(n),
            class: true,
            ..
        }) => format!("class `{n}`"),
        Some(Top {
            name: Some(n),
            class: false,
            ..
        }) => format!("function `{n}`"),
        _ => "module level".into(),
    };
    Convs::Net(Net {
        what,
        at,
        names,
        on_import,
    })
}

/// One top-level statement: where it starts and ends, and the name a `class`/`def` gives.
struct Top {
    start: usize,
    end: usize,
    name: Option<String>,
    class: bool,
}

/// The top-level statements of `text` (decorators belong to what they decorate).
fn tops(text: &str) -> Vec<Top> {
    let mut out: Vec<Top> = vec![];
    let mut decorated: Option<usize> = None;
    for c in TOP.captures_iter(text) {
        let at = c.get(0).map_or(0, |m| m.start());
        if let Some(last) = out.last_mut() {
            last.end = at;
        }
        let (name, class) = match (c.get(1), c.get(2)) {
            (Some(d), _) => (Some(d.as_str().to_string()), false),
            (_, Some(k)) => (Some(k.as_str().to_string()), true),
            _ if text[at..].starts_with('@') => {
                decorated.get_or_insert(at);
                continue;
            }
            _ => (None, false),
        };
        out.push(Top {
            start: decorated.take().unwrap_or(at),
            end: text.len(),
            name,
            class,
        });
    }
    out
}

/// The convolutions constructed in `text`: `nn.Conv2d(` (dotted), or a bare `Conv2d(` where the
/// module imports that name from torch (not a `class Conv2d(`/`def Conv2d(` statement, nor a
/// wrapper of the same name imported from elsewhere: peft's adapters).
pub fn conv_calls(text: &str) -> impl Iterator<Item = regex::Match<'_>> {
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

/// The identifiers of a text's code.
pub fn words(text: &str) -> HashSet<String> {
    WORD.find_iter(&code_only(text))
        .map(|w| w.as_str().to_string())
        .collect()
}

/// `text` with the insides of its strings and its comments blanked (byte offsets kept).
pub fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from.min(to)..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'#' => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            q @ (b'"' | b'\'') => {
                let triple = b[i..].starts_with(&[q, q, q]);
                let open = if triple { 3 } else { 1 };
                let mut j = i + open;
                while j < b.len() {
                    if b[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    let closes = if triple {
                        b[j..].starts_with(&[q, q, q])
                    } else {
                        b[j] == q || b[j] == b'\n'
                    };
                    if closes {
                        break;
                    }
                    j += 1;
                }
                let end = j.min(b.len());
                blank(&mut out, i + open, end);
                i = (end + open).min(b.len());
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

static WORDS: tree::Kept<Arc<HashSet<String>>> = LazyLock::new(Default::default);

/// [`words`] of the file at `path`.
pub fn words_on_disk(path: &Path) -> Arc<HashSet<String>> {
    tree::fact(&WORDS, path, |t| Arc::new(words(t))).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_says_which_of_its_names_build_a_network() {
        let text = "import torch.nn as nn\n\n\n@register\nclass Block(nn.Module):\n    def __init__(self):\n        self.a = nn.Conv2d(3, 3, 1)\n        self.b = nn.Conv2d(3, 3, 1)\n\n\nclass Head(nn.Module):\n    pass\n\n\ndef resnet(depth):\n    return nn.Sequential(*[Block() for _ in range(depth)])\n\n\ndef unrelated():\n    return Head()\n";
        let Convs::Net(net) = convs_of(text) else {
            panic!("a network")
        };
        assert_eq!(net.what, "class `Block`");
        assert_eq!(net.names, ["Block", "resnet"]);
        assert!(!net.on_import);
        let at_import =
            "import torch.nn as nn\nnet = nn.Sequential(nn.Conv2d(3, 3, 1), nn.Conv2d(3, 3, 1))\n";
        let Convs::Net(net) = convs_of(at_import) else {
            panic!("a network")
        };
        assert!(net.on_import && net.names.is_empty());
        assert_eq!(convs_of("x = nn.Conv2d(1, 1, 1)\n"), Convs::None);
        // Docstring examples and comments build nothing.
        let doc = "class Lift(nn.Module):\n    \"\"\"\n    >>> Lift(nn.Conv2d(1, 1, 3))\n    >>> nn.Conv2d(1, 1, 3)\n    \"\"\"\n    # nn.Conv2d(1, 1, 3)\n";
        assert_eq!(convs_of(doc), Convs::None);
    }

    #[test]
    fn only_the_first_network_module_of_a_library_package_reports_it() {
        let d = tempfile::tempdir().unwrap();
        let net = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n        self.a = nn.Conv2d(3, 3, 1)\n        self.b = nn.Conv2d(3, 3, 1)\n";
        let first = crate::port::test_support::write(d.path(), "pkg/a_model.py", net);
        let second = crate::port::test_support::write(d.path(), "pkg/b_model.py", net);
        crate::port::test_support::write(d.path(), "pkg/__init__.py", "");
        assert!(reports_for_package(&first, net));
        assert!(!reports_for_package(&second, net));
        assert_eq!(package_nets(&second), None);
        let others = package_nets(&first).unwrap();
        assert_eq!(others.len(), 1);
        assert_eq!(others[0].0, second);
    }
}
