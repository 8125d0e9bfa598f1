//! A project that pins an older torch than a portable form needs. The portable forms are
//! torch 2.15's; `torch.accelerator` itself came in torch 2.6, its memory statistics later and
//! `torch.accelerator.random` in 2.13. A project whose requirements (or the notebooks that
//! install its environment) cap torch below that runs the port on its own machine into an
//! AttributeError (set K: `torch.cuda.get_rng_state_all()` → `torch.accelerator.random...` in
//! a project pinning torch 2.7.1, at every checkpoint save). Such fixes become unsafe, with a
//! note naming the pin.
//!
//! The pins read: `*requirement*.txt`, `pyproject.toml`, `setup.py`, `setup.cfg`, conda
//! environments (any `*.yml`/`*.yaml` with `dependencies:`), `Dockerfile`, `Pipfile` and the lock files (`Pipfile.lock`,
//! `poetry.lock`, `uv.lock`, `pdm.lock`), the `pip install` lines of notebooks, the torch
//! versions a README says in prose ("Requirements: PyTorch 1.12+ or 2.x", "torch >= 1.6": set
//! N, where a README was the only place a project said it supports torch 1.2) and the versions
//! its CI tests (`.github/workflows/*.yml`, `.travis.yml`, `tox.ini`, `noxfile.py`: a
//! `torch-version: [1.13, 2.0]` matrix or a `pip install torch==...` line), in the file's
//! folder and the folders above it (6 levels). A README's version that no torch had (a major
//! above 2, "PyTorch 4.1+") cannot be read, and counts for nothing. The oldest torch any of them allows counts (an
//! exact pin, a lower bound such as a library's `torch>=2.0`, or a cap: everything below a cap
//! is allowed; set L: open_clip declaring `torch>=2.0`). A project that declares nothing may
//! run any torch (sets S-U: 49 of 119 wrong fixes were `torch.accelerator` written into
//! projects whose age, bytecode or pickled checkpoints showed a torch before 2.6, with no pin to
//! say so): its portable forms keep the original beside them (`hasattr(torch, "accelerator")`,
//! [`super::old_torch`]) and the forms no test can find stay unsafe, until the owner declares
//! the torch it runs (`--min-torch 2.11`, `min-torch` in the configuration, or a pin). A
//! version check in code is not a declared minimum (torchao checks torch's version and needs a
//! recent one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use crate::port::diagnostic::Diagnostic;
use crate::port::edit::Fix;
use crate::port::rules::FixClass;
use versions::{Version, companions_in, locked_in, oldest_in, said_in, tested_in};

pub(super) mod code;
mod python;
mod versions;

/// What a fix's text needs, newest first: the name and the first torch that has it.
const FLOORS: &[(&str, Version)] = &[
    ("torch.accelerator.random", (2, 13)),
    ("torch.accelerator.memory", (2, 9)),
    ("torch.accelerator.max_memory", (2, 9)),
    ("torch.accelerator.reset_", (2, 9)),
    ("torch.accelerator.empty_cache", (2, 9)),
    ("torch.accelerator.get_memory_info", (2, 9)),
    // Renamed from `*_device_idx` after 2.6; `check_available` came later too.
    ("torch.accelerator.set_device_index", (2, 7)),
    ("torch.accelerator.current_device_index", (2, 7)),
    ("torch.accelerator.device_index", (2, 7)),
    ("check_available", (2, 7)),
    ("torch.accelerator.", (2, 6)),
    ("get_default_backend_for_device", (2, 6)),
    // The device-generic stream and event (set W: `torch.cuda.Event` → `torch.Event` in a
    // project declaring torch>=2.0).
    ("torch.Event", (2, 4)),
    // The device-generic out-of-memory exception (set AC: `except torch.cuda.OutOfMemoryError`
    // in a project supporting torch 2.3, where the new name raised AttributeError in every
    // handler).
    ("torch.OutOfMemoryError", (2, 4)),
    ("torch.amp.custom_fwd", (2, 4)),
    ("torch.amp.custom_bwd", (2, 4)),
    ("torch.get_device_module", (2, 4)),
    ("torch.amp.GradScaler", (2, 3)),
    ("torch.amp.grad_scaler.GradScaler", (2, 3)),
    ("torch.Stream", (2, 4)),
];

