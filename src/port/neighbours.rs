//! Facts from the files next to this one: which of the modules it imports from the same
//! project are CUDA-only. A module with an unconditional top-level `import triton` cannot even
//! be imported without Triton, and what it exports are Triton kernels and their wrappers; a
//! test that imports them (`from pkg.kernels.fp8 import hp_to_fp8_row_major`) runs CUDA code
//! the call sites do not show. Modules are found on disk beside the file (relative imports, or
//! absolute imports rooted in a directory above it); each file is read once per process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{AnyNodeRef, Stmt, StmtImportFrom};

/// An unconditional top-level Triton import (column 0: not under `try`/`if`).
static TRITON_AT_TOP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^(import triton\b|from triton(\.[\w.]+)? import )").unwrap());

/// Does this module text import Triton unconditionally at top level?
pub fn imports_triton_at_top(text: &str) -> bool {
    TRITON_AT_TOP.is_match(text)
}

/// A per-process memo of a yes/no question about a path.
type Memo = LazyLock<Mutex<HashMap<PathBuf, bool>>>;

/// The memoised answer for `path`, asking `ask` the first time.
fn memo(table: &Memo, path: &Path, ask: impl FnOnce(&Path) -> bool) -> bool {
    if let Some(known) = table.lock().ok().and_then(|s| s.get(path).copied()) {
        return known;
    }
    let found = ask(path);
    if let Ok(mut s) = table.lock() {
        s.insert(path.to_path_buf(), found);
    }
    found
}

/// Module file → CUDA-only, for the files already read.
static SEEN: Memo = LazyLock::new(Default::default);

fn cuda_only_file(path: &Path) -> bool {
    memo(&SEEN, path, |p| {
        std::fs::read_to_string(p).is_ok_and(|t| TRITON_AT_TOP.is_match(&t))
    })
}

/// Path → is a file, for the paths already asked about (many files import the same modules).
static IS_FILE: Memo = LazyLock::new(Default::default);

fn is_file(p: &Path) -> bool {
    memo(&IS_FILE, p, Path::is_file)
}

/// The file of module `segments` under `dir`, if there is one.
fn module_file(dir: &Path, segments: &[&str]) -> Option<PathBuf> {
    let base = segments.iter().fold(dir.to_path_buf(), |p, s| p.join(s));
    let file = base.with_extension("py");
    if is_file(&file) {
        return Some(file);
    }
    let init = base.join("__init__.py");
    is_file(&init).then_some(init)
}

/// The file an `from ... import` in the file at `path` reads, when it is in the same tree.
fn resolve(path: &Path, i: &StmtImportFrom) -> Option<PathBuf> {
    let module = i.module.as_ref().map(|m| m.as_str()).unwrap_or("");
    let segments: Vec<&str> = module.split('.').filter(|s| !s.is_empty()).collect();
    let dir = path.parent()?;
    if i.level > 0 {
        let mut d = dir;
        for _ in 1..i.level {
            d = d.parent()?;
        }
        return module_file(d, &segments);
    }
    let root = *segments.first()?;
    // Only a package whose directory sits above the file (this project), within 12 levels.
    let mut ancestors = dir.ancestors().take(12);
    let base = ancestors.find(|a| is_file(&a.join(root).join("__init__.py")))?;
    module_file(base, &segments)
}

#[derive(Default)]
struct ImportsFrom<'a>(Vec<&'a StmtImportFrom>);

impl<'a> SourceOrderVisitor<'a> for ImportsFrom<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        if let AnyNodeRef::StmtImportFrom(i) = node {
            self.0.push(i);
        }
        TraversalSignal::Traverse
    }
}

/// The names this file binds by importing from CUDA-only modules of its project, each with
/// what it is (`` `hp_to_fp8_row_major`, from `pkg.kernels.fp8`, which imports Triton ``).
pub fn cuda_only_imports(path: &Path, body: &[Stmt]) -> HashMap<String, String> {
    let mut imports = ImportsFrom::default();
    for stmt in body {
        source_order::walk_stmt(&mut imports, stmt);
    }
    let mut out = HashMap::new();
    for i in imports.0 {
        let Some(file) = resolve(path, i) else {
            continue;
        };
        if !cuda_only_file(&file) {
            continue;
        }
        let module = format!(
            "{}{}",
            ".".repeat(i.level as usize),
            i.module.as_ref().map(|m| m.as_str()).unwrap_or("")
        );
        for a in &i.names {
            let local = a.asname.as_ref().unwrap_or(&a.name).to_string();
            let what = format!("`{local}`, from `{module}`, which imports Triton at top level");
            out.insert(local, what);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_triton_modules_of_the_project() {
        let dir = std::env::temp_dir().join(format!("tpuport-neighbours-{}", std::process::id()));
        let pkg = dir.join("pkg");
        std::fs::create_dir_all(pkg.join("kernels")).unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        std::fs::write(pkg.join("kernels/__init__.py"), "").unwrap();
        std::fs::write(
            pkg.join("kernels/fp8.py"),
            "import triton\n\ndef to_fp8(x):\n    pass\n",
        )
        .unwrap();
        std::fs::write(
            pkg.join("kernels/ref.py"),
            "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
        )
        .unwrap();
        let src = "from pkg.kernels.fp8 import to_fp8 as f\nfrom .fp8 import to_fp8\nfrom pkg.kernels.ref import r\nfrom torch import nn\n";
        let parsed = crate::port::parse::parse(src);
        let names = cuda_only_imports(&pkg.join("kernels/test_fp8.py"), &parsed.module.body);
        let mut keys: Vec<&String> = names.keys().collect();
        keys.sort();
        assert_eq!(keys, ["f", "to_fp8"]);

        // A test of those kernels keeps its CUDA check and its device.
        use crate::port::{RuleIndex, RuleSet, Settings, migrate_source_at};
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        let test = "import torch\nfrom pkg.kernels.fp8 import to_fp8\n\n\ndef test_fp8():\n    assert torch.cuda.is_available()\n    x = torch.randn(4, device=\"cuda\")\n    to_fp8(x)\n";
        let at = pkg.join("kernels/test_fp8.py");
        let out = migrate_source_at(test, Some(&at), &rules, &index, Settings::default());
        assert!(out.output.is_none(), "{:?}", out.output);
        // Without the Triton module beside it, the test is ported.
        let out = migrate_source_at(test, None, &rules, &index, Settings::default());
        assert!(out.output.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
