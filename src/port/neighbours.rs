//! Facts from the files next to this one: which of the modules it imports from the same
//! project are CUDA-only. A module with an unconditional top-level `import triton` cannot even
//! be imported without Triton, and what it exports are Triton kernels and their wrappers; a
//! test that imports them (`from pkg.kernels.fp8 import hp_to_fp8_row_major`) runs CUDA code
//! the call sites do not show. So does a module that imports such a module unconditionally
//! (`linear.py` doing `from .kernels import fp8_gemm`, up to [`HOPS`] modules away from the
//! Triton one): it cannot be imported without Triton either, and what it exports wraps Triton
//! kernels. An import in a top-level `try:` counts too where the module tests no tensor's device
//! (`try: import triton; HAS_TRITON = True`, then `if HAS_TRITON:` picks the kernel): Triton
//! is installed beside every CUDA build of PyTorch, a TPU VM's included, so that path is taken
//! there with TPU tensors. Modules are found on disk beside the file (relative imports, or absolute imports
//! rooted in a directory above it); each file is read once per process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use crate::port::texts;
use ruff_python_ast::visitor::source_order::{self, SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{AnyNodeRef, Stmt, StmtImportFrom};

/// An unconditional top-level Triton import (column 0: not under `try`/`if`).
static TRITON_AT_TOP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^(import triton\b|from triton(\.[\w.]+)? import )").unwrap());

/// Does this module text import Triton at top level: unconditionally, or in a `try:` where
/// the module tests no tensor's device (so its Triton path is taken wherever Triton imports)?
/// (`optional`: the portable port's reading; `--to tpu` reads unconditional imports only.)
pub fn imports_triton_at_top(text: &str, optional: bool) -> bool {
    TRITON_AT_TOP.is_match(text)
        || (optional
            && text.contains("triton")
            && !tests_the_device(text)
            && try_imports(text).any(|(_, m)| is_triton(m)))
}

/// A module-level `from X import ...` at column 0 (so not under `try`/`if`).
static FROM_AT_TOP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^from (\.*)([\w.]*) import ").unwrap());

/// How many modules may sit between a file and the module that imports Triton.
pub const HOPS: usize = 2;

/// A per-process memo of a yes/no question about a path.
/// Keyed by the path's bytes, hashed fast (a `Path` hashes component by component, and these
/// tables are asked for every import of every file): two spellings of one path are two keys,
/// asked twice, with the same answer.
type Memo = LazyLock<Mutex<rustc_hash::FxHashMap<std::ffi::OsString, bool>>>;

/// The memoised answer for `path`, asking `ask` the first time.
fn memo(table: &Memo, path: &Path, ask: impl FnOnce(&Path) -> bool) -> bool {
    let key = path.as_os_str();
    if let Some(known) = table.lock().ok().and_then(|s| s.get(key).copied()) {
        return known;
    }
    let found = ask(path);
    if let Ok(mut s) = table.lock() {
        s.insert(key.to_os_string(), found);
    }
    found
}

/// Module file → imports Triton at top level, for the files already read.
static SEEN: Memo = LazyLock::new(Default::default);
/// The same, optional imports included.
static SEEN_OPTIONAL: Memo = LazyLock::new(Default::default);

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

fn triton_file(path: &Path, optional: bool) -> bool {
    let table = if optional { &SEEN_OPTIONAL } else { &SEEN };
    memo(table, path, |p| {
        texts::text(p).is_some_and(|t| imports_triton_at_top(&t, optional))
    })
}

fn is_triton(module: &str) -> bool {
    module == "triton" || module.starts_with("triton.")
}

/// A test of a tensor's or a device's type (`x.is_cuda`, `t.device.type == "cuda"`): a
/// module that has one may take its Triton path only for CUDA tensors.
static DEVICE_TEST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\bis_cuda\b|\b(type|device_type)\s*(==|!=|in|not in)\s*[(\[]?\s*["']cuda"#)
        .unwrap()
});

fn tests_the_device(text: &str) -> bool {
    DEVICE_TEST.is_match(text)
}

/// An import statement at column 0 (a one-line `try: import triton` too), or indented (`^[ \t]+`,
/// read only inside a top-level `try:`): `from (dots)(module) import (names)` or
/// `import (module)`.
static COLUMN_0_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^(try:[ \t]*)?(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([\w.]+))",
    )
    .unwrap()
});
static INDENTED_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^[ \t]+()(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([\w.]+))",
    )
    .unwrap()
});

