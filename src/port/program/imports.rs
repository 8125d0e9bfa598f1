//! The project modules a file imports: its top-level `import` and `from ... import` statements
//! (column 0: not under `try`/`if`, not in a function), or, where asked ([`Depth::Anywhere`]),
//! those at any indentation too (a CLI that imports its commands' modules inside functions),
//! resolved on disk to a module beside the
//! file (as `python script.py` finds it) or in a package of its tree, or, for a file that edits
//! `sys.path`, in a folder beside it that the file names in a string (`"src"`, `".."`). The one
//! import follower of the program model: PRG001's judgement over a run's files, and the program lints (PERF001,
//! PRC008, the weight ties of DEV018) that read the other files of a program from disk; and
//! which entry script of a tree imports a module ([`entry_importing`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

use super::layout::{self, is_init, module_file};
use super::tree;

/// A top-level import: `from .x.y import a, b` (names to the end of the line, or of the
/// parentheses) or `import a.b, c as d`, at the start of the text it is given: each line
/// that opens with `from` or `import` is tried ([`statements`]).
static IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\A(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([\w., \t]+))",
    )
    .unwrap()
});

/// The same at any indentation (in a function, under `try` or `if`).
static IMPORT_ANYWHERE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\A[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([\w., \t]+))",
    )
    .unwrap()
});

/// The import statements of `text` the depth reads, each with the byte offset of its line:
/// the matches a multi-line search for the pattern at each line start would give, found by
/// trying only the lines that open with `from` or `import` (a search over the whole text has
/// no literal to skip ahead with, and most lines are not imports).
fn statements(text: &str, depth: Depth) -> Vec<(usize, regex::Captures<'_>)> {
    let re = match depth {
        Depth::TopLevel => &IMPORT,
        Depth::Anywhere => &IMPORT_ANYWHERE,
    };
    let mut out = vec![];
    // Where the last statement ended: a parenthesised list's lines are not tried again.
    let mut done = 0;
    let mut start = 0;
    while start < text.len() {
        let end = text[start..].find('\n').map_or(text.len(), |n| start + n);
        let line = &text[start..end];
        let opening = match depth {
            Depth::TopLevel => line,
            Depth::Anywhere => line.trim_start_matches([' ', '\t']),
        };
        if start >= done
            && (opening.starts_with("from") || opening.starts_with("import"))
            && let Some(c) = re.captures(&text[start..])
        {
            done = start + c.get(0).map_or(0, |m| m.end());
            out.push((start, c));
        }
        start = end + 1;
    }
    out
}

/// Which import statements are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Depth {
    /// Column 0 only: what importing the module runs.
    TopLevel,
    /// At any indentation too: what the module may run (lazy imports in functions).
    Anywhere,
}

/// How many modules a program may hold (a guard against following a whole framework).
pub const MAX_MODULES: usize = 400;

/// One project module a file imports: its file, the byte range of the import statement, and
/// the module's dotted name as written there (`.util`, `pkg.models.seg`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Import {
    pub file: PathBuf,
    pub at: Range<usize>,
    pub name: String,
}

/// The project modules the file at `path` (its text `text`) imports at top level, each once, in
/// the order written, with the packages' `__init__.py` files Python runs on the way (`from
/// pkg.sub import mod` runs `pkg/__init__.py` and `pkg/sub/__init__.py`, then reads the
/// submodule `mod` where there is one).
pub fn project_imports(path: &Path, text: &str) -> Vec<Import> {
    imports_at(path, text, Depth::TopLevel)
}

/// (File, depth, length and hash of the text read) → its imports, for the texts already read
/// this run: PRG001's judgement, the program lints and the library checks ask again for the
/// same modules (1,200 asks for 670 texts on transformers). Forgotten at a run's start, where
/// the files on disk that resolve an import may have changed.
type Read = LazyLock<Mutex<rustc_hash::FxHashMap<(PathBuf, Depth, usize, u64), Arc<Vec<Import>>>>>;
static READ: Read = LazyLock::new(Default::default);

