//! Code that runs only on an older torch than `torch.accelerator`'s, read from the project's
//! own modules where its files declare nothing (or a newer torch):
//!
//! - torchtext: its last release (0.18) is built for torch 2.3, and `torchtext.legacy` (0.9 to
//!   0.11) for torch 1.10 at most (sets R and S: a translation project naming no torch; a data
//!   loader importing `torchtext.legacy` beside the config module that was fixed).
//! - A pickled module loaded with `torch.load`'s old default: torch 2.6 loads `weights_only`
//!   by default and refuses a pickled `nn.Module` (or optimizer), so code that loads one and
//!   uses it as a module (`model = torch.load(p)` then `model.eval()`, or a checkpoint entry
//!   `decoder = ckpt["decoder"]` then `decoder.eval()`) without `weights_only=False` ran on
//!   torch 2.5 at most (set T: an image-captioning project saving its encoder and decoder whole).
//! - `torch._six` imported at column 0 (not a `try:` with a fallback), removed in torch 2.0.
//! - Bytecode the project committed (`__pycache__/model.cpython-36.pyc`): the Python it ran,
//!   whose newest torch has no `torch.accelerator` up to Python 3.8 (set T: a seq2seq project
//!   committing Python 3.6 bytecode, declaring nothing).
//!
//! Each module of the project is read once per run (its folder above the top package, or a
//! loose script's folder, walked into); the oldest torch any of them says counts.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use super::{Oldest, Version};

/// A file's text: UTF-8 (a byte-order mark dropped), or UTF-16 with its mark (set T: a
/// `requirements.txt` saved by Windows' PowerShell, `torch==2.3.0` unread before).
pub(super) fn read_text(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let utf16 = |little: bool| {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| match little {
                true => u16::from_le_bytes([c[0], c[1]]),
                false => u16::from_be_bytes([c[0], c[1]]),
            })
            .collect();
        String::from_utf16(&units).ok()
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, ..] => utf16(true),
        [0xFE, 0xFF, ..] => utf16(false),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        _ => String::from_utf8(bytes).ok(),
    }
}

/// Code that selects Apple's or Intel's accelerator.
static SELECTS_OTHER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"torch\.backends\.mps\.is_available|torch\.xpu\.is_available|["'](?:mps|xpu)(?::\d+)?["']"#)
        .unwrap()
});

/// Does this text select Apple's or Intel's accelerator (the project runs on Apple silicon or
/// Intel GPUs too: `other_accelerators.rs`)?
pub(in crate::port::rewrite::safety) fn selects_other(text: &str) -> bool {
    (text.contains("mps") || text.contains("xpu")) && SELECTS_OTHER.is_match(text)
}

/// `import torchtext`, `from torchtext.vocab import ...`.
static TORCHTEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^[ \t]*(?:import|from)[ \t]+torchtext(?-u:\b)").unwrap());

/// `import torchtext.legacy`, `from torchtext.legacy.data import Field`: torchtext 0.9-0.11.
static TORCHTEXT_LEGACY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*(?:import|from)[ \t]+torchtext\.legacy(?-u:\b)").unwrap()
});

/// `from torch._six import ...`, `import torch._six` at column 0: removed in torch 2.0 (an
/// import under `try:` with a fallback supports both; DeepSpeed's).
static SIX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?m)^(?:import|from)[ \t]+torch\._six(?-u:\b)").unwrap());

/// `name = torch.load(...)` on one line: the name and the rest of the line.
static LOAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*torch\.load\(([^\n]*)").unwrap()
});

/// `name = other[...]`: an entry taken from a checkpoint.
static ENTRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*([A-Za-z_]\w*)\[[ \t]*["'][^"'\n]+["'][ \t]*\][ \t]*(?:#[^\n]*)?$"#)
        .unwrap()
});

/// A module's own method called on a name (or on a checkpoint's entry): the value is a module.
static USED_AS_MODULE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?-u:\b)([A-Za-z_]\w*)(?:\[[ \t]*["'][^"'\n]+["'][ \t]*\])?\.(?:eval|train|parameters|named_parameters|modules|named_modules|children)\("#)
        .unwrap()
});