/// One import of a module: its leading dots, its module, the names it takes (`a, b as c`; empty
/// for `import m`), and whether it sits in the body of a top-level `try:`.
struct Imported<'t> {
    dots: usize,
    module: &'t str,
    names: &'t str,
    optional: bool,
}

/// The byte ranges of the bodies of the top-level `try:` blocks (up to the next line at column
/// 0: its `except`, `else` or `finally`).
fn try_bodies(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = vec![];
    let mut open: Option<usize> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let top =
            !line.starts_with([' ', '\t']) && !line.trim().is_empty() && !line.starts_with('#');
        if top {
            if let Some(start) = open.take() {
                out.push(start..at);
            }
            if line.starts_with("try:") {
                open = Some(at + line.len());
            }
        }
        at += line.len();
    }
    if let Some(start) = open {
        out.push(start..text.len());
    }
    out
}

/// The imports at column 0 and in the bodies of top-level `try:` blocks (`try: import triton;
/// HAS_TRITON = True`, `try: from .kernels import fused_add`): optional, but taken wherever the
/// library is installed, as Triton is beside every CUDA build of PyTorch, a TPU VM's included.
/// The `except` branch (the fallback) and imports under `if` or in functions are not read.
fn module_imports(text: &str) -> Vec<Imported<'_>> {
    fn read<'t>(c: regex::Captures<'t>, optional: bool) -> Option<Imported<'t>> {
        let optional = optional || c.get(1).is_some_and(|t| !t.as_str().is_empty());
        let (dots, module, names) = match (c.get(2), c.get(3), c.get(4), c.get(5)) {
            (Some(d), Some(m), Some(n), _) => (d.as_str().len(), m.as_str(), n.as_str()),
            (_, _, _, Some(m)) => (0, m.as_str(), ""),
            _ => return None,
        };
        Some(Imported {
            dots,
            module,
            names,
            optional,
        })
    }
    let mut out: Vec<Imported> = COLUMN_0_IMPORT
        .captures_iter(text)
        .filter_map(|c| read(c, false))
        .collect();
    if text.contains("try:") {
        for body in try_bodies(text) {
            out.extend(
                INDENTED_IMPORT
                    .captures_iter(&text[body])
                    .filter_map(|c| read(c, true)),
            );
        }
    }
    out
}

/// The modules a top-level `try:` imports, as (leading dots, module).
fn try_imports(text: &str) -> impl Iterator<Item = (usize, &str)> {
    module_imports(text)
        .into_iter()
        .filter(|i| i.optional)
        .map(|i| (i.dots, i.module))
}

/// The names an import list gives (`(a, b as c)` → a, b), without what they are bound as.
fn imported_names(list: &str) -> impl Iterator<Item = &str> {
    list.trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .filter_map(|n| n.split_whitespace().next())
}

/// `__init__.py` file → the modules it imports names from, each with the names.
type Reexports = HashMap<PathBuf, std::sync::Arc<Vec<(String, PathBuf)>>>;
static REEXPORTS: LazyLock<Mutex<Reexports>> = LazyLock::new(Default::default);