/// [`project_imports`], reading the statements `depth` says.
pub fn imports_at(path: &Path, text: &str, depth: Depth) -> Vec<Import> {
    let (length, hash) = crate::port::texts::fingerprint(text);
    let key = (path.to_path_buf(), depth, length, hash);
    if let Some(known) = READ.lock().ok().and_then(|r| r.get(&key).cloned()) {
        return known.to_vec();
    }
    let found = read_imports(path, text, depth);
    if let Ok(mut r) = READ.lock() {
        r.insert(key, Arc::new(found.clone()));
    }
    found
}

/// [`imports_at`], read from the text.
fn read_imports(path: &Path, text: &str, depth: Depth) -> Vec<Import> {
    let roots = layout::path_folders(path, text);
    let resolve = |path: &Path, level: usize, segments: &[&str]| {
        resolve(path, level, segments).or_else(|| {
            (level == 0)
                .then(|| roots.iter().find_map(|r| module_file(r, segments)))
                .flatten()
        })
    };
    // Importing `pkg.sub.mod` runs `pkg/__init__.py`, `pkg/sub/__init__.py` and the module
    // itself, in that order (set Y: a package whose `__init__.py` imports every backbone, one
    // of which imports CuPy at load): each with its dotted name.
    let chain = |level: usize, segments: &[&str]| -> Vec<(Option<PathBuf>, String)> {
        let dots = ".".repeat(level);
        // `from . import x` names no module: the package it is in.
        (segments.len().min(1)..=segments.len())
            .map(|k| {
                let file = resolve(path, level, &segments[..k])
                    .filter(|f| k == segments.len() || is_init(f));
                (file, format!("{dots}{}", segments[..k].join(".")))
            })
            .collect()
    };
    let mut out: Vec<Import> = vec![];
    // Compared as bytes: a `Path`'s `==` walks both paths component by component (a package's
    // `__init__.py` may import hundreds of modules). The paths all come from `resolve`, so the
    // same file is always spelled the same way.
    let mut seen: HashSet<std::ffi::OsString> = HashSet::from([path.as_os_str().to_owned()]);
    let mut add = |file: Option<PathBuf>, at: &Range<usize>, name: String| {
        if let Some(file) = file
            && seen.insert(file.as_os_str().to_owned())
        {
            out.push(Import {
                file,
                at: at.clone(),
                name,
            });
        }
    };
    for (offset, m) in statements(text, depth) {
        let at = m
            .get(0)
            .map_or(0..0, |g| offset + g.start()..offset + g.end());
        if let Some(module) = m.get(2) {
            let level = m.get(1).map_or(0, |g| g.as_str().len());
            let segments: Vec<&str> = module
                .as_str()
                .split('.')
                .filter(|s| !s.is_empty())
                .collect();
            let names = m.get(3).map_or("", |g| g.as_str());
            // The packages and the module, then the submodules the statement names.
            let mut packages = chain(level, &segments);
            let (module, dotted) = packages.pop().unwrap_or_default();
            for (file, name) in packages {
                add(file, &at, name);
            }
            let init = module.as_deref().is_some_and(is_init);
            add(module.clone(), &at, dotted.clone());
            for name in names
                .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
                .split(',')
                .filter_map(|n| n.split_whitespace().next())
                .filter(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'))
            {
                let mut sub = segments.clone();
                sub.push(name);
                if let Some(f) = resolve(path, level, &sub) {
                    let dots = ".".repeat(level);
                    add(Some(f), &at, format!("{dots}{}", sub.join(".")));
                }
            }
            // Names a package re-exports from its submodules (`from .encoder import
            // create_encoder` in its `__init__.py`): the submodule that defines them, where
            // everything a module may run is asked for.
            if let (true, Depth::Anywhere, Some(package)) = (init, depth, module.as_ref()) {
                let wanted: Vec<&str> = names
                    .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
                    .split(',')
                    .filter_map(|n| n.split_whitespace().next())
                    .collect();
                let exported = reexports(package);
                for file in wanted.iter().filter_map(|w| exported.get(*w)) {
                    add(Some(file.clone()), &at, dotted.clone());
                }
            }
        } else if let Some(list) = m.get(4) {
            for item in list.as_str().split(',') {
                let Some(module) = item.split_whitespace().next() else {
                    continue;
                };
                let segments: Vec<&str> = module.split('.').filter(|s| !s.is_empty()).collect();
                for (file, name) in chain(0, &segments) {
                    add(file, &at, name);
                }
            }
        }
    }
    // What the file loads at run time (`import_module`, a config loaded by path): what it
    // may run.
    if depth == Depth::Anywhere {
        for l in super::dynamic::loads(path, text, &|segments| resolve(path, 0, segments)) {
            add(Some(l.file), &l.at, l.name);
        }
    }
    out
}

/// A relative import in a package's `__init__.py`: `from .x import a, b as c` (or `(...)`).
static RELATIVE_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*from[ \t]+(\.+)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)").unwrap()
});

