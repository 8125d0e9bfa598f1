//! A port's unit is a program: an entry script and the project modules it imports. After the
//! migration each program is ported whole, or what still blocks it on a TPU is reported once, on
//! its entry script, with the places (PRG001): a program is never left half-ported in silence.
//! Some advice is about a program too, reported once on its entry script (PERF001: its
//! convolutional networks; PRC008: its float32 matmul precision; the lints in
//! `port::rewrite::lints::programs`).
//!
//! The one program model: [`tree`] says which files are entry scripts ([`tree::is_entry`]) and
//! which package a library module belongs to; [`imports`] follows a file's top-level imports of
//! project modules (beside it, or in the tree's packages). [`judge`] takes what the migration
//! left in each file of a run (the findings of rule families whose code fails or misbehaves on
//! a TPU when it stays: [`BLOCKING_FAMILIES`]) and gives each program its verdict.

pub mod dynamic;
pub mod extensions;
pub mod imports;
mod layout;
pub mod networks;
pub mod tree;

/// Forget what was learnt about the tree's files and programs (the start of a run: `migrate
/// --watch` runs again after a change).
pub fn forget() {
    tree::forget();
    imports::forget();
    extensions::forget();
    networks::forget();
}

use std::collections::BTreeMap;

use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    // The programs' walks go together, so that each file's imports are read once, side by
    // side, for all the programs that reach it.
    let entries: Vec<&FileState> = files.iter().filter(|f| f.program).collect();
    let imports_of = |p: &Path| {
        let f = by_path.get(p)?;
        Some(Arc::new(
            imports::imports_at(p, &f.text, imports::Depth::Anywhere)
                .into_iter()
                .map(|i| i.file)
                .collect::<Vec<_>>(),
        ))
    };
    let heads: Vec<(&Path, &str)> = entries
        .iter()
        .map(|e| (e.path.as_path(), e.text.as_str()))
        .collect();
    let walks = imports::reachable_together(&heads, imports::Depth::Anywhere, &imports_of);
    entries
        .par_iter()
        .zip(walks)
        .map(|(entry, walk)| {
            // The entry script and the project modules it reaches through imports, among the
            // files of the run. Imports at any indentation count: a module a function imports
            // runs when the program calls it (a CLI importing each command's module on
            // demand; set J's tagger ran on the CPU with no finding where only top-level
            // imports were followed).
            let members: Vec<&FileState> = std::iter::once(*entry)
                .chain(
                    walk.iter()
                        .filter_map(|m| by_path.get(m.file.as_path()).copied()),
                )
                .collect();
            let applied: usize = members.iter().map(|f| f.applied).sum();
            let mut blocks: Vec<(PathBuf, Left)> = members
                .iter()
                .flat_map(|f| f.left.iter().map(|l| (f.path.clone(), l.clone())))
                .collect();
            blocks.sort_by(|(p, a), (q, b)| (p, a.line, &a.rule).cmp(&(q, b.line, &b.rule)));
            let verdict = match (applied, blocks.is_empty()) {
                (0, true) => Verdict::NoCuda,
                (_, true) => Verdict::Whole,
                (n, false) => Verdict::Blocked { partly: n > 0 },
            };
            Program {
                entry: entry.path.clone(),
                files: members.iter().map(|f| f.path.clone()).collect(),
                verdict,
                blocks,
            }
        })
        .collect()
}

/// What the migration did to one file, as [`judge`] needs it: the fixes of blocking families
/// applied, and the findings of blocking families left at the trust level `required` (no fix, or
/// one below it).
pub fn state_of(
    path: &Path,
    text: String,
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
    // Lines are only counted where a finding is left (most files have none).
    let index = std::cell::OnceCell::new();
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
            line: index
                .get_or_init(|| super::render::LineIndex::new(&text))
                .line_col(&text, d.range.start())
                .0,
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
        program: tree::is_entry(path, &text),
        applied,
        left,
        text,
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
}
