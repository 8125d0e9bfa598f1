//! Facts from the files next to this one: which of the modules it imports from the same
//! project are CUDA-only. A module with an unconditional top-level `import triton` cannot even
//! be imported without Triton, and what it exports are Triton kernels and their wrappers; a
//! test that imports them (`from pkg.kernels.fp8 import hp_to_fp8_row_major`) runs CUDA code
//! the call sites do not show. So does a module that imports such a module unconditionally
//! (`linear.py` doing `from .kernels import fp8_gemm`, up to [`HOPS`] modules away from the
//! Triton one): it cannot be imported without Triton either, and what it exports wraps Triton
//! kernels. Modules are found on disk beside the file (relative imports, or absolute imports
//! rooted in a directory above it); each file is read once per process.

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

/// A module-level `from X import ...` at column 0 (so not under `try`/`if`).
static FROM_AT_TOP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^from (\.*)([\w.]*) import ").unwrap());

/// How many modules may sit between a file and the module that imports Triton.
pub const HOPS: usize = 2;

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

/// Module file → imports Triton at top level, for the files already read.
static SEEN: Memo = LazyLock::new(Default::default);

/// An unconditional top-level import of a library of Triton or CUDA kernels (Triton itself,
/// Helion, Liger, FlashAttention, vLLM, ...): a module that cannot be imported without one
/// exports its kernels and their wrappers. `cuda_only.rs`'s roots include every one of them.
pub(crate) const KERNEL_LIBRARIES: &[&str] = &[
    "triton",
    "helion",
    "liger_kernel",
    "flash_attn",
    "flash_attn_interface",
    "xformers",
    "flashinfer",
    "mamba_ssm",
    "causal_conv1d",
    "transformer_engine",
    "bitsandbytes",
    "apex",
    "deep_gemm",
    "sgl_kernel",
    "vllm",
];

static KERNELS_AT_TOP: LazyLock<Regex> = LazyLock::new(|| {
    let roots = KERNEL_LIBRARIES.join("|");
    Regex::new(&format!(
        r"(?m)^(import ({roots})\b|from ({roots})(\.[\w.]+)? import )"
    ))
    .unwrap()
});

/// A top-level import from Inductor's compiler or its passes (`from torch.fx.passes.
/// regional_inductor import regional_inductor`): Inductor compiles for CUDA and the CPU, not a
/// TPU. Its settings, utilities and graph passes are not.
static INDUCTOR_AT_TOP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^from torch\.(_inductor|fx\.passes\.regional_inductor)\b[\w.]* import .*$")
        .unwrap()
});

fn triton_file(path: &Path) -> bool {
    memo(&SEEN, path, |p| {
        std::fs::read_to_string(p).is_ok_and(|t| TRITON_AT_TOP.is_match(&t))
    })
}

/// Module file → imports a kernel library or Inductor's compiler at top level.
static KERNELS: Memo = LazyLock::new(Default::default);

fn kernel_file(path: &Path) -> bool {
    memo(&KERNELS, path, |p| {
        std::fs::read_to_string(p).is_ok_and(|t| {
            KERNELS_AT_TOP.is_match(&t)
                || INDUCTOR_AT_TOP.find_iter(&t).any(|m| {
                    let line = m.as_str();
                    [
                        "regional_inductor",
                        "compile_fx",
                        "standalone_compile",
                        "aot_compile",
                    ]
                    .iter()
                    .any(|c| line.contains(c))
                })
        })
    })
}

/// Module file → the module of its own project it imports at top level that imports Triton.
static BOUND: LazyLock<Mutex<HashMap<PathBuf, Option<PathBuf>>>> = LazyLock::new(Default::default);

/// The first project module that the module text `text` of the file `path` imports at top
/// level and that imports Triton, within `hops` modules. Packages' `__init__.py` are not
/// followed (they import everything; a Triton one would be reached through its module).
pub fn triton_import_in(path: &Path, text: &str, hops: usize) -> Option<PathBuf> {
    if hops == 0 {
        return None;
    }
    for m in FROM_AT_TOP.captures_iter(text) {
        let level = m[1].len();
        let segments: Vec<&str> = m[2].split('.').filter(|s| !s.is_empty()).collect();
        let Some(file) = resolve_module(path, level, &segments) else {
            continue;
        };
        if file.file_name().is_some_and(|n| n == "__init__.py") || file == path {
            continue;
        }
        if triton_file(&file) || triton_bound(&file, hops - 1) {
            return Some(file);
        }
    }
    None
}

