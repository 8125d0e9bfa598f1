//! Programs found on disk: which files are entry scripts, and the packages library modules belong
//! to (which entry script imports a module is `imports::entry_importing`). Read as text, each
//! file once per run (a file's facts are kept with its modification time; the folders listed are
//! forgotten at the start of each run, so `migrate --watch` sees new files).
//!
//! An entry script runs as a program: an `if __name__ == "__main__":` block at column 0, a
//! package's `__main__.py`, or a loose script (no `__init__.py` beside it) with a call statement
//! at column 0 (`main()`). A module of a package that calls something at module level is not
//! one: a registration call is no program. A script kept inside a package folder is one where
//! it puts a folder on `sys.path` at column 0 (`sys.path.insert(0, project_root)`: what `python
//! pkg/benchmark.py` needs to import the project, and no module imported through its package
//! does) and runs something at column 0 besides (a call, a `for` or `while` loop). Tests are never
//! entries: `conftest.py`, and a module named `test_*.py` or `*_test.py` that imports pytest or
//! unittest or defines tests with no `__main__` block. A script that only bears a test's name
//! (`test_simple.py` running a model on images from its `__main__` block, or a loose one with
//! calls at column 0 and no tests) is one (set Z: two such scripts ran on the CPU unreported). A library module no entry script of its tree imports belongs to its package:
//! the top package directory above it (or its folder, for a loose module).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

use crate::port::texts::{Stamp, stamp};

/// An `if __name__ == "__main__":` block at column 0 (either way round).
static MAIN_GUARD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?m)^if\s+\(?\s*(?:__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__)"#,
    )
    .unwrap()
});

/// A call statement at column 0 (`main()`, `fire.Fire(train)`).
static TOP_CALL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^[A-Za-z_][\w.]*\(").unwrap());

/// A `sys.path` edit at column 0 (`sys.path.insert(0, root)`, `sys.path.append(...)`).
static SYS_PATH_EDIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^sys\.path\.(?:insert|append|extend)\(").unwrap());

/// A `print(` call at column 0.
static TOP_PRINT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^print\(").unwrap());

/// A Modal app's entry point: `@app.local_entrypoint()` at column 0.
static LOCAL_ENTRY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^@[\w.]+\.local_entrypoint\b").unwrap());

/// A loop at column 0.
static TOP_LOOP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^(?:for|while)\s").unwrap());

/// Keywords that can open a line the way a call does (`print(` is a call; `assert(` is not).
const KEYWORDS: [&str; 8] = [
    "assert", "del", "elif", "if", "not", "return", "while", "yield",
];

/// The names of scripts kept in a package (`pkg/train.py`, `pkg/eval_robustness.py`).
const SCRIPT_NAMES: [&str; 11] = [
    "train",
    "pred",
    "predict",
    "infer",
    "inference",
    "eval",
    "evaluate",
    "demo",
    "finetune",
    "benchmark",
    "main",
];

/// How many files a tree may hold for its entry scripts to be looked for.
const MAX_TREE_FILES: usize = 20_000;

/// Is the file at `path` a test module (`test_*.py`, `*_test.py`, `conftest.py`)?
pub fn is_test(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name.starts_with("test_") || name.ends_with("_test.py") || name == "conftest.py"
}

/// A test framework imported at column 0, or a test defined there.
static TEST_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?:import\s+(?:pytest|unittest)\b|from\s+(?:pytest|unittest)\b|def\s+test_|class\s+Test)").unwrap()
});

/// Does this text, of a module named as a test, read as a test (see the module doc)?
fn test_text(path: &Path, text: &str) -> bool {
    let name = path.file_name().unwrap_or_default();
    name == "conftest.py"
        || TEST_TEXT.find_iter(text).any(|m| {
            let s = m.as_str();
            s.starts_with("import") || s.starts_with("from") || !MAIN_GUARD.is_match(text)
        })
}