/// Does the text load a pickled module with `torch.load`'s default (no `weights_only`)?
fn loads_pickled_module(text: &str) -> bool {
    if !text.contains("torch.load(") {
        return false;
    }
    let loaded: HashSet<&str> = LOAD
        .captures_iter(text)
        .filter(|c| !c[2].contains("weights_only"))
        .map(|c| c.get(1).map_or("", |m| m.as_str()))
        .collect();
    if loaded.is_empty() {
        return false;
    }
    let modules: HashSet<&str> = USED_AS_MODULE
        .captures_iter(text)
        .map(|c| c.get(1).map_or("", |m| m.as_str()))
        .collect();
    loaded.iter().any(|n| modules.contains(n))
        || ENTRY.captures_iter(text).any(|c| {
            let (to, from) = (c.get(1).map_or("", |m| m.as_str()), &c[2]);
            loaded.contains(from) && modules.contains(to)
        })
}

/// What a module's text says of the torch it runs, with the words for a note ("imports
/// torchtext, ...").
pub(super) fn torch_of_code(text: &str) -> Option<(Version, &'static str)> {
    let mut found: Vec<(Version, &'static str)> = vec![];
    if text.contains("torchtext") {
        if TORCHTEXT_LEGACY.is_match(text) {
            found.push((
                (1, 10),
                "imports torchtext.legacy, gone from torchtext 0.12 on: torch 1.10 at most",
            ));
        } else if TORCHTEXT.is_match(text) {
            found.push((
                (2, 3),
                "imports torchtext, whose last release needs torch 2.3",
            ));
        }
    }
    if text.contains("torch._six") && SIX.is_match(text) {
        found.push(((1, 13), "imports torch._six, removed in torch 2.0"));
    }
    if loads_pickled_module(text) {
        found.push((
            (2, 5),
            "loads a pickled module with torch.load, which torch 2.6 refuses by default (weights_only): torch 2.5 at most",
        ));
    }
    found.into_iter().min_by_key(|(v, _)| *v)
}

/// What one module of a project says about the project: the torch its code runs, and whether
/// it selects Apple's or Intel's accelerator.
#[derive(Clone)]
struct Said {
    file: PathBuf,
    torch: Oldest,
    selects_other: bool,
}

/// Project folder → what its modules say (only those that say something), and the oldest
/// Python its committed bytecode names.
type Facts = (std::sync::Arc<Vec<Said>>, Oldest);
static PROJECTS: LazyLock<Mutex<HashMap<PathBuf, Facts>>> = LazyLock::new(Default::default);

/// Forget the projects read (the start of a run).
pub(super) fn forget() {
    if let Ok(mut p) = PROJECTS.lock() {
        p.clear();
    }
}

/// What the modules of the project around `path` say, read once per run. The module at `path`
/// itself is left to its caller, which has its text as it is now (a later round of the fix
/// loop, a file changed since).
fn project_facts(path: &Path) -> Option<(Facts, PathBuf)> {
    use crate::port::program::tree;
    let project = tree::project_of(path);
    let me = std::path::absolute(path).ok()?;
    // Held while the project is read: the modules of one project wait for its one reading.
    let mut known = PROJECTS.lock().ok()?;
    if let Some(found) = known.get(&project) {
        return Some((found.clone(), me));
    }
    let files = tree::project_files(path);
    let said: Vec<Said> = tree::side_by_side(&files, |f| {
        let text = crate::port::texts::text(f)?;
        let torch = torch_of_code(&text)
            .map(|(v, what)| (v, format!("{} {what}", tree::shown(f, &project))));
        let selects_other = selects_other(&text);
        (torch.is_some() || selects_other).then(|| Said {
            file: std::path::absolute(f).unwrap_or_else(|_| f.clone()),
            torch,
            selects_other,
        })
    })
    .into_iter()
    .flatten()
    .collect();
    let facts = (std::sync::Arc::new(said), bytecode_python(&files, &project));
    known.insert(project, facts.clone());
    Some((facts, me))
}

/// The oldest torch the code of the project around `path` (its other modules, its bytecode)
/// says it runs, and where.
pub(super) fn in_project(path: &Path) -> Oldest {
    let ((said, bytecode), me) = project_facts(path)?;
    said.iter()
        .filter(|s| s.file != me)
        .filter_map(|s| s.torch.clone())
        .chain(bytecode)
        .min_by_key(|(v, _)| *v)
}

/// The first other module of the project around `path` that selects MPS or XPU.
pub(in crate::port::rewrite::safety) fn selecting_other(path: &Path) -> Option<PathBuf> {
    let ((said, _), me) = project_facts(path)?;
    said.iter()
        .find(|s| s.selects_other && s.file != me)
        .map(|s| s.file.clone())
}

/// The oldest Python whose bytecode sits in a `__pycache__` beside the project's modules, as
/// the newest torch it runs (None from Python 3.9).
fn bytecode_python(files: &[PathBuf], project: &Path) -> Option<(Version, String)> {
    let dirs: HashSet<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    let mut oldest: Option<((u32, u32), PathBuf)> = None;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir.join("__pycache__")) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(minor) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".pyc"))
                .and_then(|n| n.rsplit_once(".cpython-3"))
                .and_then(|(_, v)| v.split(['.', '-']).next()?.parse::<u32>().ok())
            else {
                continue;
            };
            if oldest.as_ref().is_none_or(|(v, _)| (3, minor) < *v) {
                oldest = Some(((3, minor), e.path()));
            }
        }
    }
    let ((major, minor), file) = oldest?;
    let torch = super::python::newest_torch((major, minor))?;
    let shown = crate::port::program::tree::shown(&file, project);
    Some((torch, format!("{shown} is Python {major}.{minor} bytecode")))
}