/// Package `__init__.py` → the names it re-exports from its submodules, with their files.
static REEXPORTS: tree::Kept<Arc<HashMap<String, PathBuf>>> = LazyLock::new(Default::default);

/// The names the package whose `__init__.py` is `init` re-exports from its own submodules
/// (`from .encoder import create_encoder as make`: `make`), each with the submodule's file.
fn reexports(init: &Path) -> Arc<HashMap<String, PathBuf>> {
    tree::fact(&REEXPORTS, init, |text| {
        let mut out = HashMap::new();
        for c in RELATIVE_IMPORT.captures_iter(text) {
            let level = c[1].len();
            let segments: Vec<&str> = c[2].split('.').filter(|s| !s.is_empty()).collect();
            if segments.is_empty() {
                continue;
            }
            let Some(file) = resolve(init, level, &segments) else {
                continue;
            };
            for item in c[3]
                .trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace())
                .split(',')
            {
                let words: Vec<&str> = item.split_whitespace().collect();
                let name = match words.as_slice() {
                    [_, "as", alias] => alias,
                    [name, ..] => name,
                    [] => continue,
                };
                out.entry(name.to_string()).or_insert_with(|| file.clone());
            }
        }
        Arc::new(out)
    })
    .unwrap_or_default()
}

/// The file of module `segments` (`level` leading dots) imported by the file at `path`: beside
/// it, or in the packages of its tree. An absolute import names a top-level package: one in a
/// folder above the file that is not itself a package (`import torch` in a module of `norse` is
/// torch, not the subpackage `norse/torch/`).
fn resolve(path: &Path, level: usize, segments: &[&str]) -> Option<PathBuf> {
    if level > 0 {
        return crate::port::neighbours::module_in_tree(path, level, segments);
    }
    let first = *segments.first()?;
    let dir = path.parent()?;
    if let Some(file) = module_file(dir, segments) {
        return Some(file);
    }
    let root = dir.ancestors().take(12).find(|a| {
        tree::is_file(&a.join(first).join("__init__.py")) && !tree::is_file(&a.join("__init__.py"))
    });
    match root {
        Some(root) => module_file(root, segments),
        // A package the project installs from a `src` folder (`pip install -e .` of a src
        // layout, a uv workspace member under `packages/<name>/src/`): set AC's `train.py`
        // importing `spectralquadnet` from `src/spectralquadnet/`.
        None if let Some(file) = layout::installed(dir, first, segments) => Some(file),
        // A namespace package (a folder without `__init__.py`) above the file, reached the way
        // `tools/train.py` reaches `lib/core/function.py` after `import _init_paths` puts the
        // project's root on sys.path: only a dotted name whose file is there.
        None if segments.len() > 1 => dir
            .ancestors()
            .take(12)
            .filter(|a| !tree::is_file(&a.join(first).join("__init__.py")))
            .find_map(|a| module_file(a, segments))
            .or_else(|| layout::sibling_package(dir, first, segments)),
        None => None,
    }
}

/// One module of a program: its file, the range of the entry script's import statement that
/// reaches it, and how many imports away from the entry script it is (1: imported by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub file: PathBuf,
    pub via: Range<usize>,
    pub hops: usize,
}