/// A README, whose prose may say which torch the project supports.
fn is_readme(name: &str) -> bool {
    name.get(..6)
        .is_some_and(|h| h.eq_ignore_ascii_case("readme"))
}

/// Files that pin the environment, by name (CI configurations with them).
fn is_pin_file(name: &str) -> bool {
    (name.contains("requirement") && name.ends_with(".txt"))
        || is_readme(name)
        || matches!(name, ".travis.yml" | "tox.ini" | "noxfile.py")
        || matches!(
            name,
            "pyproject.toml"
                | "setup.py"
                | "setup.cfg"
                | "Dockerfile"
                | "Pipfile"
                | "Pipfile.lock"
                | "poetry.lock"
                | "uv.lock"
                | "pdm.lock"
        )
        || is_yaml(name)
        || name.ends_with(".ipynb")
        || name == ".python-version"
}

/// A YAML file: a conda environment under any name (`environment.yml`, set S's
/// `Pytorch-Transformer.yaml`) when its text has `dependencies:`; other YAML says nothing.
fn is_yaml(name: &str) -> bool {
    name.ends_with(".yml") || name.ends_with(".yaml")
}

/// A conda environment's text (a YAML file with `dependencies:` at column 0).
fn is_conda_environment(text: &str) -> bool {
    text.starts_with("dependencies:") || text.contains("\ndependencies:")
}

/// Folder → the oldest torch its pin files allow, and the file that says so.
type Oldest = Option<(Version, String)>;
static FOLDERS: LazyLock<Mutex<HashMap<PathBuf, Oldest>>> = LazyLock::new(Default::default);

/// Forget the folders read (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut f) = FOLDERS.lock() {
        f.clear();
    }
    code::forget();
}

fn oldest_in_folder(dir: &Path) -> Oldest {
    if let Some(known) = FOLDERS.lock().ok().and_then(|f| f.get(dir).cloned()) {
        return known;
    }
    let mut best: Oldest = None;
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| is_pin_file(&n.to_string_lossy()))
                    && p.is_file()
            })
            .collect();
        // The CI's workflows: the torch versions it tests.
        if let Ok(flows) = std::fs::read_dir(dir.join(".github").join("workflows")) {
            files.extend(
                flows
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml")),
            );
        }
        // A declaration before prose: where both say the same torch, the pin file is named.
        files.sort_by_key(|p| {
            let readme = p
                .file_name()
                .is_some_and(|n| is_readme(&n.to_string_lossy()));
            (readme, p.clone())
        });
        for f in files {
            let text = code::read_text(&f).unwrap_or_default();
            let name = f.file_name().unwrap_or_default().to_string_lossy();
            let own = f.parent() == Some(dir);
            if own && is_yaml(&name) && name != ".travis.yml" && !is_conda_environment(&text) {
                continue;
            }
            // A notebook's pins are its install lines (`!pip install torch==2.7.1`).
            let cap = if crate::port::notebook::is_notebook(&f) {
                text.split("\\n")
                    .filter(|l| l.contains("install"))
                    .filter_map(oldest_in)
                    .min()
                    .map(|v| {
                        (
                            v,
                            f.file_name()
                                .unwrap_or_default()
                                .to_string_lossy()
                                .into_owned(),
                        )
                    })
            } else {
                // Prose is read where a project writes it, and in conda's and Docker's
                // spellings; not in a setup.py's comments ("such as pytorch 2.3 + cuda 12.1").
                let spelled = is_readme(&name)
                    || name == "Dockerfile"
                    || (own && is_yaml(&name) && is_conda_environment(&text));
                let torch = oldest_in(&text)
                    .into_iter()
                    .chain(companions_in(&text).filter(|_| !is_readme(&name)))
                    .chain(locked_in(&text))
                    .chain(tested_in(&text))
                    .chain(said_in(&text).filter(|_| spelled))
                    .min()
                    .map(|v| (v, name.to_string()));
                // The Python it runs, where that Python's newest torch is older.
                let python = python::torch_for_python(&text, &name)
                    .filter(|_| !is_readme(&name))
                    .map(|(v, why)| (v, format!("{name}: {why}")));
                torch.into_iter().chain(python).min_by_key(|(v, _)| *v)
            };
            if let Some((v, why)) = cap
                && best.as_ref().is_none_or(|(b, _)| v < *b)
            {
                best = Some((v, why));
            }
        }
    }
    if let Ok(mut f) = FOLDERS.lock() {
        f.insert(dir.to_path_buf(), best.clone());
    }
    best
}

