//! Modules a file loads at run time rather than imports: `importlib.import_module("pkg.mod")`
//! or `__import__(...)` with a literal name, or a literal package with a name chosen at run time
//! (`import_module("models." + args.arch)`, `f"models.{name}"`: a registry of models, any of its
//! modules), and modules loaded by path (`importlib.util.spec_from_file_location`,
//! `SourceFileLoader`, `runpy.run_path`, `imp.load_source`, `exec(open(...).read())`) from a
//! folder the file names in a string (`Path(__file__).parent.parent / "configs" / name`: any
//! module of that folder). Set AB: a training script loaded its config module by path, and the
//! config chose `'cuda' if ... else 'cpu'`; the program model did not see the config, so the
//! program counted as having nothing to port and trained on a TPU VM's CPU with no word.
//!
//! Read where everything a module may run is asked for ([`super::imports::Depth::Anywhere`]):
//! the judgement of programs (PRG001).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::layout::is_init;
use super::tree;

/// At most this many modules of one folder or package are taken as loaded (a configs folder, a
/// registry of models; not a whole framework).
const MAX_PER_FOLDER: usize = 32;

/// `import_module("a.b")`, `__import__('a')`, or a literal package before a name chosen at run
/// time: `import_module("models." + x)`, `import_module(f"models.{x}")`, `"models.%s" % x`,
/// `"models.{}".format(x)`. Group 1: the literal; group 2: what follows it.
static BY_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\b(?:import_module|__import__)\(\s*f?["']([\w.]*)(\{|["']\s*(?:\+|%|\.format|,|\)))"#,
    )
    .unwrap()
});

/// A call that loads a module from a file path.
static BY_PATH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:spec_from_file_location|SourceFileLoader|run_path|load_source)\(|\bexec\(\s*open\(",
    )
    .unwrap()
});

/// A string literal naming a folder or a file (`"configs"`, `'experiments/base'`, `"v5.py"`).
static PATH_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"["']([\w\-]+(?:/[\w\-]+)*(?:\.py)?)["']"#).unwrap());

/// One module loaded at run time: its file, the range of the call that loads it, and a name for
/// it (the dotted name, or the file's path as written).
pub struct Load {
    pub file: PathBuf,
    pub at: Range<usize>,
    pub name: String,
}

/// The project modules the file at `path` (its text `text`) loads at run time. `resolve` finds
/// the file of an absolute module name as the file's imports do.
pub fn loads(path: &Path, text: &str, resolve: &dyn Fn(&[&str]) -> Option<PathBuf>) -> Vec<Load> {
    let mut out = vec![];
    if text.contains("import_module(") || text.contains("__import__(") {
        by_name(text, resolve, &mut out);
    }
    for m in BY_PATH.find_iter(text).take(8) {
        by_path(path, text, m.range(), &mut out);
    }
    out
}

fn by_name(text: &str, resolve: &dyn Fn(&[&str]) -> Option<PathBuf>, out: &mut Vec<Load>) {
    for c in BY_NAME.captures_iter(text) {
        let at = c.get(0).map_or(0..0, |m| m.range());
        let literal = &c[1];
        let whole = matches!(c[2].trim_start_matches(['"', '\'']).trim(), "," | ")");
        if whole {
            let segments: Vec<&str> = literal.split('.').filter(|s| !s.is_empty()).collect();
            if literal.starts_with('.') || segments.is_empty() {
                continue;
            }
            if let Some(file) = resolve(&segments) {
                out.push(Load {
                    file,
                    at,
                    name: literal.to_string(),
                });
            }
            continue;
        }
        // A package and a module chosen at run time: `models.` before the name.
        let Some(package) = literal.strip_suffix('.') else {
            continue;
        };
        let segments: Vec<&str> = package.split('.').filter(|s| !s.is_empty()).collect();
        if package.starts_with('.') || segments.is_empty() {
            continue;
        }
        let Some(init) = resolve(&segments).filter(|f| is_init(f)) else {
            continue;
        };
        let Some(folder) = init.parent() else {
            continue;
        };
        for file in folder_modules(folder) {
            out.push(Load {
                file,
                at: at.clone(),
                name: package.to_string(),
            });
        }
    }
}

/// Lines before a load by path that may name its folder (the path built in the function).
const LINES_BEFORE: usize = 15;

/// The modules a file may load by path (the call at `at`): the `.py` files of each folder named
/// in a string literal of the lines around the call, beside the file or up to two folders above
/// it (`Path(__file__).parent.parent / "configs"`), and the `.py` files named there.
fn by_path(path: &Path, text: &str, at: Range<usize>, out: &mut Vec<Load>) {
    let start = text[..at.start]
        .rmatch_indices('\n')
        .nth(LINES_BEFORE)
        .map_or(0, |(i, _)| i + 1);
    let end = text[at.end..]
        .match_indices('\n')
        .nth(2)
        .map_or(text.len(), |(i, _)| at.end + i);
    let window = &text[start..end];
    let Some(dir) = path.parent() else {
        return;
    };
    // The file's folder and the two above it, taken lexically (as the file's imports are).
    let mut bases = vec![dir.to_path_buf()];
    let mut up = dir.to_path_buf();
    for _ in 0..2 {
        if up.as_os_str().is_empty() || up == Path::new(".") || !up.pop() {
            break;
        }
        bases.push(up.clone());
    }
    let mut folders: Vec<PathBuf> = vec![];
    let mut tried = std::collections::HashSet::new();
    for c in PATH_LITERAL.captures_iter(window) {
        let name = c.get(1).map_or("", |m| m.as_str());
        if !tried.insert(name) {
            continue;
        }
        for base in &bases {
            let target = name.split('/').fold(base.clone(), |p, s| p.join(s));
            if name.ends_with(".py") {
                if tree::is_file(&target) && target != path {
                    push(out, target, &at, name);
                }
            } else if target.is_dir() && !folders.contains(&target) {
                folders.push(target);
            }
        }
        if folders.len() >= 8 {
            break;
        }
    }
    for folder in folders {
        let shown = folder.to_string_lossy().into_owned();
        for file in folder_modules(&folder) {
            if file != path {
                push(out, file, &at, &shown);
            }
        }
    }
}

fn push(out: &mut Vec<Load>, file: PathBuf, at: &Range<usize>, name: &str) {
    if !out.iter().any(|l| l.file == file) {
        out.push(Load {
            file,
            at: at.clone(),
            name: name.to_string(),
        });
    }
}

/// The modules directly in `folder` (not its subfolders), `__init__.py` left out, at most
/// [`MAX_PER_FOLDER`]; none for a folder holding more (a package of the project, not a folder
/// of configs or a registry of models).
fn folder_modules(folder: &Path) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = tree::listing(folder, false)
        .iter()
        .filter(|f| !is_init(f))
        .cloned()
        .collect();
    if files.len() > MAX_PER_FOLDER {
        return vec![];
    }
    files
}