/// The modules of the package whose `__init__.py` is `init` that give the names `list` takes
/// from it: a submodule of that name, or the module the `__init__.py` imports the name from.
fn init_sources(init: &Path, list: &str) -> Vec<PathBuf> {
    let Some(dir) = init.parent() else {
        return Vec::new();
    };
    let wanted: Vec<&str> = imported_names(list).collect();
    let mut out: Vec<PathBuf> = wanted
        .iter()
        .filter_map(|n| module_file(dir, &[n]))
        .collect();
    let known = REEXPORTS.lock().ok().and_then(|r| r.get(init).cloned());
    let sources = known.unwrap_or_else(|| {
        let found: std::sync::Arc<Vec<(String, PathBuf)>> = texts::text(init)
            .map(|text| {
                module_imports(&text)
                    .into_iter()
                    .filter_map(|i| {
                        let segments: Vec<&str> =
                            i.module.split('.').filter(|s| !s.is_empty()).collect();
                        let file = resolve_module(init, i.dots, &segments)?;
                        file.file_name()
                            .is_none_or(|n| n != "__init__.py")
                            .then(|| (i.names.to_string(), file))
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into();
        if let Ok(mut r) = REEXPORTS.lock() {
            r.insert(init.to_path_buf(), found.clone());
        }
        found
    });
    for (names, file) in sources.iter() {
        if imported_names(names).any(|n| wanted.contains(&n)) {
            out.push(file.clone());
        }
    }
    out
}

/// Module file → imports a kernel library or Inductor's compiler at top level.
static KERNELS: Memo = LazyLock::new(Default::default);

fn kernel_file(path: &Path) -> bool {
    memo(&KERNELS, path, |p| {
        texts::text(p).is_some_and(|t| {
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
/// (Keyed by the file and whether optional imports are read.)
type Bound = HashMap<(PathBuf, bool), Option<PathBuf>>;
static BOUND: LazyLock<Mutex<Bound>> = LazyLock::new(Default::default);

/// The first project module that the module text `text` of the file `path` imports at top
/// level and that imports Triton, within `hops` modules. A package's `__init__.py` is followed
/// only to the modules that give the names taken from it (it often imports everything).
pub fn triton_import_in(path: &Path, text: &str, hops: usize, optional: bool) -> Option<PathBuf> {
    if hops == 0 {
        return None;
    }
    // Top-level imports, and those a top-level `try:` makes where the module tests no device.
    let read = optional && !tests_the_device(text);
    for i in module_imports(text)
        .into_iter()
        .filter(|i| !i.optional || read)
    {
        let segments: Vec<&str> = i.module.split('.').filter(|s| !s.is_empty()).collect();
        let Some(file) = resolve_module(path, i.dots, &segments) else {
            continue;
        };
        if file == path {
            continue;
        }
        // A package: the modules that give the names taken from it.
        if file.file_name().is_some_and(|n| n == "__init__.py") {
            if !optional {
                continue;
            }
            let found = init_sources(&file, i.names).into_iter().find(|f| {
                f != path && (triton_file(f, optional) || triton_bound(f, hops - 1, optional))
            });
            if found.is_some() {
                return found;
            }
            continue;
        }
        if triton_file(&file, optional) || triton_bound(&file, hops - 1, optional) {
            return Some(file);
        }
    }
    None
}

/// Does the module at `path` import Triton, itself or through `hops` project modules?
fn triton_bound(path: &Path, hops: usize, optional: bool) -> bool {
    if hops == 0 {
        return false;
    }
    let key = (path.to_path_buf(), optional);
    if let Some(known) = BOUND.lock().ok().and_then(|b| b.get(&key).cloned()) {
        return known.is_some();
    }
    let found = texts::text(path).and_then(|t| triton_import_in(path, &t, hops, optional));
    if let Ok(mut b) = BOUND.lock() {
        b.insert(key, found.clone());
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
        let Some(text) = texts::text(p) else {
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
    let found = texts::text(&key.0).is_some_and(|text| {
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
#[path = "neighbours_tests.rs"]
mod tests;