#[cfg(test)]
mod tests {
    use super::{read_text, torch_of_code};

    #[test]
    fn code_that_runs_only_on_an_older_torch_says_so() {
        let v = |t: &str| torch_of_code(t).map(|x| x.0);
        assert_eq!(
            v("from torchtext.legacy.data import Field\n"),
            Some((1, 10))
        );
        assert_eq!(v("import torchtext\n"), Some((2, 3)));
        assert_eq!(v("from torch._six import inf\n"), Some((1, 13)));
        let compat = "try:\n    from torch._six import inf\nexcept ModuleNotFoundError:\n    from torch import inf\n";
        assert_eq!(v(compat), None);
        // A whole model, and a module kept in a checkpoint's entry.
        assert_eq!(v("model = torch.load(path)\nmodel.eval()\n"), Some((2, 5)));
        let entry = "checkpoint = torch.load(p, map_location=device)\ndecoder = checkpoint[\"decoder\"]\ndecoder.eval()\n";
        assert_eq!(v(entry), Some((2, 5)));
        assert_eq!(
            v("ckpt = torch.load(p)\nckpt['model'].eval()\n"),
            Some((2, 5))
        );
        // weights_only=False loads it on any torch; a state dict loaded is no module.
        assert_eq!(
            v("model = torch.load(path, weights_only=False)\nmodel.eval()\n"),
            None
        );
        assert_eq!(
            v("sd = torch.load(path)\nmodel.load_state_dict(sd)\nmodel.eval()\n"),
            None
        );
        assert_eq!(v("t = torch.load(path)\nt.to(device)\n"), None);
    }

    #[test]
    fn committed_bytecode_names_the_python() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let model = crate::port::test_support::write(root, "model/net.py", "import torch\n");
        crate::port::test_support::write(root, "model/__pycache__/net.cpython-36.pyc", "");
        crate::port::test_support::write(root, "model/__pycache__/net.cpython-311.pyc", "");
        let files = vec![model];
        let (v, why) = super::bytecode_python(&files, root).unwrap();
        assert_eq!(v, (1, 10));
        assert!(why.contains("Python 3.6 bytecode"), "{why}");
        crate::port::test_support::write(root, "model/__pycache__/net.cpython-36.pyc", "");
        std::fs::remove_file(root.join("model/__pycache__/net.cpython-36.pyc")).unwrap();
        assert_eq!(super::bytecode_python(&files, root), None);
    }

    #[test]
    fn a_utf16_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("requirements.txt");
        let mut bytes = vec![0xFF, 0xFE];
        for u in "torch==2.3.0\r\n".encode_utf16() {
            bytes.extend(u.to_le_bytes());
        }
        std::fs::write(&p, bytes).unwrap();
        assert_eq!(read_text(&p).as_deref(), Some("torch==2.3.0\r\n"));
        std::fs::write(&p, b"\xEF\xBB\xBFtorch>=2.6\n").unwrap();
        assert_eq!(read_text(&p).as_deref(), Some("torch>=2.6\n"));
    }
}