/// Does the module at `path` import Triton, itself or through `hops` project modules?
fn triton_bound(path: &Path, hops: usize) -> bool {
    if hops == 0 {
        return false;
    }
    if let Some(known) = BOUND.lock().ok().and_then(|b| b.get(path).cloned()) {
        return known.is_some();
    }
    let found = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| triton_import_in(path, &t, hops));
    if let Ok(mut b) = BOUND.lock() {
        b.insert(path.to_path_buf(), found.clone());
    }
    found.is_some()
}

/// A module whose names are CUDA-only: it imports Triton, another kernel library or Inductor's
/// compiler at top level, or imports (at top level) a module of its project that does, within
/// [`HOPS`].
fn cuda_only_file(path: &Path) -> bool {
    kernel_file(path) || kernel_bound(path, HOPS - 1)
}

/// Module file → imports (at top level) a project module that [`kernel_file`] holds, within
/// [`HOPS`].
static KERNEL_BOUND: Memo = LazyLock::new(Default::default);

fn kernel_bound(path: &Path, hops: usize) -> bool {
    if hops == 0 {
        return false;
    }
    memo(&KERNEL_BOUND, path, |p| {
        let Ok(text) = std::fs::read_to_string(p) else {
            return false;
        };
        FROM_AT_TOP.captures_iter(&text).any(|m| {
            let segments: Vec<&str> = m[2].split('.').filter(|s| !s.is_empty()).collect();
            resolve_module(p, m[1].len(), &segments).is_some_and(|file| {
                file.file_name().is_none_or(|n| n != "__init__.py")
                    && file != p
                    && (kernel_file(&file) || kernel_bound(&file, hops - 1))
            })
        })
    })
}

/// Path → is a file, for the paths already asked about (many files import the same modules;
/// [`crate::port::program`] asks too).
static IS_FILE: Memo = LazyLock::new(Default::default);

pub(crate) fn is_file(p: &Path) -> bool {
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
    resolve_module(path, i.level as usize, &segments)
}

/// The file of module `segments` (`level` leading dots) imported by the file at `path`, when
/// it is in the same tree.
pub(crate) fn module_in_tree(path: &Path, level: usize, segments: &[&str]) -> Option<PathBuf> {
    resolve_module(path, level, segments)
}

fn resolve_module(path: &Path, level: usize, segments: &[&str]) -> Option<PathBuf> {
    let dir = path.parent()?;
    if level > 0 {
        let mut d = dir;
        for _ in 1..level {
            d = d.parent()?;
        }
        return module_file(d, segments);
    }
    let root = *segments.first()?;
    // Only a package whose directory sits above the file (this project), within 12 levels.
    let mut ancestors = dir.ancestors().take(12);
    let base = ancestors.find(|a| is_file(&a.join(root).join("__init__.py")))?;
    module_file(base, segments)
}

/// (Module file, name) → whether the module assigns the name at top level from an expression
/// that asks about CUDA, for the pairs already asked about.
static FLAGS: LazyLock<Mutex<HashMap<(PathBuf, String), bool>>> = LazyLock::new(Default::default);