/// Does the file at `path`, with this text, run as a program (see the module doc)?
pub fn is_entry(path: &Path, text: &str) -> bool {
    if is_test(path) && test_text(path, text) {
        return false;
    }
    if text.contains("__main__") && MAIN_GUARD.is_match(text) {
        return true;
    }
    let name = path.file_name().unwrap_or_default();
    // A Modal app's entry point (`modal run train.py` calls it; set AD).
    if name == "__main__.py" || text.contains("local_entrypoint") && LOCAL_ENTRY.is_match(text) {
        return true;
    }
    let loose = path
        .parent()
        .is_none_or(|d| !is_file(&d.join("__init__.py")));
    let mut calls = TOP_CALL
        .find_iter(text)
        .map(|m| m.as_str().trim_end_matches('('))
        .filter(|word| !KEYWORDS.contains(word));
    if loose {
        return calls.next().is_some();
    }
    // A module of a package run as `python -m pkg.train`: it prints at column 0 (a module
    // imported for its names does not), or it bears a script's name and calls something at
    // column 0 (set AC: `hypercaptcha/train.py` and `pred.py` ran a training and a prediction
    // at module level, on a TPU VM's CPU, unreported).
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let script_name = SCRIPT_NAMES
        .iter()
        .any(|n| stem == *n || stem.strip_prefix(n).is_some_and(|r| r.starts_with('_')));
    if (text.contains("print(") && TOP_PRINT.is_match(text))
        || (script_name && calls.next().is_some())
    {
        return true;
    }
    text.contains("sys.path")
        && SYS_PATH_EDIT.is_match(text)
        && (calls.any(|w| !w.starts_with("sys.path.")) || TOP_LOOP.is_match(text))
}

/// Does this file exist (asked once per path and run: many files import the same modules)?
pub fn is_file(path: &Path) -> bool {
    crate::port::neighbours::is_file(path)
}

/// Facts kept about files, by path, with the stamp they were read at.
pub type Kept<T> = LazyLock<Mutex<HashMap<PathBuf, (Stamp, T)>>>;

/// What `learn` says of the text of the file at `path`, kept while the file is unchanged; None
/// where it cannot be read.
pub fn fact<T: Clone>(kept: &Kept<T>, path: &Path, learn: impl FnOnce(&str) -> T) -> Option<T> {
    let now = stamp(path);
    if let Some((at, known)) = kept.lock().ok().and_then(|k| k.get(path).cloned())
        && at == now
    {
        return Some(known);
    }
    let text = crate::port::texts::text_at(path, now)?;
    let found = learn(&text);
    if let Ok(mut k) = kept.lock() {
        k.insert(path.to_path_buf(), (now, found.clone()));
    }
    Some(found)
}

/// The top package directory above the file (the highest folder of a chain that holds
/// `__init__.py`), or None for a loose module.
fn top_package(path: &Path) -> Option<PathBuf> {
    top_package_from(path.parent())
}

/// [`top_package`] of a module in `folder`.
fn top_package_from(folder: Option<&Path>) -> Option<PathBuf> {
    let mut top = None;
    let mut dir = folder;
    while let Some(d) = dir {
        if !is_file(&d.join("__init__.py")) {
            break;
        }
        top = Some(d.to_path_buf());
        dir = d.parent();
    }
    top
}

/// Where a library module belongs when no entry script imports it: its top package (or its
/// folder) and that folder's name.
pub fn package_of(path: &Path) -> (PathBuf, String) {
    let dir = top_package(path)
        .or_else(|| path.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (dir, name)
}

/// Folder (and whether it is walked into) → its `.py` files, for the folders already listed.
type Listing = LazyLock<Mutex<HashMap<(PathBuf, bool), Arc<Vec<PathBuf>>>>>;
static LISTED: Listing = LazyLock::new(Default::default);

/// The `.py` files of the module's package (all below its folder) or, for a loose module, of its
/// folder, sorted.
pub fn package_files(path: &Path) -> Arc<Vec<PathBuf>> {
    let nested = top_package(path).is_some();
    listing(&package_of(path).0, nested)
}

/// `f` of each item, in order, on as many OS threads as the machine has cores: for reading a
/// whole tree while a lock is held (the other threads of the run wait for that one reading).
/// Plain scoped threads, not rayon's: a rayon worker waiting for its jobs may take another
/// file's job, which could ask for the same lock.
pub fn side_by_side<I: Sync, T: Send>(items: &[I], f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || items.len() < 64 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let f = &f;
        let mut parts = items.chunks(chunk);
        let first = parts.next().unwrap_or_default();
        let helpers: Vec<_> = parts
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<T>>()))
            .collect();
        let mut out: Vec<T> = first.iter().map(f).collect();
        for h in helpers {
            match h.join() {
                Ok(part) => out.extend(part),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out
    })
}

/// Package folder → the file a pass picked in it, for the packages asked about in a run (the
/// pass clears it at the run's start).
pub type PackagePicks = LazyLock<Mutex<HashMap<PathBuf, Option<PathBuf>>>>;

