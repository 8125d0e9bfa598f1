//! Project modules that `.gitignore` hides but the project imports. A pattern meant for data or
//! weights (`models/`, `checkpoints/`, `refs/`) also matches a tracked source package of the same
//! name (`src/pkg/models/`); the walk skips it, so the code a program runs there is neither
//! ported nor judged, and the program silently runs half on the TPU (set I: a segmentation
//! wrapper keeping Cellpose on the CPU). The files a migrated file imports from its own tree
//! are taken back, transitively; what the configuration's `exclude` names stays out.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::config::Exclude;
use super::files::Discovered;
use super::neighbours::is_file;
use super::program::imports::{Depth, imports_at};

/// At most this many files are taken back (a tree that ignores a whole vendored library).
const CAP: usize = 2000;

/// Is there an ignore file that could have hidden something: in a walked folder (the walk
/// saw it: `seen_in_walk`) or above one?
fn has_ignore_file(roots: &[PathBuf], seen_in_walk: bool) -> bool {
    seen_in_walk
        || roots.iter().any(|r| {
            r.ancestors()
                .skip(1)
                .any(|a| a.join(".gitignore").is_file() || a.join(".ignore").is_file())
        })
}

/// The project files that the module at `path` (its source `text`) imports, at any indentation
/// (the program model's import follower), with the `__init__.py` of each package above them
/// that Python runs first.
fn imports_of(path: &Path, text: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = vec![];
    for i in imports_at(path, text, Depth::Anywhere) {
        for init in i
            .file
            .ancestors()
            .skip(1)
            .map(|d| d.join("__init__.py"))
            .take_while(|f| is_file(f))
        {
            if init != path && !out.contains(&init) {
                out.push(init);
            }
        }
        if !out.contains(&i.file) {
            out.push(i.file);
        }
    }
    out
}

/// The files that `files` (already found) import, transitively, from inside the walked folders
/// `roots`, that the walk did not find (an ignore rule hid them), less what `exclude` names
/// and hidden paths. Sorted.
pub fn imported_but_ignored(
    found: &Discovered,
    roots: &[PathBuf],
    exclude: Option<&Exclude>,
) -> Vec<PathBuf> {
    let files = &found.files;
    let dirs: Vec<PathBuf> = roots.iter().filter(|r| r.is_dir()).cloned().collect();
    if dirs.is_empty() || !has_ignore_file(&dirs, found.ignore_files) {
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
        for m in imports_of(&f, &text) {
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
        let back = imported_but_ignored(&found, std::slice::from_ref(&root), None);
        let names: Vec<String> = back
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "pkg/models/__init__.py",
                "pkg/models/seg.py",
                "pkg/models/util.py"
            ]
        );
        // Nothing is ignored: nothing to take back.
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        let found = crate::port::files::discover(std::slice::from_ref(&root), false);
        assert!(imported_but_ignored(&found, std::slice::from_ref(&root), None).is_empty());
    }
}