/// Is `name`, imported by the file at `path` with `i`, a flag its own module computes from
/// CUDA (`_SUPPORTS_FLEX_ATTENTION = torch.cuda.is_available() and ...`)? Read as text: the
/// value runs from the assignment at column 0 to the next line that starts a statement.
pub fn imported_cuda_flag(path: &Path, i: &StmtImportFrom, name: &str) -> bool {
    let Some(file) = resolve(path, i) else {
        return false;
    };
    let key = (file, name.to_string());
    if let Some(known) = FLAGS.lock().ok().and_then(|f| f.get(&key).copied()) {
        return known;
    }
    let found = std::fs::read_to_string(&key.0).is_ok_and(|text| {
        let assign = Regex::new(&format!(r"(?m)^{}\s*(:[^=\n]*)?=[^=]", regex::escape(name)));
        let Some(at) = assign.ok().and_then(|re| re.find(&text)) else {
            return false;
        };
        let rest = &text[at.end()..];
        let mut value = rest.lines().next().unwrap_or("").to_string();
        for line in rest.lines().skip(1) {
            if line.starts_with(|c: char| !c.is_whitespace() && !")]}".contains(c)) {
                break;
            }
            value.push_str(line);
        }
        let value = value.to_ascii_lowercase();
        value.contains("cuda") || value.contains("rocm")
    });
    if let Ok(mut f) = FLAGS.lock() {
        f.insert(key, found);
    }
    found
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
            let what = format!(
                "`{local}`, from `{module}`, which imports Triton, CUDA kernels or Inductor"
            );
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

        // A test of those kernels keeps its CUDA check and its device (`--to tpu`: the
        // portable device is CUDA's own under a CUDA test, and is ported).
        use crate::port::{RuleIndex, RuleSet, Settings, Target, migrate_source_at};
        let tpu = Settings {
            to: Target::Tpu,
            ..Settings::default()
        };
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        let test = "import torch\nfrom pkg.kernels.fp8 import to_fp8\n\n\ndef test_fp8():\n    assert torch.cuda.is_available()\n    x = torch.randn(4, device=\"cuda\")\n    to_fp8(x)\n";
        let at = pkg.join("kernels/test_fp8.py");
        let out = migrate_source_at(test, Some(&at), &rules, &index, tpu);
        assert!(out.output.is_none(), "{:?}", out.output);
        // Without the Triton module beside it, the test is ported.
        let out = migrate_source_at(test, None, &rules, &index, tpu);
        assert!(out.output.is_some());

        // Two modules away: `pkg/linear.py` imports the kernels, a helper imports `linear`.
        std::fs::write(
            pkg.join("linear.py"),
            "import torch\nfrom pkg.kernels.fp8 import to_fp8\n\nclass Lin:\n    pass\n",
        )
        .unwrap();
        std::fs::write(pkg.join("plain.py"), "import torch\n").unwrap();
        let helper = "import torch\nfrom pkg.linear import Lin\n\n\ndef make(device=\"cuda\"):\n    return torch.zeros(1, device=device)\n";
        let at = pkg.join("helpers.py");
        let via = triton_import_in(&at, helper, HOPS).unwrap();
        assert!(via.ends_with("linear.py"), "{via:?}");
        let out = migrate_source_at(helper, Some(&at), &rules, &index, tpu);
        assert!(out.output.is_none(), "{:?}", out.output);
        let unsafe_note = out.diagnostics.iter().any(|d| {
            d.fix.as_ref().is_some_and(|f| {
                f.applicability == crate::port::rules::FixClass::Unsafe
                    && d.note
                        .as_deref()
                        .is_some_and(|n| n.contains("`linear` (which imports Triton)"))
            })
        });
        assert!(unsafe_note, "{:?}", out.diagnostics);
        let names = cuda_only_imports(&at, &crate::port::parse::parse(helper).module.body);
        assert!(names.contains_key("Lin"));
        // A module importing only portable project modules is ported.
        let plain = helper.replace("pkg.linear import Lin", "pkg.plain import torch as t");
        assert!(triton_import_in(&at, &plain, HOPS).is_none());
        let out = migrate_source_at(&plain, Some(&at), &rules, &index, tpu);
        assert!(out.output.is_some());

        // A flag another module of the project computes from CUDA selects CUDA code here too.
        std::fs::write(
            pkg.join("guards.py"),
            "import torch\n\nFLEX = (\n    torch.__version__ >= \"2.5\"\n    and torch.cuda.is_available()\n)\nNEW = torch.__version__ >= \"2.5\"\n",
        )
        .unwrap();
        let user = "import torch\nfrom pkg.guards import FLEX\n\n\ndef mask(ids):\n    if FLEX:\n        return ids.to(\"cuda\")\n    return ids\n";
        let at = pkg.join("attention.py");
        let out = migrate_source_at(user, Some(&at), &rules, &index, tpu);
        assert!(out.output.is_none(), "{:?}", out.output);
        let portable = migrate_source_at(user, Some(&at), &rules, &index, Settings::default());
        assert!(
            portable
                .output
                .is_some_and(|o| o.contains("ids.to(torch.accelerator.current_accelerator())"))
        );
        let new = user.replace("FLEX", "NEW");
        let out = migrate_source_at(&new, Some(&at), &rules, &index, tpu);
        assert!(out.output.is_some_and(|o| o.contains("ids.to(\"tpu\")")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