/// The oldest torch the project around `path` allows, and where it says so.
fn oldest_in_project(path: &Path) -> Oldest {
    // A file named on the command line may be relative (`train.py`: its folder is "").
    let project = std::path::absolute(crate::port::program::tree::project_of(path)).ok();
    let path = std::path::absolute(path).ok()?;
    // The folders of the project's top level too: an environment kept beside the code (set U:
    // `Docker/Dockerfile` on `pytorch/pytorch:1.0.1`, the README's install route).
    let beside: Vec<PathBuf> = project
        .as_ref()
        .and_then(|p| std::fs::read_dir(p).ok())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        && p.file_name().is_some_and(|n| {
                            let n = n.to_string_lossy();
                            !n.starts_with('.') && n != "__pycache__" && n != "node_modules"
                        })
                })
                .collect()
        })
        .unwrap_or_default();
    // The folders above the file, up to the project's (however deep the file sits: a
    // library's `src/pkg/pipelines/x/y/z.py` under its `setup.py`), or 6 of them.
    let depth = project
        .as_ref()
        .filter(|p| path.starts_with(p))
        .map_or(6, |p| path.components().count() - p.components().count());
    path.ancestors()
        .skip(1)
        .take(depth.max(6))
        .filter_map(oldest_in_folder)
        .chain(beside.iter().filter_map(|d| {
            oldest_in_folder(d).map(|(v, why)| {
                let folder = d.file_name().unwrap_or_default().to_string_lossy();
                (v, format!("{folder}/{why}"))
            })
        }))
        .min_by_key(|(v, _)| *v)
}

/// The test that picks `text` (a portable form) where torch has every part of
/// `torch.accelerator` it calls; None where a part cannot be tested for (`check_available`).
fn probe_for(text: &str) -> Option<String> {
    if text.contains("check_available") {
        return None;
    }
    const ROOT: &str = "torch.accelerator.";
    let mut probe = super::old_torch::PROBE.to_string();
    let mut named: Vec<&str> = vec![];
    for (at, _) in text.match_indices(ROOT) {
        let rest = &text[at + ROOT.len()..];
        let name = &rest[..rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len())];
        let full = format!("{ROOT}{name}");
        let floor = FLOORS
            .iter()
            .find(|(n, _)| full.starts_with(n))
            .map(|(_, f)| *f)?;
        if floor > (2, 6) && !named.contains(&name) {
            named.push(name);
            probe.push_str(&format!(" and hasattr(torch.accelerator, \"{name}\")"));
        }
    }
    // The rename that came with 2.7's `current_accelerator()` answering None: false on 2.6.
    if asks_current_unguarded(text) && named.is_empty() {
        probe.push_str(" and hasattr(torch.accelerator, \"current_device_index\")");
    }
    Some(probe)
}

/// The names a module imports torch as (`import torch as th`): its fixes spell
/// `th.accelerator`, and its probes must too.
struct Alias(Vec<(String, regex::Regex)>);

impl Alias {
    fn of(src: &str) -> Self {
        let names = super::old_torch::torch_names(src);
        Alias(
            names
                .into_iter()
                .skip(1)
                .filter_map(|a| {
                    let re = format!(r"\b{}\.(accelerator|distributed)\b", regex::escape(&a));
                    Some((a, regex::Regex::new(&re).ok()?))
                })
                .collect(),
        )
    }

    /// The text with torch spelled `torch`.
    fn plain(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (_, re) in &self.0 {
            out = re.replace_all(&out, "torch.$1").into_owned();
        }
        out
    }

    /// A probe written for `torch`, spelled with the name the fix's text uses.
    fn spelled(&self, probe: &str, text: &str) -> String {
        match self.0.iter().find(|(_, re)| re.is_match(text)) {
            Some((a, _)) => probe
                .replace("hasattr(torch, ", &format!("hasattr({a}, "))
                .replace(
                    "hasattr(torch.accelerator, ",
                    &format!("hasattr({a}.accelerator, "),
                ),
            None => probe.to_string(),
        }
    }
}

