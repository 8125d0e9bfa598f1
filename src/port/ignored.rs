//! Project modules that `.gitignore` hides but the project imports. A pattern meant for data or
//! weights (`models/`, `checkpoints/`, `refs/`) also matches a tracked source package of the same
//! name (`src/pkg/models/`); the walk skips it, so the code a program runs there is neither
//! ported nor judged, and the program silently runs half on the TPU (set I: a segmentation
//! wrapper keeping Cellpose on the CPU). The files a migrated file imports from its own tree
//! are taken back, transitively; what the configuration's `exclude` names stays out.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::config::Exclude;
use super::neighbours::{is_file, module_in_tree};

/// An import at any indentation: `from .x import a, b`, `from pkg.x import y`, `import pkg.x`.
static IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t]*)|import[ \t]+([\w.]+))",
    )
    .unwrap()
});

/// At most this many files are taken back (a tree that ignores a whole vendored library).
const CAP: usize = 2000;

/// Is there an ignore file that could have hidden something: in a walked folder or above it?
fn has_ignore_file(roots: &[PathBuf]) -> bool {
    roots.iter().filter(|r| r.is_dir()).any(|r| {
        r.ancestors()
            .any(|a| a.join(".gitignore").is_file() || a.join(".ignore").is_file())
            || walkdir_has_ignore(r)
    })
}

/// A `.gitignore` or `.ignore` anywhere under `root` (hidden folders left out).
fn walkdir_has_ignore(root: &Path) -> bool {
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name == ".gitignore" || name == ".ignore" {
                return true;
            }
            if !name.starts_with('.') && e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    false
}

/// The project files that the module at `path` (its source `text`) imports, at any indentation,
/// each with the module name it is imported as (a name a `from` import takes may be a
/// submodule: `from pkg.models import wrapper`).
pub(crate) fn imports_of(path: &Path, text: &str) -> Vec<(String, PathBuf)> {
    let mut out = vec![];
    for c in IMPORT.captures_iter(text) {
        let (dots, module, names) = match (c.get(2), c.get(4)) {
            (Some(m), _) => (
                c.get(1).map_or(0, |d| d.as_str().len()),
                m.as_str(),
                c.get(3).map_or("", |n| n.as_str()),
            ),
            (None, Some(m)) => (0, m.as_str(), ""),
            _ => continue,
        };
        let mut candidates: Vec<String> = names
            .split(',')
            .filter_map(|n| n.split_whitespace().next())
            .map(|n| {
                if module.is_empty() {
                    n.to_string()
                } else {
                    format!("{module}.{n}")
                }
            })
            .collect();
        candidates.push(module.to_string());
        for m in candidates {
            let segments: Vec<&str> = m.split('.').filter(|s| !s.is_empty()).collect();
            if segments.is_empty() {
                continue;
            }
            let sibling = (dots == 0 && segments.len() == 1)
                .then(|| path.parent().map(|d| d.join(format!("{}.py", segments[0]))))
                .flatten()
                .filter(|p| is_file(p));
            if let Some(file) = module_in_tree(path, dots, &segments).or(sibling) {
                out.push((m.clone(), file));
            }
        }
    }
    out
}

/// The files that `files` (already found) import, transitively, from inside the walked folders
/// `roots`, that the walk did not find (an ignore rule hid them), less what `exclude` names
/// and hidden paths. Sorted.
pub fn imported_but_ignored(
    files: &[PathBuf],
    roots: &[PathBuf],
    exclude: Option<&Exclude>,
) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = roots.iter().filter(|r| r.is_dir()).cloned().collect();
    if dirs.is_empty() || !has_ignore_file(&dirs) {
        return vec![];
    }
    let mut known: HashSet<PathBuf> = files.iter().cloned().collect();
    let mut queue: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "py"))
        .cloned()
        .collect();
    let mut added = vec![];
    while let Some(f) = queue.pop() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (_, m) in imports_of(&f, &text) {
            if known.contains(&m) || added.len() >= CAP {
                continue;
            }
            known.insert(m.clone());
            let inside = dirs.iter().find_map(|d| m.strip_prefix(d).ok());
            let Some(rel) = inside else { continue };
            let hidden = rel
                .components()
                .any(|c| c.as_os_str().to_string_lossy().starts_with('.'));
            // The configuration's `exclude` (the file, or a folder above it) still wins.
            let excluded = exclude.is_some_and(|x| {
                x.excluded(&m, false)
                    || m.ancestors()
                        .skip(1)
                        .take_while(|a| dirs.iter().any(|d| a.starts_with(d) && a != d))
                        .any(|a| x.excluded(a, true))
            });
            if hidden || excluded {
                continue;
            }
            added.push(m.clone());
            queue.push(m);
        }
    }
    added.sort();
    added
}

#[cfg(test)]
mod tests {
    use super::imported_but_ignored;

    #[test]
    fn imported_modules_that_gitignore_hides_are_taken_back() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("proj");
        std::fs::create_dir_all(root.join("pkg/models")).unwrap();
        std::fs::write(root.join(".gitignore"), "models/\n").unwrap();
        std::fs::write(root.join("pkg/__init__.py"), "").unwrap();
        std::fs::write(root.join("pkg/models/__init__.py"), "").unwrap();
        std::fs::write(
            root.join("pkg/models/seg.py"),
            "import torch\nfrom .util import f\n",
        )
        .unwrap();
        std::fs::write(root.join("pkg/models/util.py"), "def f(): pass\n").unwrap();
        std::fs::write(root.join("pkg/models/unused.py"), "").unwrap();
        let train = root.join("train.py");
        std::fs::write(&train, "from pkg.models.seg import Net\n").unwrap();
        let found = crate::port::files::discover(std::slice::from_ref(&root), false);
        assert!(!found.files.iter().any(|f| f.ends_with("seg.py")));
        let back = imported_but_ignored(&found.files, std::slice::from_ref(&root), None);
        let names: Vec<String> = back
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["pkg/models/seg.py", "pkg/models/util.py"]);
        // Nothing is ignored: nothing to take back.
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        let found = crate::port::files::discover(std::slice::from_ref(&root), false);
        assert!(imported_but_ignored(&found.files, std::slice::from_ref(&root), None).is_empty());
    }
}
