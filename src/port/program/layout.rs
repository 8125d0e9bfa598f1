//! Where an absolute import finds a project package that is not above the importing file: a
//! `src` folder of the project (a src layout installed with `pip install -e .`, a workspace
//! member under `packages/<name>/src/`), or a package beside one above the file inside a folder
//! that is a package too (run with that folder on `PYTHONPATH`), or a folder that a file editing
//! `sys.path` names ([`path_folders`]). The import follower
//! ([`super::imports`]) asks here after the usual places.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::tree;

/// The file of module `segments` in a package beside one above the importing file, inside a
/// folder that is a package too (`src/modelling/train.py` importing `core.constants` from
/// `src/core/`, run with `PYTHONPATH=src`; set AD): a dotted name whose module file is there,
/// not a package holding the importing file, and not a name the big libraries own.
pub(super) fn sibling_package(dir: &Path, first: &str, segments: &[&str]) -> Option<PathBuf> {
    if matches!(
        first,
        "torch" | "numpy" | "tensorflow" | "jax" | "transformers"
    ) {
        return None;
    }
    let a = dir
        .ancestors()
        .skip(1)
        .take(12)
        .find(|a| tree::is_file(&a.join(first).join("__init__.py")))?;
    let package = a.join(first);
    if dir.starts_with(&package) {
        return None;
    }
    module_file(a, segments).filter(|f| !is_init(f))
}

/// The file of module `segments` (first segment `first`) in a package of one of the project's
/// `src` folders ([`tree::src_roots`]).
pub(super) fn installed(dir: &Path, first: &str, segments: &[&str]) -> Option<PathBuf> {
    tree::src_roots(dir)
        .iter()
        .filter(|r| tree::is_file(&r.join(first).join("__init__.py")))
        .find_map(|r| module_file(r, segments))
}

/// The file of module `segments` under `dir`: `a/b.py` or `a/b/__init__.py`.
pub(super) fn module_file(dir: &Path, segments: &[&str]) -> Option<PathBuf> {
    let base = segments.iter().fold(dir.to_path_buf(), |p, s| p.join(s));
    [base.with_extension("py"), base.join("__init__.py")]
        .into_iter()
        .find(|f| tree::is_file(f))
}

/// Is this a package's `__init__.py`?
pub(super) fn is_init(f: &Path) -> bool {
    f.file_name().is_some_and(|n| n == "__init__.py")
}

/// A string literal naming a folder (`"src"`, `'lib'`, `".."`).
static FOLDER_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"["']([\w.\-]+(?:/[\w.\-]+)*)["']"#).unwrap());

/// The folders a file that edits `sys.path` may put there, for its absolute imports: each
/// string literal of the file that names a folder beside it (`sys.path.insert(0,
/// str(Path(__file__).parent / "src"))`, `os.path.join(os.path.dirname(__file__), "lib")`,
/// `".."`), tried after the usual places. None for a file that does not mention `sys.path`.
pub(super) fn path_folders(path: &Path, text: &str) -> Vec<PathBuf> {
    if !text.contains("sys.path") {
        return vec![];
    }
    let Some(dir) = path.parent() else {
        return vec![];
    };
    let mut out: Vec<PathBuf> = vec![];
    for m in FOLDER_LITERAL.captures_iter(text) {
        let name = &m[1];
        if name == "." || name.ends_with(".py") {
            continue;
        }
        // `..` taken lexically, so that the module found is the same path as when reached
        // from its own folder.
        let mut folder = dir.to_path_buf();
        for part in name.split('/') {
            match part {
                ".." => {
                    folder.pop();
                }
                "." | "" => {}
                p => folder.push(p),
            }
        }
        if !out.contains(&folder) && folder.is_dir() {
            out.push(folder);
        }
        if out.len() >= 8 {
            break;
        }
    }
    out
}
