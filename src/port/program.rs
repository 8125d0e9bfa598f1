//! A port's unit is a program: an entry script and the project modules it imports. After the
//! migration each program is ported whole, or what still blocks it on a TPU is reported once, on
//! its entry script, with the places (PRG001): a program is never left half-ported in silence.
//!
//! [`judge`] takes what the migration left in each file (the findings of rule families whose
//! code fails or misbehaves on a TPU when it stays: [`BLOCKING_FAMILIES`]), follows each entry
//! script's top-level imports of project modules (beside it, or in the tree's packages), and
//! gives each program its verdict.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// Families whose findings, left in a program, mean it does not run right on a TPU: devices,
/// CUDA APIs, the process-group backend, autocast and scalers, streams, kernels and CUDA-only
/// libraries, memory and RNG calls, compile options a TPU refuses, ops TorchTPU lacks, and the
/// PyTorch/XLA APIs. Advice (performance, precision, dynamic shapes, profiling, environment) is
/// not a block.
pub const BLOCKING_FAMILIES: &[&str] = &[
    "DEV", "CUD", "DST", "AMP", "STM", "KRN", "LIB", "MEM", "RNG", "ATN", "OPS", "CMP", "XLA",
    "XM", "XMP", "XPL", "XR", "XS", "XU", "XAMP", "XMET",
];

/// A finding the migration left (no fix, or an unsafe one not applied).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Left {
    pub rule: String,
    pub line: usize,
    pub message: String,
}

/// What the migration did to one file.
#[derive(Debug, Clone, Default)]
pub struct FileState {
    pub path: PathBuf,
    /// The file runs as a program (an entry script).
    pub program: bool,
    /// Fixes of blocking families applied.
    pub applied: usize,
    /// Findings of blocking families left.
    pub left: Vec<Left>,
    /// The file's text as the user gave it (for its imports).
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to port.
    NoCuda,
    /// Every CUDA reference of the program was ported.
    Whole,
    /// Findings are left: on a TPU the program still meets them (reported as PRG001). `partly`:
    /// some fixes were applied too.
    Blocked { partly: bool },
}

#[derive(Debug, Clone)]
pub struct Program {
    pub entry: PathBuf,
    /// The entry script and the project modules it imports (that this run migrated).
    pub files: Vec<PathBuf>,
    pub verdict: Verdict,
    /// What blocks it, by file, in line order.
    pub blocks: Vec<(PathBuf, Left)>,
}

impl Program {
    /// The one-line reason PRG001 gives on the entry script.
    pub fn reason(&self, root: &dyn Fn(&Path) -> String) -> String {
        let n = self.blocks.len();
        let shown: Vec<String> = self
            .blocks
            .iter()
            .take(4)
            .map(|(p, l)| match l.line {
                0 => format!("{} {}", root(p), l.rule),
                n => format!("{}:{n} {}", root(p), l.rule),
            })
            .collect();
        let more = if n > shown.len() {
            format!(" and {} more", n - shown.len())
        } else {
            String::new()
        };
        let what = match self.verdict {
            Verdict::Blocked { partly: true } => "partly ported",
            _ => "not ported",
        };
        format!(
            "{what}: on a TPU it still meets {n} CUDA reference{} left for manual work ({}{more})",
            if n == 1 { "" } else { "s" },
            shown.join(", ")
        )
    }
}

/// The programs of a run: one per entry script, with its project modules among `files`.
pub fn judge(files: &[FileState]) -> Vec<Program> {
    let by_path: BTreeMap<&Path, &FileState> =
        files.iter().map(|f| (f.path.as_path(), f)).collect();
    let mut out = vec![];
    for entry in files.iter().filter(|f| f.program) {
        let members = members(entry, &by_path);
        let applied: usize = members.iter().map(|f| f.applied).sum();
        let mut blocks: Vec<(PathBuf, Left)> = members
            .iter()
            .flat_map(|f| f.left.iter().map(|l| (f.path.clone(), l.clone())))
            .collect();
        blocks.sort();
        let verdict = match (applied, blocks.is_empty()) {
            (0, true) => Verdict::NoCuda,
            (_, true) => Verdict::Whole,
            (n, false) => Verdict::Blocked { partly: n > 0 },
        };
        out.push(Program {
            entry: entry.path.clone(),
            files: members.iter().map(|f| f.path.clone()).collect(),
            verdict,
            blocks,
        });
    }
    out
}

