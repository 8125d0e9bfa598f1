//! The compiled CUDA extensions a project builds: `CUDAExtension("name", [...])` (or
//! `name="..."`) in a `setup.py` of the module's tree. A module that imports one runs NVIDIA
//! kernels that no TPU has, whatever its device strings say (KRN005: its import is a finding, so
//! a program that reaches it is reported blocked, PRG001, not ported in silence).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use regex::Regex;

use super::tree;

/// `CUDAExtension(` with its module name, first argument or `name=`.
static CUDA_EXTENSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"CUDAExtension\(\s*(?:name\s*=\s*)?['"]([A-Za-z_][\w.]*)['"]"#).unwrap()
});

/// One extension module a project compiles with CUDA sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extension {
    /// Its import name (`factor_multiply`, `pkg._C`).
    pub name: String,
    /// The `setup.py` that builds it (and as shown: relative to the tree's root), and the line.
    pub file: PathBuf,
    pub shown: String,
    pub line: usize,
}

/// Tree root → the CUDA extensions its `setup.py` files build.
static BUILT: LazyLock<Mutex<HashMap<PathBuf, Arc<Vec<Extension>>>>> =
    LazyLock::new(Default::default);

/// The CUDA extensions built by the `setup.py` files of the tree of the module at `path` (the
/// folder above its top package, or its own folder, and every folder below).
pub fn built_for(path: &Path) -> Arc<Vec<Extension>> {
    let Some((root, _)) = tree::tree_of(path) else {
        return Arc::default();
    };
    if let Some(known) = BUILT.lock().ok().and_then(|b| b.get(&root).cloned()) {
        return known;
    }
    let mut out = vec![];
    for f in tree::listing(&root, true).iter() {
        if f.file_name().is_none_or(|n| n != "setup.py") {
            continue;
        }
        let Some(text) = crate::port::texts::text(f) else {
            continue;
        };
        for m in CUDA_EXTENSION.captures_iter(&text) {
            let at = m.get(0).map_or(0, |g| g.start());
            out.push(Extension {
                name: m[1].to_string(),
                file: f.clone(),
                shown: f.strip_prefix(&root).unwrap_or(f).display().to_string(),
                line: text[..at].matches('\n').count() + 1,
            });
        }
    }
    let out = Arc::new(out);
    if let Ok(mut b) = BUILT.lock() {
        b.insert(root, out.clone());
    }
    out
}

/// Forget the trees read (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut b) = BUILT.lock() {
        b.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::port::test_support::write;

    #[test]
    fn the_cuda_extensions_a_tree_builds_are_read_from_its_setup_files() {
        let d = tempfile::tempdir().unwrap();
        let setup = "from torch.utils.cpp_extension import CUDAExtension, CppExtension\next = CUDAExtension(\n    'factor_multiply', ['f.cpp', 'f_cuda.cu'])\ncpu = CppExtension('cpu_only', ['c.cpp'])\nother = CUDAExtension(name=\"pkg._C\", sources=['a.cu'])\n";
        write(d.path(), "ops/setup.py", setup);
        let script = write(d.path(), "train.py", "import factor_multiply\n");
        let built = built_for(&script);
        let names: Vec<&str> = built.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["factor_multiply", "pkg._C"]);
        assert_eq!(built[0].line, 2);
    }
}