/// The oldest torch the project around `path` supports, and where it says so: its pin files,
/// and code of this module or any module of the project that runs only on an older torch
/// ([`code`]: torchtext, a pickled module loaded with torch.load's old default).
/// The owner's declaration (`--min-torch`) counts over them; a project where nothing says is
/// [`UNDECLARED`].
/// None only for code with no file (standard input, a rule's fixture) and no declaration.
pub(in crate::port::rewrite) fn supported_torch(
    path: Option<&Path>,
    src: &str,
    declared: Option<Version>,
) -> Option<(Version, String)> {
    if let Some(v) = declared {
        return Some((v, "--min-torch".to_string()));
    }
    let path = path?;
    let own = code::torch_of_code(src).map(|(v, what)| (v, format!("it {what}")));
    oldest_in_project(path)
        .into_iter()
        .chain(own)
        .chain(code::in_project(path))
        .min_by_key(|(v, _)| *v)
        .or(Some((UNDECLARED, String::new())))
}

/// The torch of a project that declares none: older than any, for every form's test.
const UNDECLARED: Version = (0, 0);

/// What the project says about its torch, as a note begins.
fn supports(v: Version, shown: &str) -> String {
    match v == UNDECLARED {
        true => format!(
            "{} (`--min-torch 2.11` declares it)",
            crate::port::diagnostic::UNDECLARED_TORCH
        ),
        false => format!("this project supports torch {}.{} ({shown})", v.0, v.1),
    }
}

/// Where the project supports a torch without `torch.accelerator`: the note of a fix that keeps
/// its original beside the accelerator's form (an accelerator branch added to a device chain is
/// tested `hasattr(torch, "accelerator") and ...`).
pub(in crate::port::rewrite) fn old_torch_note(
    path: Option<&Path>,
    src: &str,
    declared: Option<Version>,
) -> Option<String> {
    let (v, shown) = supported_torch(path, src, declared)?;
    (v < (2, 6)).then(|| no_accelerator_note(v, &shown))
}

fn no_accelerator_note(v: Version, shown: &str) -> String {
    let which = match v == UNDECLARED {
        true => "torch before 2.6 has",
        false => "which has",
    };
    format!(
        "{}, {which} no torch.accelerator: the fix keeps the original where torch has none (`{}`)",
        supports(v, shown),
        super::old_torch::PROBE
    )
}

const CURRENT: &str = "torch.accelerator.current_accelerator()";

/// A form that counts on `current_accelerator()` answering None without an accelerator
/// (`getattr(..., "type", "cuda")`, `... or "cuda"`), which came with torch 2.7: 2.6 raises
/// "Cannot access accelerator device when none is available" where the original ran (set P: a
/// project pinning torch 2.6, its autocast and weight-tie switch run without a GPU). A form
/// used as a device (`.to(current_accelerator())` for `.cuda()`) fails there as the original
/// did; one behind `is_available()` is not asked.
fn asks_current_unguarded(text: &str) -> bool {
    (text.contains(&format!("getattr({CURRENT}")) || text.contains(&format!("{CURRENT} or ")))
        && !text.contains("torch.accelerator.is_available()")
}