/// The first file (in path order) of the package around `path` that `pick` accepts, asked once
/// per package and kept in `picks`.
pub fn first_in_package(
    picks: &PackagePicks,
    path: &Path,
    pick: impl Fn(&Path) -> bool,
) -> Option<PathBuf> {
    let (package, _) = package_of(path);
    if let Some(known) = picks.lock().ok().and_then(|m| m.get(&package).cloned()) {
        return known;
    }
    let found = package_files(path).iter().find(|f| pick(f)).cloned();
    if let Ok(mut m) = picks.lock() {
        m.insert(package, found.clone());
    }
    found
}

/// The folders a run was given (`tpuport migrate .`): each holds one project for what is true
/// of a project as a whole.
static RUN_ROOTS: LazyLock<Mutex<Vec<PathBuf>>> = LazyLock::new(Default::default);

/// Remember the folders among a run's paths (the driver, at the start of a run).
pub fn set_run_roots(paths: &[PathBuf]) {
    let dirs = paths
        .iter()
        .filter(|p| p.is_dir())
        .filter_map(|p| std::path::absolute(p).ok())
        .collect();
    if let Ok(mut r) = RUN_ROOTS.lock() {
        *r = dirs;
    }
}

/// The folder a module's project spans, for what is true of the project as a whole (it runs on
/// Apple silicon, it imports torchtext, it runs an old torch), walked into: the folder the run
/// was given that holds the module (`tpuport migrate .` in a checkout), else the folder above
/// its top package, or a loose module's own folder (set S: a root script beside `src/`, whose device helper picks "mps"; set U: scripts
/// in `pos_histograms/create_dic_for_histograms/` of a project whose root module loads pickled
/// models).
pub fn project_of(path: &Path) -> PathBuf {
    project_of_folder(path.parent())
}

/// [`project_of`] a module in `folder`.
fn project_of_folder(folder: Option<&Path>) -> PathBuf {
    let dir = match top_package_from(folder) {
        Some(top) => top.parent().map(Path::to_path_buf),
        None => folder.map(Path::to_path_buf),
    }
    .unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        dir
    };
    let Ok(abs) = std::path::absolute(&dir) else {
        return dir;
    };
    let given = RUN_ROOTS.lock().ok().and_then(|roots| {
        roots
            .iter()
            .filter(|r| abs.starts_with(r))
            .min_by_key(|r| r.components().count())
            .cloned()
    });
    match given {
        Some(root) if dir.is_relative() => {
            // Keep a relative spelling for a relative path (what the findings show).
            let cwd = std::env::current_dir().ok();
            match cwd.as_deref().and_then(|c| root.strip_prefix(c).ok()) {
                Some(rel) if rel.as_os_str().is_empty() => PathBuf::from("."),
                Some(rel) => rel.to_path_buf(),
                None => root,
            }
        }
        Some(root) => root,
        None => dir,
    }
}

/// The `.py` files of the project around `path` ([`project_of`]), sorted.
pub fn project_files(path: &Path) -> Arc<Vec<PathBuf>> {
    listing(&project_of(path), true)
}

pub(super) fn listing(dir: &Path, nested: bool) -> Arc<Vec<PathBuf>> {
    let key = (dir.to_path_buf(), nested);
    if let Some(known) = LISTED.lock().ok().and_then(|l| l.get(&key).cloned()) {
        return known;
    }
    let mut files = vec![];
    python_files(dir, nested, &mut files);
    files.sort();
    let files = Arc::new(files);
    if let Ok(mut l) = LISTED.lock() {
        l.insert(key, files.clone());
    }
    files
}

/// The `.py` files under `dir` (into subfolders when `nested`), hidden folders and caches left
/// out, at most [`MAX_TREE_FILES`].
fn python_files(dir: &Path, nested: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if out.len() >= MAX_TREE_FILES {
            return;
        }
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "__pycache__" || name == "node_modules" {
            continue;
        }
        match e.file_type() {
            Ok(t) if t.is_dir() && nested => python_files(&p, true, out),
            Ok(t) if t.is_file() && name.ends_with(".py") => out.push(p),
            _ => {}
        }
    }
}

/// Folder of an importing file → the `src` folders of its project that hold packages.
static SRC_ROOTS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> =
    LazyLock::new(Default::default);
