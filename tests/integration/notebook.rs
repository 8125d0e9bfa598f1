//! Jupyter notebooks in `tpuport migrate`: the CUDA training notebook of tests/data/notebooks/
//! (markdown and raw cells, stream and image outputs, magics, `!pip`, a `%%time` cell, a help
//! line, one source kept as a string) migrates with `--write` so that only code-cell sources
//! change, line by line; findings name the cell; a second run changes nothing; the result is a
//! valid notebook for `nbformat`. A broken notebook is an error naming the file, left as it was.
//!
//! nbformat comes from the tools venv: `TPUPORT_TOOLS_VENV` (scripts/test exports it), else
//! scripts/bootstrap-tools is run here. Without it the validation fails under CI (`CI` set, and
//! not to `false` or `0`) or with `TPUPORT_REQUIRE_TOOLS=1`, and skips elsewhere, saying so.

use std::fs;
use std::path::Path;
use std::process::{Command as Std, Output};

use assert_cmd::Command;
use serde_json::Value;

use crate::common::{self, repo};

const NAME: &str = "train_cuda.ipynb";

/// The fixture, copied into a fresh folder.
fn fixture() -> (tempfile::TempDir, String) {
    let dir = crate::common::project();
    let text = fs::read_to_string(repo().join("tests/data/notebooks").join(NAME)).unwrap();
    fs::write(dir.path().join(NAME), &text).unwrap();
    (dir, text)
}

fn migrate(dir: &Path, args: &[&str]) -> Output {
    Command::cargo_bin("tpuport")
        .unwrap()
        .current_dir(dir)
        .arg("migrate")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The notebook with the sources of its code cells taken out.
fn without_code_sources(text: &str) -> Value {
    let mut v: Value = serde_json::from_str(text).unwrap();
    for c in v["cells"].as_array_mut().unwrap() {
        if c["cell_type"] == "code" {
            c.as_object_mut().unwrap().remove("source");
        }
    }
    v
}

fn sources(text: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(text).unwrap();
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| match &c["source"] {
            Value::String(s) => s.clone(),
            Value::Array(a) => a.iter().map(|l| l.as_str().unwrap()).collect(),
            other => panic!("source {other}"),
        })
        .collect()
}

#[test]
fn only_code_cell_sources_change_and_a_second_run_changes_nothing() {
    let (dir, before) = fixture();
    let out = migrate(dir.path(), &["--write", NAME]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}\n{err}", stdout(&out));
    assert!(!err.contains("error:"), "{err}");
    let after = fs::read_to_string(dir.path().join(NAME)).unwrap();
    assert_ne!(before, after);
    assert_eq!(without_code_sources(&before), without_code_sources(&after));

    // Line by line: only JSON strings of sources changed; the layout is Jupyter's.
    let diff = similar::TextDiff::from_lines(&before, &after);
    for change in diff.iter_all_changes() {
        if change.tag() != similar::ChangeTag::Equal {
            let line = change.value().trim_start();
            assert!(
                line.starts_with('"') && !line.contains("\": ")
                    || line.starts_with("\"source\": \""),
                "a change outside the sources: {line}"
            );
        }
    }
    assert!(after.ends_with("\n}\n"));

    let (old, new) = (sources(&before), sources(&after));
    // Markdown, raw, magic-only and %%time cells are untouched; IPython lines are kept.
    for i in [0, 1, 2, 3, 6, 8, 9, 10] {
        assert_eq!(old[i], new[i], "cell {}", i + 1);
    }
    assert!(
        new[4].starts_with(
            "device = getattr(torch.accelerator.current_accelerator(), \"type\", \"cuda\")\n"
        ),
        "{}",
        new[4]
    );
    assert!(
        new[5].contains("model = Net().to(torch.accelerator.current_accelerator())\n")
            && new[5].ends_with("\nNet?")
    );
    assert!(
        new[7].contains("    torch.accelerator.synchronize()\n"),
        "{}",
        new[7]
    );
    assert!(
        new[7].contains("\n%time torch.cuda.synchronize()\n"),
        "{}",
        new[7]
    );
    assert!(
        new[11].contains("torch.accelerator.empty_cache()"),
        "{}",
        new[11]
    );
    // The source kept as one string stays one string.
    let v: Value = serde_json::from_str(&after).unwrap();
    assert!(v["cells"][11]["source"].is_string());

    // A second run: nothing to change, nothing written.
    let again = migrate(dir.path(), &["--write", NAME]);
    assert_ne!(again.status.code(), Some(2));
    assert_eq!(fs::read_to_string(dir.path().join(NAME)).unwrap(), after);
    assert_eq!(stdout(&migrate(dir.path(), &["--diff", NAME])), "");

    validate_with_nbformat(&dir.path().join(NAME));
}