/// Make unsafe the fixes whose forms need a newer torch than the project pins.
pub(in crate::port::rewrite) fn keep_within_pinned_torch(
    path: Option<&Path>,
    declared: Option<Version>,
    src: &str,
    body: &[ruff_python_ast::Stmt],
    exprs: &std::cell::OnceCell<super::old_torch::Exprs>,
    diags: &mut [Diagnostic],
) {
    // Code with no file (standard input, a rule's fixture) has no project to ask.
    if path.is_none() && declared.is_none() {
        return;
    }
    let alias = Alias::of(src);
    let probe = |text: &str| probe_for(&alias.plain(text)).map(|p| alias.spelled(&p, text));
    let needs = |d: &Diagnostic| -> Option<(&'static str, Version)> {
        let fix = d.fix.as_ref()?;
        let found = FLOORS
            .iter()
            .find(|(name, _)| {
                fix.edits
                    .iter()
                    .any(|e| alias.plain(&e.content).contains(name))
            })
            .copied()?;
        // A form behind `is_available()` is written `.type`, not `getattr(...)`: not asked.
        let unguarded = fix
            .edits
            .iter()
            .any(|e| asks_current_unguarded(&alias.plain(&e.content)));
        Some(match unguarded {
            true if found.1 < (2, 7) => (CURRENT, (2, 7)),
            _ => found,
        })
    };
    if !diags.iter().any(|d| needs(d).is_some()) {
        return;
    }
    let Some(((major, minor), shown)) = supported_torch(path, src, declared) else {
        return;
    };
    // Where a form needs torch.accelerator itself (2.6), the fix can keep the old torch's form
    // beside it (old_torch.rs): the fixes inside one expression are written together.
    let exprs = exprs.get_or_init(|| super::old_torch::Exprs::of(body, src));
    let notebook = path.is_some_and(crate::port::notebook::is_notebook);
    // In code that runs only where torch has `torch.accelerator` (the branch a chain gains), a
    // form needing nothing newer is right as it is.
    let right_as_it_is =
        |floor: Version, fix: &Fix| floor <= (2, 6) && exprs.in_new_branch(fix.range());
    let mut kept: HashMap<usize, Fix> = HashMap::new();
    let mut groups: Vec<(super::old_torch::Whole, Vec<usize>)> = vec![];
    for (i, d) in diags.iter().enumerate() {
        let (Some((_, floor)), Some(fix)) = (needs(d), d.fix.as_ref()) else {
            continue;
        };
        if (major, minor) >= floor || fix.applicability != FixClass::Safe {
            continue;
        }
        if right_as_it_is(floor, fix) {
            continue;
        }
        if let Some(inserted) = super::old_torch::inserting_for_new_torch(fix, src, &probe) {
            kept.insert(i, inserted);
            continue;
        }
        let Some(whole) = exprs.whole_for(fix.range(), src, notebook) else {
            continue;
        };
        match groups.iter_mut().find(|(r, _)| *r == whole) {
            Some((_, members)) => members.push(i),
            None => groups.push((whole, vec![i])),
        }
    }
    // The other safe fixes inside the same code go into its new form with them (a comparison
    // extended to the TPU beside the device it compares): the old form stays as written.
    for (whole, members) in groups.iter_mut() {
        for (i, d) in diags.iter().enumerate() {
            let Some(fix) = d.fix.as_ref() else { continue };
            if !members.contains(&i)
                && fix.applicability == FixClass::Safe
                && needs(d).is_none_or(|(_, floor)| (major, minor) >= floor)
                && whole.range.contains_range(fix.range())
            {
                members.push(i);
            }
        }
    }
    for (whole, members) in groups {
        let fixes: Vec<&Fix> = members
            .iter()
            .filter_map(|i| diags[*i].fix.as_ref())
            .collect();
        if let Some(fix) = super::old_torch::keeping_old_torch(&fixes, &whole, src, &probe) {
            for i in members {
                kept.insert(i, fix.clone());
            }
        }
    }
    for (i, d) in diags.iter_mut().enumerate() {
        if let Some(fix) = kept.remove(&i) {
            d.fix = Some(fix);
            d.note = Some(match (major, minor) >= (2, 6) {
                true => format!(
                    "{}, whose `current_accelerator()` raises without an accelerator (2.7 \
                     answers None): the fix keeps the original on that torch",
                    supports((major, minor), &shown)
                ),
                false => no_accelerator_note((major, minor), &shown),
            });
            continue;
        }
        let Some((name, floor)) = needs(d) else {
            continue;
        };
        if (major, minor) < floor && !d.fix.as_ref().is_some_and(|f| right_as_it_is(floor, f)) {
            d.make_unsafe(&format!(
                "unsafe: {}, and `{}` needs torch {}.{} or newer (TorchTPU needs 2.11): {}, then \
                 apply this fix",
                supports((major, minor), &shown),
                name.trim_end_matches(['.', '_']),
                floor.0,
                floor.1,
                match (major, minor) == UNDECLARED {
                    true => "declare the torch it runs",
                    false => "raise its minimum",
                }
            ));
        }
    }
}

#[cfg(test)]
mod tests;