/// Project folder ([`project_of`]) → the same.
static PROJECT_SRC_ROOTS: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<PathBuf>>>>> =
    LazyLock::new(Default::default);

/// The `src` folders of the project of a file in `dir` ([`project_of`]) that hold packages: a
/// folder named `src`, not itself a package, with a package in it (`pip install -e .` of a src
/// layout, a uv workspace member under `packages/<name>/src/`; set AC: a root `train.py`
/// importing `spectralquadnet` from `src/spectralquadnet/`).
pub fn src_roots(dir: &Path) -> Arc<Vec<PathBuf>> {
    if let Some(known) = SRC_ROOTS.lock().ok().and_then(|k| k.get(dir).cloned()) {
        return known;
    }
    // Every folder of a project has its roots: they are found once per project.
    let project = project_of_folder(Some(dir));
    let found = PROJECT_SRC_ROOTS
        .lock()
        .ok()
        .and_then(|k| k.get(&project).cloned());
    let roots = found.unwrap_or_else(|| {
        let roots = Arc::new(src_roots_of(&project));
        if let Ok(mut k) = PROJECT_SRC_ROOTS.lock() {
            k.insert(project, roots.clone());
        }
        roots
    });
    if let Ok(mut k) = SRC_ROOTS.lock() {
        k.insert(dir.to_path_buf(), roots.clone());
    }
    roots
}

/// [`src_roots`] of the project folder `project`.
fn src_roots_of(project: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = vec![];
    for f in listing(project, true).iter() {
        if f.file_name().is_none_or(|n| n != "__init__.py") {
            continue;
        }
        let Some(root) = f.parent().and_then(Path::parent) else {
            continue;
        };
        if root.file_name().is_some_and(|n| n == "src")
            && !roots.iter().any(|r| r == root)
            && !is_file(&root.join("__init__.py"))
        {
            roots.push(root.to_path_buf());
        }
    }
    roots
}

/// Which entry scripts can import the module: those of the folder above its top package (and
/// below it), or, for a loose module, those beside it.
pub(super) fn tree_of(path: &Path) -> Option<(PathBuf, bool)> {
    match top_package(path) {
        Some(top) => Some((top.parent()?.to_path_buf(), true)),
        None => Some((path.parent()?.to_path_buf(), false)),
    }
}

/// Does the file at `path` run as a program ([`is_entry`] of its text, kept)?
static ENTRIES: Kept<bool> = LazyLock::new(Default::default);

pub fn entry_on_disk(path: &Path) -> bool {
    fact(&ENTRIES, path, |t| is_entry(path, t)).unwrap_or(false)
}

/// Does the file at `path` mention CUDA (`"cuda"`, `.cuda()`, `torch.cuda`: kept)?
static CUDA: Kept<bool> = LazyLock::new(Default::default);

pub fn cuda_on_disk(path: &Path) -> bool {
    fact(&CUDA, path, |t| t.contains("cuda")).unwrap_or(false)
}

/// [`entry_on_disk`] for each of a run's files, side by side, before the files are migrated:
/// the first module that asks which entry script imports it
/// ([`super::imports::entry_importing`]) would otherwise read them all alone, holding up every
/// thread that asks the same.
pub fn read_entries(files: &[PathBuf]) {
    use rayon::prelude::*;
    files.par_iter().for_each(|p| {
        entry_on_disk(p);
    });
}

/// Forget the folders listed (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut l) = LISTED.lock() {
        l.clear();
    }
    if let Ok(mut r) = SRC_ROOTS.lock() {
        r.clear();
    }
    if let Ok(mut r) = PROJECT_SRC_ROOTS.lock() {
        r.clear();
    }
}