#[test]
fn findings_name_the_cell_and_the_diff_applies() {
    let (dir, before) = fixture();
    let text = stdout(&migrate(dir.path(), &["--check", "-q", NAME]));
    for want in [
        "train_cuda.ipynb:cell 5:1:10: DEV001 [*]",
        "train_cuda.ipynb:cell 6:11:9: DEV007 [*]",
        "train_cuda.ipynb:cell 8:10:5: CUD007 [*]",
        "train_cuda.ipynb:cell 12:3:1: MEM001 [*]",
    ] {
        assert!(text.contains(want), "{want} not in:\n{text}");
    }
    // Nothing in the %%time cell (7), the magics, or the markdown and raw cells.
    assert!(
        !text.contains(":cell 7:") && !text.contains(":cell 11:"),
        "{text}"
    );

    let json = migrate(dir.path(), &["--output-format", "json", NAME]);
    let diags: Value = serde_json::from_slice(&json.stdout).unwrap();
    let diags = diags.as_array().unwrap();
    assert!(!diags.is_empty());
    // The program finding (PRG001) is about the whole notebook: no cell.
    for d in diags.iter().filter(|d| d["rule"] != "PRG001") {
        assert_eq!(d["path"], NAME);
        let cell = d["cell"].as_u64().unwrap() as usize;
        // The edits are byte offsets into the cell's source.
        let src = &sources(&before)[cell - 1];
        for e in d["edits"].as_array().unwrap() {
            let (s, t) = (e["start"].as_u64().unwrap(), e["end"].as_u64().unwrap());
            assert!(s <= t && t as usize <= src.len(), "{d}");
        }
    }

    // The preview's diff is a patch of the .ipynb file that git applies.
    let patch = stdout(&migrate(dir.path(), &["--diff", NAME]));
    assert!(patch.starts_with("--- a/train_cuda.ipynb\n+++ b/train_cuda.ipynb\n@@"));
    fs::write(dir.path().join("tpu.patch"), &patch).unwrap();
    let git = Std::new("git")
        .current_dir(dir.path())
        .args(["apply", "tpu.patch"])
        .output();
    if let Ok(out) = git {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let patched = fs::read_to_string(dir.path().join(NAME)).unwrap();
        assert!(stdout(&migrate(dir.path(), &["--diff", NAME])).is_empty());
        assert_ne!(patched, before);
    }
}

#[test]
fn notebooks_are_found_in_folders_and_checkpoints_skipped() {
    let (dir, text) = fixture();
    fs::create_dir(dir.path().join(".ipynb_checkpoints")).unwrap();
    fs::write(
        dir.path()
            .join(".ipynb_checkpoints/train_cuda-checkpoint.ipynb"),
        &text,
    )
    .unwrap();
    let out = migrate(dir.path(), &["--check", "-q", "."]);
    let text = stdout(&out);
    assert!(text.contains("train_cuda.ipynb:cell 5:1:10"), "{text}");
    assert!(!text.contains("checkpoint"), "{text}");
}

#[test]
fn a_broken_notebook_is_an_error_and_left_alone() {
    let dir = crate::common::project();
    let bad = "{\n \"cells\": [\n  {\"cell_type\": \"code\", \"source\": [\"x.cuda()\"]\n ]\n}\n";
    let old = "{\"worksheets\": [{\"cells\": []}], \"nbformat\": 3}\n";
    fs::write(dir.path().join("bad.ipynb"), bad).unwrap();
    fs::write(dir.path().join("old.ipynb"), old).unwrap();
    let out = migrate(dir.path(), &["--write", "bad.ipynb", "old.ipynb"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "error: bad.ipynb: not a valid notebook: invalid JSON at line 4 column 2, in cell 1"
        ),
        "{err}"
    );
    assert!(
        err.contains("error: old.ipynb: not a Jupyter notebook (nbformat 4)"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
    assert_eq!(
        fs::read_to_string(dir.path().join("bad.ipynb")).unwrap(),
        bad
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("old.ipynb")).unwrap(),
        old
    );
}

const VALIDATE: &str = "import sys, nbformat\nnbformat.validate(nbformat.read(sys.argv[1], as_version=4))\nprint('valid')\n";

fn validate_with_nbformat(path: &Path) {
    let Some(venv) = common::tools_venv("the nbformat check") else {
        return;
    };
    let out = Std::new(venv.join("bin/python"))
        .args(["-c", VALIDATE])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nbformat rejects the migrated notebook:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
