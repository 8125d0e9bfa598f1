//! Unit tests of notebook migration: cells analysed together, IPython lines kept, the JSON
//! layout kept, locations by cell, refusals.

use super::*;
use serde_json::json;

/// A notebook as Jupyter writes it: sorted keys, one-space indent, a final newline.
fn notebook(cells: Value) -> String {
    let nb = json!({
        "cells": cells,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    });
    let mut buf = vec![];
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(&nb, &mut ser).unwrap();
    String::from_utf8(buf).unwrap() + "\n"
}

fn code(lines: &[&str]) -> Value {
    json!({"cell_type": "code", "execution_count": 1, "id": "c", "metadata": {}, "outputs": [
        {"name": "stdout", "output_type": "stream", "text": ["cuda ok\n"]}
    ], "source": lines})
}

/// A notebook path in a folder of its own: the project around it declares torch 2.11 and has
/// no other modules, so the forms are torch 2.15's alone.
fn alone() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("requirements.txt"), "torch>=2.11\n").unwrap();
    let path = dir.path().join("nb.ipynb");
    (dir, path)
}

fn run(text: &str) -> Migrated {
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let (_dir, path) = alone();
    migrate(&path, text, &rules, &index, Settings::default()).unwrap()
}

/// The notebook with every code cell's source emptied, to compare the rest.
fn without_sources(text: &str) -> Value {
    let mut v: Value = serde_json::from_str(text).unwrap();
    for c in v["cells"].as_array_mut().unwrap() {
        if c["cell_type"] == "code" {
            c["source"] = Value::Null;
        }
    }
    v
}

#[test]
fn code_cells_are_migrated_together_and_the_rest_is_kept() {
    let text = notebook(json!([
        code(&["%matplotlib inline\n", "import torch\n", "!pip install tqdm"]),
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": ["Uses `torch.cuda.synchronize()`"]},
        code(&["x = torch.zeros(3).cuda()\n", "x?\n", "torch.cuda.synchronize()"]),
        code(&["%%time\n", "y = x.cuda()"]),
    ]));
    let m = run(&text);
    assert!(m.refused.is_none(), "{:?}", m.refused);
    let new = m.outcome.output.clone().expect("changed");
    assert_eq!(without_sources(&new), without_sources(&text));
    let v: Value = serde_json::from_str(&new).unwrap();
    assert_eq!(
        v["cells"][0]["source"],
        json!([
            "%matplotlib inline\n",
            "import torch\n",
            "!pip install tqdm"
        ])
    );
    let cell3 = v["cells"][2]["source"].as_array().unwrap();
    assert_eq!(cell3[1], "x?\n");
    assert!(!cell3[0].as_str().unwrap().contains("cuda"), "{cell3:?}");
    assert!(!cell3[2].as_str().unwrap().contains("cuda"), "{cell3:?}");
    assert_eq!(v["cells"][3]["source"], json!(["%%time\n", "y = x.cuda()"]));
    // The diff touches only the changed source lines.
    let diff = render::unified_diff("nb.ipynb", &text, &new);
    let changed: Vec<&str> = diff
        .lines()
        .filter(|l| (l.starts_with('-') || l.starts_with('+')) && !l.starts_with("---"))
        .filter(|l| !l.starts_with("+++"))
        .collect();
    assert_eq!(changed.len(), 4, "{diff}");
    // Findings name the cell; a second run changes nothing.
    let locs: Vec<String> = m
        .outcome
        .diagnostics
        .iter()
        .map(|d| m.location(d.range.start()))
        .collect();
    assert!(locs.contains(&"cell 3:1:5".to_string()), "{locs:?}");
    assert!(locs.iter().all(|l| l.starts_with("cell 3:")), "{locs:?}");
    assert!(run(&new).outcome.output.is_none());
}

#[test]
fn added_imports_go_to_the_cell_with_the_imports() {
    let text = notebook(json!([
        code(&["import os\n", "from torch import cuda"]),
        code(&["cuda.synchronize()"]),
    ]));
    let m = run(&text);
    let new = m.outcome.output.expect("changed");
    let v: Value = serde_json::from_str(&new).unwrap();
    let first = v["cells"][0]["source"].as_array().unwrap();
    assert!(
        first
            .iter()
            .any(|l| l == "import torch\n" || l == "import torch"),
        "{first:?}"
    );
    assert_eq!(
        v["cells"][1]["source"],
        json!(["torch.accelerator.synchronize()"])
    );
}