/// The entry script and the project modules it reaches through top-level imports, among the
/// files of the run.
fn members<'a>(
    entry: &'a FileState,
    by_path: &BTreeMap<&Path, &'a FileState>,
) -> Vec<&'a FileState> {
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut queue = VecDeque::from([entry]);
    let mut out = vec![];
    seen.insert(entry.path.clone());
    while let Some(f) = queue.pop_front() {
        out.push(f);
        for dep in project_imports(&f.path, &f.text) {
            if seen.insert(dep.clone())
                && let Some(d) = by_path.get(dep.as_path())
            {
                queue.push_back(d);
            }
        }
    }
    out
}

/// A top-level import (`from model import GPT`, `from .layers import x`, `import model`), with
/// the names a `from` import takes on its first line.
static IMPORTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^(?:from (\.*)([\w.]*) import ([^\n#]*)|import ([\w.]+))").unwrap()
});

/// The project modules the file at `path` imports at top level (its text `text`): files beside
/// it, as `python script.py` finds them, or in the packages of its tree.
pub fn project_imports(path: &Path, text: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut add = |file: Option<PathBuf>| {
        if let Some(file) = file
            && file != path
            && !out.contains(&file)
        {
            out.push(file);
        }
    };
    for m in IMPORTED.captures_iter(text) {
        let (level, module, names) = match (m.get(2), m.get(4)) {
            (Some(from), _) => (
                m[1].len(),
                from.as_str(),
                m.get(3).map_or("", |n| n.as_str()),
            ),
            (None, Some(import)) => (0, import.as_str(), ""),
            _ => continue,
        };
        let segments: Vec<&str> = module.split('.').filter(|s| !s.is_empty()).collect();
        // `from pkg import mod`: the submodule itself where there is one, else the module.
        let mut submodules = false;
        for name in names.split(',') {
            let name = name.trim_matches(|c: char| c == '(' || c == ')' || c.is_whitespace());
            let name = name.split_whitespace().next().unwrap_or("");
            if name.is_empty()
                || name == "*"
                || !name.chars().all(|c| c.is_alphanumeric() || c == '_')
            {
                continue;
            }
            let mut sub = segments.clone();
            sub.push(name);
            if let Some(f) = module_path(path, level, &sub) {
                submodules = true;
                add(Some(f));
            }
        }
        if !submodules {
            add(module_path(path, level, &segments));
        }
    }
    out
}

/// The file of a module imported by the file at `path`: beside it, or in the tree's packages.
fn module_path(path: &Path, level: usize, segments: &[&str]) -> Option<PathBuf> {
    if level == 0 && !segments.is_empty() {
        let dir = path.parent()?;
        let base = segments.iter().fold(dir.to_path_buf(), |p, s| p.join(s));
        let file = base.with_extension("py");
        if file.is_file() {
            return Some(file);
        }
    }
    super::neighbours::module_in_tree(path, level, segments)
}

/// What the migration did to one file, as [`judge`] needs it: the fixes of blocking families
/// applied, and the findings of blocking families left at the trust level `required` (no fix, or
/// one below it).
pub fn state_of(
    path: &Path,
    text: &str,
    outcome: &super::Outcome,
    rules: &super::RuleSet,
    required: super::rules::FixClass,
) -> FileState {
    let blocking = |rule: &str| {
        let family: String = rule
            .chars()
            .take_while(|c| c.is_ascii_alphabetic())
            .collect();
        BLOCKING_FAMILIES.contains(&family.as_str())
    };
    let applied = outcome
        .applied
        .iter()
        .filter(|(r, _)| blocking(r))
        .map(|(_, n)| n)
        .sum();
    let index = super::render::LineIndex::new(text);
    // Findings without a fix at this trust level, as many per rule as remain on the result (a
    // finding another fix rewrote away is absorbed, not left).
    let mut quota = outcome.remaining.clone();
    let left = outcome
        .diagnostics
        .iter()
        .filter(|d| {
            let id = &rules.rules[d.rule].id;
            let unfixed = d.fix.as_ref().is_none_or(|f| f.applicability < required);
            let q = quota.get_mut(id);
            match q {
                Some(n) if unfixed && blocking(id) && *n > 0 => {
                    *n -= 1;
                    true
                }
                _ => false,
            }
        })
        .map(|d| Left {
            rule: rules.rules[d.rule].id.clone(),
            line: index.line_col(text, d.range.start()).0,
            message: d.message.clone(),
        })
        .collect::<Vec<_>>();
    // What remains beyond the original findings was revealed by a fix (a nested use): left too.
    let mut left = left;
    for (id, n) in quota {
        if blocking(&id) {
            for _ in 0..n {
                left.push(Left {
                    rule: id.clone(),
                    line: 0,
                    message: "revealed by another fix".into(),
                });
            }
        }
    }
    FileState {
        path: path.to_path_buf(),
        program: outcome.program,
        applied,
        left,
        text: text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left(rule: &str, line: usize) -> Left {
        Left {
            rule: rule.into(),
            line,
            message: format!("{rule} message"),
        }
    }

    #[test]
    fn a_program_is_ported_whole_or_its_blocks_are_named() {
        let d = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let train_text = "import torch\nfrom model import GPT\nfrom utils import log\n\nif __name__ == '__main__':\n    pass\n";
        let train = write("train.py", train_text);
        let model = write("model.py", "import torch\nfrom layers import Block\n");
        let layers = write("layers.py", "import torch\n");
        let utils = write("utils.py", "import os\n");
        let other = write("other.py", "import torch\n");
        let files = vec![
            FileState {
                path: train.clone(),
                program: true,
                applied: 2,
                left: vec![],
                text: train_text.into(),
            },
            FileState {
                path: model.clone(),
                applied: 1,
                text: std::fs::read_to_string(&model).unwrap(),
                ..Default::default()
            },
            FileState {
                path: layers.clone(),
                left: vec![left("DST001", 9), left("AMP002", 3)],
                text: std::fs::read_to_string(&layers).unwrap(),
                ..Default::default()
            },
            FileState {
                path: utils.clone(),
                text: "import os\n".into(),
                ..Default::default()
            },
            FileState {
                path: other.clone(),
                program: true,
                applied: 1,
                left: vec![],
                text: "import torch\n".into(),
            },
        ];
        let programs = judge(&files);
        assert_eq!(programs.len(), 2);
        let p = &programs[0];
        assert_eq!(p.entry, train);
        assert_eq!(p.files, vec![train.clone(), model, utils, layers.clone()]);
        assert_eq!(p.verdict, Verdict::Blocked { partly: true });
        let name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(
            p.reason(&name),
            "partly ported: on a TPU it still meets 2 CUDA references left for manual work (layers.py:3 AMP002, layers.py:9 DST001)"
        );
        assert_eq!(programs[1].verdict, Verdict::Whole);
    }

    #[test]
    fn imports_resolve_beside_the_script_and_in_packages() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("pkg/sub")).unwrap();
        for f in [
            "pkg/__init__.py",
            "pkg/sub/__init__.py",
            "pkg/sub/net.py",
            "helper.py",
        ] {
            std::fs::write(d.path().join(f), "").unwrap();
        }
        let script = d.path().join("pkg/sub/train.py");
        let text = "from .net import Net\nimport helper\nfrom pkg.sub import net\nimport torch\n";
        let found = project_imports(&script, text);
        assert_eq!(found, vec![d.path().join("pkg/sub/net.py")]);
        let top = d.path().join("run.py");
        assert_eq!(
            project_imports(&top, "import helper\nfrom pkg.sub.net import Net\n"),
            vec![d.path().join("helper.py"), d.path().join("pkg/sub/net.py")]
        );
    }
}