/// `path` for messages: relative to `base` when it is under it, else to the folder its
/// entry scripts are looked for in (above its top package).
pub fn shown(path: &Path, base: &Path) -> String {
    let root = tree_of(path).map(|(r, _)| r);
    path.strip_prefix(base)
        .or_else(|e| root.as_deref().map_or(Err(e), |r| path.strip_prefix(r)))
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::test_support::write;

    #[test]
    fn a_project_is_the_folder_the_run_was_given() {
        let d = tempfile::tempdir().unwrap();
        let root = std::path::absolute(d.path()).unwrap();
        let script = write(&root, "tools/stats/count.py", "");
        write(&root, "pkg/__init__.py", "");
        let module = write(&root, "pkg/models.py", "");
        // Alone: a loose script's folder, a package's parent folder.
        assert_eq!(project_of(&script), root.join("tools/stats"));
        assert_eq!(project_of(&module), root);
        // In a run given the checkout, the checkout (set U).
        set_run_roots(std::slice::from_ref(&root));
        assert_eq!(project_of(&script), root);
        set_run_roots(&[]);
    }

    #[test]
    fn entry_scripts_run_as_programs_and_tests_do_not() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(root, "pkg/__init__.py", "");
        let guard = "import torch\n\nif __name__ == \"__main__\":\n    main()\n";
        let call = "import torch\n\ndef main():\n    pass\n\nmain()\n";
        assert!(is_entry(&root.join("train.py"), guard));
        assert!(is_entry(&root.join("train.py"), call));
        assert!(is_entry(&root.join("pkg/cli.py"), guard));
        // A package's module calling something at module level registers; it runs no program.
        assert!(!is_entry(&root.join("pkg/models.py"), call));
        assert!(is_entry(&root.join("pkg/__main__.py"), call));
        // A package's script run with `python -m pkg.train` (set AC), a module that prints at
        // column 0, and a Modal app's entry point (set AD) are programs.
        assert!(is_entry(&root.join("pkg/train.py"), call));
        assert!(is_entry(&root.join("pkg/eval_robustness.py"), call));
        assert!(!is_entry(&root.join("pkg/trainer.py"), call));
        assert!(is_entry(&root.join("pkg/models.py"), "x = f()\nprint(x)\n"));
        let modal = "import modal\napp = modal.App(\"a\")\n\n@app.local_entrypoint()\ndef main():\n    pass\n";
        assert!(is_entry(&root.join("pkg/models.py"), modal));
        // A script kept in a package folder puts the project on sys.path and runs code.
        let script = "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))\n\nimport torch\nfor _ in range(3):\n    torch.randn(2)\n";
        assert!(is_entry(&root.join("pkg/benchmark.py"), script));
        let vendored =
            "import os, sys\nsys.path.append(os.path.dirname(__file__))\n\ndef f():\n    pass\n";
        assert!(!is_entry(&root.join("pkg/vendor.py"), vendored));
        for test in ["test_train.py", "train_test.py", "conftest.py"] {
            let unit = format!("import unittest\n{guard}");
            assert!(!is_entry(&root.join(test), &unit), "{test}");
            let pytest = "import torch\n\ndef test_f():\n    assert torch.ones(1)\n\nprint(1)\n";
            assert!(!is_entry(&root.join(test), pytest), "{test}");
        }
        assert!(!is_entry(&root.join("conftest.py"), guard));
        // A script that only bears a test's name runs as one.
        let script = "import torch\n\ndef test_simple(args):\n    pass\n\nif __name__ == '__main__':\n    test_simple(None)\n";
        assert!(is_entry(&root.join("test_simple.py"), script));
        assert!(is_entry(&root.join("test_real.py"), call));
        // Neither a definition nor a keyword is a call statement.
        assert!(!is_entry(
            &root.join("lib.py"),
            "class A(object):\n    pass\nassert(True)\nif(x):\n    pass\n"
        ));
    }

    #[test]
    fn library_modules_belong_to_their_package_unless_an_entry_imports_them() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(root, "pkg/__init__.py", "from .models import resnet\n");
        write(root, "pkg/models/__init__.py", "");
        let resnet = write(
            root,
            "pkg/models/resnet.py",
            "import torch\nfrom . import blocks\n",
        );
        let blocks = write(root, "pkg/models/blocks.py", "import torch\n");
        let alone = write(root, "pkg/other.py", "import torch\n");
        let train = write(
            root,
            "scripts/train.py",
            "import torch\nfrom pkg import (\n    models,\n)\nimport pkg\n\nif __name__ == \"__main__\":\n    main()\n",
        );
        write(
            root,
            "tests/test_x.py",
            "import unittest\nfrom pkg import other\nif __name__ == '__main__':\n    unittest.main()\n",
        );
        assert_eq!(
            super::super::imports::entry_importing(&resnet),
            Some(train.clone())
        );
        assert_eq!(super::super::imports::entry_importing(&blocks), Some(train));
        // A test is not an entry: what only it imports belongs to its package.
        assert_eq!(super::super::imports::entry_importing(&alone), None);
        let (dir, name) = package_of(&alone);
        assert_eq!((dir, name.as_str()), (root.join("pkg"), "pkg"));
        assert_eq!(package_files(&alone).len(), 5);
    }
}