#[test]
fn text_and_json_findings_name_the_cell() {
    let text = notebook(json!([
        {"cell_type": "raw", "id": "r", "metadata": {}, "source": []},
        code(&["import torch\n", "%load_ext autoreload\n", "t = torch.ones(2, device=\"cuda\")"]),
    ]));
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let view = View {
        json: false,
        findings: true,
        diff: true,
        show_source: true,
    };
    let (_dir, path) = alone();
    let path = path.as_path();
    let r = process(
        path,
        "nb.ipynb",
        &text,
        &rules,
        &index,
        Settings::default(),
        view,
    );
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert!(r.text.contains("nb.ipynb:cell 2:3:"), "{}", r.text);
    assert!(
        r.text.contains("--- a/nb.ipynb\n+++ b/nb.ipynb\n"),
        "{}",
        r.text
    );
    let json_view = View { json: true, ..view };
    // The literal port edits inside the string (the portable one replaces it whole).
    let literal = Settings {
        to: crate::port::Target::Tpu,
        ..Settings::default()
    };
    let r = process(path, "nb.ipynb", &text, &rules, &index, literal, json_view);
    assert!(r.text.is_empty());
    let d = &r.json[0];
    assert_eq!((d["cell"].as_u64(), d["line"].as_u64()), (Some(2), Some(3)));
    // Edits are offsets into the cell's source as the notebook holds it.
    let source = "import torch\n%load_ext autoreload\nt = torch.ones(2, device=\"cuda\")";
    let e = &d["edits"][0];
    let (s, t) = (
        e["start"].as_u64().unwrap() as usize,
        e["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(&source[s - 1..t + 1], "\"cuda\"");
}

#[test]
fn bad_notebooks_are_errors_and_other_languages_are_skipped() {
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let view = View {
        json: false,
        findings: true,
        diff: true,
        show_source: true,
    };
    let r = process(
        Path::new("bad.ipynb"),
        "bad.ipynb",
        "{\"cells\": [}",
        &rules,
        &index,
        Settings::default(),
        view,
    );
    assert!(r.outcome.is_none());
    let msg = r.issues[0].to_string();
    assert!(
        msg.starts_with("bad.ipynb: not a valid notebook: invalid JSON at line 1"),
        "{msg}"
    );
    assert!(msg.ends_with("nothing was written"), "{msg}");
    let r_text = "{\"cells\": [{\"cell_type\": \"code\", \"source\": \"x.cuda()\"}], \"metadata\": {\"kernelspec\": {\"language\": \"R\"}}}";
    let m = run(r_text);
    assert!(m.outcome.skipped && m.outcome.output.is_none());
}

#[test]
fn a_syntax_error_is_located_in_its_cell() {
    let text = notebook(json!([
        code(&["import torch"]),
        code(&["def f(:\n", "    pass"]),
        code(&["torch.cuda.synchronize()"]),
    ]));
    let m = run(&text);
    let e = m.outcome.syntax_errors.first().expect("a syntax error");
    assert!(m.location(e.range.start()).starts_with("cell 2:1:"));
}

/// Found by the fuzz harness (target notebook): list items that do not split at newlines, as
/// many as the lines (`["m.cuda()\n#", " note\n"]`), were taken for one line each, and writing
/// the changed line back lost the text after the first newline (`#`); a second run then
/// changed the notebook again.
#[test]
fn items_that_are_not_one_line_each_keep_their_text() {
    let text = notebook(json!([
        code(&["import torch\n"]),
        code(&["m = torch.nn.Linear(2, 2).cuda()\n#", " a note\n"])
    ]));
    let m = run(&text);
    let out = m.outcome.output.expect("migrated");
    let v: Value = serde_json::from_str(&out).unwrap();
    let source: String = v["cells"][1]["source"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        source,
        "m = torch.nn.Linear(2, 2).to(torch.accelerator.current_accelerator())\n# a note\n"
    );
    assert!(run(&out).outcome.output.is_none());
}
