//! DEV024: a notebook that installs the project's own package from PyPI and imports it
//! (`!pip install depth-recon`, then `from depth_recon.core import run`). It runs the published
//! release, not this tree: the port of the tree never reaches the installed copy, so on a TPU
//! VM the notebook computes where the release chooses (set X: a Colab demo whose installed
//! package picked the CPU with `torch.cuda.is_available()`, while the ported tree would have
//! picked the TPU). The finding sits on the import of that package and is manual: the program
//! counts as blocked until the notebook installs the ported tree (`pip install -e .`).
//!
//! The project's package name comes from its `pyproject.toml` (`[project] name`), `setup.cfg`
//! (`[metadata] name`) or `setup.py` (`name="..."`); names compare as PyPI does (case, `-`,
//! `_` and `.` alike). The install lines are read from the notebook's cells on disk (the port
//! masks IPython's `!`/`%` lines).

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::AnyNodeRef;
use ruff_text_size::Ranged;

use super::super::Checker;
use super::{Found, walk};

/// `!pip install ...` / `%pip install ...` (pip3, `python -m pip` too): the rest of the line.
static PIP_INSTALL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]*[!%][ \t]*(?:python3? -m )?pip3?[ \t]+install[ \t]+(.*)$").unwrap()
});

/// The arguments of every pip install line of a notebook's code cells (lines continued with a
/// backslash joined).
fn pip_lines(notebook: &str) -> Vec<String> {
    let Ok(nb) = serde_json::from_str::<serde_json::Value>(notebook) else {
        return vec![];
    };
    let cells = nb["cells"].as_array().cloned().unwrap_or_default();
    let mut out = vec![];
    for cell in cells.iter().filter(|c| c["cell_type"] == "code") {
        let source = match &cell["source"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p.as_str()).collect(),
            _ => continue,
        };
        let joined = source.replace("\\\r\n", " ").replace("\\\n", " ");
        for line in joined.lines() {
            if let Some(c) = PIP_INSTALL.captures(line) {
                out.push(c[1].to_string());
            }
        }
    }
    out
}

/// The project's distribution name in its build files.
static PROJECT_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?m)^[ \t]*name[ \t]*=[ \t]*["']?([A-Za-z0-9][A-Za-z0-9._-]*)["']?"#).unwrap()
});

/// A name as PyPI compares it: lower case, runs of `-`, `_` and `.` as one `-`.
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The packages a pip line installs by name (not flags, paths, URLs or requirement files),
/// without extras or versions.
fn installed(args: &str) -> Vec<String> {
    let mut out = vec![];
    let mut skip_next = false;
    for token in args.split_whitespace() {
        if std::mem::take(&mut skip_next) {
            continue;
        }
        // Options that take a value (`-r file`, `-e path`, `--index-url URL`).
        if matches!(
            token,
            "-r" | "-e"
                | "-c"
                | "-i"
                | "-t"
                | "--index-url"
                | "--extra-index-url"
                | "--target"
                | "--requirement"
                | "--editable"
                | "--constraint"
                | "-f"
                | "--find-links"
        ) {
            skip_next = true;
            continue;
        }
        if token.starts_with('-') || token.contains('/') || token.starts_with('.') {
            continue;
        }
        let name = token
            .trim_matches(|c| c == '\'' || c == '"')
            .split(['[', '<', '>', '=', '!', '~', ';', '@'])
            .next()
            .unwrap_or("");
        if !name.is_empty() {
            out.push(normalized(name));
        }
    }
    out
}

impl Checker<'_> {
    /// The project's own distribution name, normalized, from its build files.
    fn project_package(&self) -> Option<String> {
        let dir = self.project_dir()?;
        for (file, section) in [
            ("pyproject.toml", Some("[project]")),
            ("setup.cfg", Some("[metadata]")),
            ("setup.py", None),
        ] {
            let Ok(text) = std::fs::read_to_string(dir.join(file)) else {
                continue;
            };
            let body = match section {
                Some(header) => {
                    let Some(at) = text.find(header) else {
                        continue;
                    };
                    let rest = &text[at + header.len()..];
                    // The section ends where the next one starts.
                    &rest[..rest.find("\n[").unwrap_or(rest.len())]
                }
                None => text.as_str(),
            };
            if let Some(c) = PROJECT_NAME.captures(body) {
                return Some(normalized(&c[1]));
            }
        }
        None
    }

    /// DEV024's findings (see the module doc).
    pub(super) fn installed_project_packages(&self) -> Vec<Found> {
        let Some(path) = self.facts.path.as_deref() else {
            return vec![];
        };
        if !crate::port::notebook::is_notebook(path) {
            return vec![];
        }
        let Ok(raw) = std::fs::read_to_string(path) else {
            return vec![];
        };
        let pips: Vec<String> = pip_lines(&raw).iter().flat_map(|l| installed(l)).collect();
        if pips.is_empty() {
            return vec![];
        }
        let Some(own) = self.project_package().filter(|p| pips.contains(p)) else {
            return vec![];
        };
        let module = own.replace('-', "_");
        let mut out = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let hit = match node {
                AnyNodeRef::StmtImport(i) => i
                    .names
                    .iter()
                    .any(|a| a.name.as_str().split('.').next() == Some(module.as_str())),
                AnyNodeRef::StmtImportFrom(i) => {
                    i.level == 0
                        && i.module
                            .as_ref()
                            .is_some_and(|m| m.as_str().split('.').next() == Some(module.as_str()))
                }
                _ => false,
            };
            if hit && out.is_empty() {
                out.push(Found::with(node.range(), own.clone()));
            }
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{installed, normalized};

    #[test]
    fn pip_lines_name_their_packages_as_pypi_compares_them() {
        assert_eq!(normalized("Depth_Recon"), "depth-recon");
        assert_eq!(
            installed("-q depth-recon[viz]>=0.2 numpy -r req.txt -e . git+https://x/y.git"),
            ["depth-recon", "numpy"]
        );
    }
}