/// The project modules the file at `path` (its text `text`) reaches through top-level imports,
/// breadth first, at most `max_hops` imports away (and at most [`MAX_MODULES`]). `imports_of`
/// gives the imports of another module, or None where that module is not to be entered (not
/// among the files judged).
pub fn reachable(
    path: &Path,
    text: &str,
    max_hops: usize,
    depth: Depth,
    imports_of: &dyn Fn(&Path) -> Option<Arc<Vec<PathBuf>>>,
) -> Vec<Member> {
    let (mut seen, mut queue) = first_breadth(path, text, depth);
    let mut out = vec![];
    while let Some(m) = queue.pop_front() {
        if out.len() >= MAX_MODULES {
            break;
        }
        let Some(next) = imports_of(&m.file) else {
            continue;
        };
        visit(m, &next, max_hops, &mut seen, &mut queue, &mut out);
    }
    out
}

/// [`reachable`] for many entry scripts at once (`entries`: path and text), each with the same
/// members in the same order as alone: the walks go breadth by breadth together, and the
/// modules their next breadths hold are read once, side by side (rayon). For [`super::judge`],
/// which runs after every file is done: one large program, or programs sharing their modules,
/// would otherwise keep one core busy alone.
pub fn reachable_together(
    entries: &[(&Path, &str)],
    depth: Depth,
    imports_of: &(dyn Fn(&Path) -> Option<Arc<Vec<PathBuf>>> + Sync),
) -> Vec<Vec<Member>> {
    use rayon::prelude::*;
    struct Walk {
        seen: HashSet<PathBuf>,
        queue: VecDeque<Member>,
        out: Vec<Member>,
    }
    let mut walks: Vec<Walk> = entries
        .par_iter()
        .map(|(path, text)| {
            let (seen, queue) = first_breadth(path, text, depth);
            let out = vec![];
            Walk { seen, queue, out }
        })
        .collect();
    let mut read: HashMap<PathBuf, Option<Arc<Vec<PathBuf>>>> = HashMap::new();
    loop {
        // Each walk's next breadth: at most as many as may still join (the cap is checked
        // before each module, as in [`reachable`]).
        let batches: Vec<Vec<Member>> = walks
            .iter_mut()
            .map(|w| {
                let take = w.queue.len().min(MAX_MODULES.saturating_sub(w.out.len()));
                w.queue.drain(..take).collect()
            })
            .collect();
        if batches.iter().all(|b| b.is_empty()) {
            break;
        }
        let mut wanted: Vec<&PathBuf> = batches
            .iter()
            .flatten()
            .map(|m| &m.file)
            .filter(|f| !read.contains_key(*f))
            .collect();
        wanted.sort();
        wanted.dedup();
        let found: Vec<_> = wanted.par_iter().map(|f| imports_of(f)).collect();
        read.extend(wanted.into_iter().cloned().zip(found));
        for (w, batch) in walks.iter_mut().zip(batches) {
            for m in batch {
                if let Some(Some(next)) = read.get(&m.file) {
                    visit(m, next, usize::MAX, &mut w.seen, &mut w.queue, &mut w.out);
                }
            }
        }
    }
    walks.into_iter().map(|w| w.out).collect()
}

/// A walk's start: the file itself seen, and the project modules it imports queued (one hop).
fn first_breadth(path: &Path, text: &str, depth: Depth) -> (HashSet<PathBuf>, VecDeque<Member>) {
    let mut seen: HashSet<PathBuf> = HashSet::from([path.to_path_buf()]);
    let mut queue: VecDeque<Member> = VecDeque::new();
    for i in imports_at(path, text, depth) {
        if seen.insert(i.file.clone()) {
            queue.push_back(Member {
                file: i.file,
                via: i.at,
                hops: 1,
            });
        }
    }
    (seen, queue)
}

/// Take module `m` (its imports `next`) into the walk: queue what it imports first, then keep it.
fn visit(
    m: Member,
    next: &[PathBuf],
    max_hops: usize,
    seen: &mut HashSet<PathBuf>,
    queue: &mut VecDeque<Member>,
    out: &mut Vec<Member>,
) {
    for f in next.iter().filter(|_| m.hops < max_hops) {
        if seen.insert(f.clone()) {
            queue.push_back(Member {
                file: f.clone(),
                via: m.via.clone(),
                hops: m.hops + 1,
            });
        }
    }
    out.push(m);
}

/// The project modules of the program whose entry script is the file at `path` (its text
/// `text`), read from disk ([`imports_on_disk`]).
pub fn modules_of(path: &Path, text: &str) -> Vec<Member> {
    modules_within(path, text, usize::MAX)
}

/// [`modules_of`], at most `hops` imports away from the file.
pub fn modules_within(path: &Path, text: &str, hops: usize) -> Vec<Member> {
    reachable(path, text, hops, Depth::TopLevel, &imports_on_disk)
}

/// [`modules_within`], through the imports at any indentation (a registry's lazy imports in
/// functions).
pub fn modules_anywhere_within(path: &Path, text: &str, hops: usize) -> Vec<Member> {
    let anywhere = |p: &Path| {
        tree::fact(&ANYWHERE, p, |text| {
            Arc::new(
                imports_at(p, text, Depth::Anywhere)
                    .into_iter()
                    .map(|i| i.file)
                    .collect::<Vec<_>>(),
            )
        })
    };
    reachable(path, text, hops, Depth::Anywhere, &anywhere)
}

/// Module file → the project modules it imports at any indentation (kept: every entry script
/// of a tree walks the same modules).
static ANYWHERE: tree::Kept<Arc<Vec<PathBuf>>> = LazyLock::new(Default::default);

/// The first project module of [`modules_within`] `hops` whose text satisfies `pred` (a file
/// that cannot be read satisfies nothing).
pub fn module_within_that(
    path: &Path,
    text: &str,
    hops: usize,
    pred: &dyn Fn(&str) -> bool,
) -> Option<PathBuf> {
    modules_within(path, text, hops)
        .into_iter()
        .map(|m| m.file)
        .find(|f| crate::port::texts::text(f).is_some_and(|t| pred(&t)))
}

/// Module file → the project modules it imports at top level.
static IMPORTS: tree::Kept<Arc<Vec<PathBuf>>> = LazyLock::new(Default::default);

/// The project modules the file at `path` imports at top level, read from disk.
pub fn imports_on_disk(path: &Path) -> Option<Arc<Vec<PathBuf>>> {
    tree::fact(&IMPORTS, path, |text| {
        Arc::new(
            project_imports(path, text)
                .into_iter()
                .map(|i| i.file)
                .collect(),
        )
    })
}

/// Module file → the first entry script of its tree (in path order) that imports it.
type Importers = HashMap<PathBuf, PathBuf>;

/// Tree root (and whether it is walked into) → its modules' importers, for the trees read.
type Trees = LazyLock<Mutex<HashMap<(PathBuf, bool), Arc<Importers>>>>;
static TREES: Trees = LazyLock::new(Default::default);

/// The entry script of the module's tree that imports it (the first in path order), if any.
pub fn entry_importing(path: &Path) -> Option<PathBuf> {
    importer_in(path, tree::tree_of(path)?)
}

/// The entry script of the module's whole project ([`tree::project_of`]) that imports it: also
/// one that reaches a folder without `__init__.py` from above (`from models import loader`, a
/// namespace package), which [`entry_importing`] does not look for.
pub fn project_entry_importing(path: &Path) -> Option<PathBuf> {
    importer_in(path, (tree::project_of(path), true))
}

fn importer_in(path: &Path, key: (PathBuf, bool)) -> Option<PathBuf> {
    let tree = {
        // Held while the tree is read: the other threads want the same answer.
        let mut trees = TREES.lock().ok()?;
        match trees.get(&key) {
            Some(t) => t.clone(),
            None => {
                let t = Arc::new(importers(&key.0, key.1));
                trees.insert(key, t.clone());
                t
            }
        }
    };
    tree.get(path).cloned()
}

fn importers(root: &Path, nested: bool) -> Importers {
    let mut out: Importers = HashMap::new();
    let listing = tree::listing(root, nested);
    let programs = tree::side_by_side(&listing, |f| {
        if !tree::entry_on_disk(f) {
            return vec![];
        }
        crate::port::texts::text(f).map_or(vec![], |text| modules_of(f, &text))
    });
    for (f, modules) in listing.iter().zip(programs) {
        for m in modules {
            out.entry(m.file).or_insert_with(|| f.clone());
        }
    }
    out
}

/// Forget the trees read (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut t) = TREES.lock() {
        t.clear();
    }
    if let Ok(mut r) = READ.lock() {
        r.clear();
    }
}

#[cfg(test)]
#[path = "imports_tests.rs"]
mod tests;
