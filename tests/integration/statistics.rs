//! What `tpuport migrate` reports, beyond the findings themselves. `--statistics` adds up: per
//! rule, family and in total, found + revealed = fixed + left + absorbed, the share converted is
//! (fixed + absorbed) / (found + revealed), and found is the number of findings listed, on the
//! bundled examples and the rule fixtures, with and without --unsafe-fixes (bench/review.sh
//! checks the same on the real-code corpus). A dangling symlink is a warning; repetitive
//! findings are grouped in the text output only.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use crate::common::{self, repo};

fn tpuport() -> Command {
    Command::cargo_bin("tpuport").unwrap()
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn migrate_json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .current_dir(repo())
        .args(["migrate", "--output-format", "json", "--quiet"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn n(row: &Value, k: &str) -> u64 {
    row[k]
        .as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {row}"))
}

/// Every row adds up; returns found per rule.
fn check_rows(stats: &Value) -> BTreeMap<String, u64> {
    let rows = stats["rules"].as_array().unwrap().iter();
    let fams = stats["families"].as_array().unwrap().iter();
    let mut found = BTreeMap::new();
    for row in rows.clone().chain(fams).chain([&stats["total"]]) {
        assert_eq!(
            n(row, "found") + n(row, "revealed"),
            n(row, "fixed") + n(row, "left") + n(row, "absorbed"),
            "does not add up: {row}"
        );
        // The share converted: (fixed + absorbed) / (found + revealed), to one decimal.
        let all = n(row, "found") + n(row, "revealed");
        let done = n(row, "fixed") + n(row, "absorbed");
        match row["converted_percent"].as_f64() {
            Some(p) => {
                let exact = done as f64 * 100.0 / all as f64;
                assert!(
                    (p - exact).abs() <= 0.1 && (0.0..=100.0).contains(&p),
                    "{row}"
                );
                assert_eq!(p == 100.0, done == all, "{row}");
            }
            None => assert_eq!(all, 0, "{row}"),
        }
    }
    for row in rows {
        found.insert(row["name"].as_str().unwrap().to_string(), n(row, "found"));
    }
    found
}

#[test]
fn statistics_add_up_on_examples_and_fixtures() {
    for unsafe_fixes in [false, true] {
        let mut args = vec!["examples", "tests/fixtures"];
        if unsafe_fixes {
            args.push("--unsafe-fixes");
        }
        let listed = migrate_json(&args);
        let mut per_rule: BTreeMap<String, u64> = BTreeMap::new();
        for d in listed.as_array().unwrap() {
            *per_rule
                .entry(d["rule"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        args.push("--statistics");
        let stats = migrate_json(&args);
        let found = check_rows(&stats);
        assert!(n(&stats["total"], "fixed") > 0, "{stats}");
        // found counts exactly the findings listed; rules with only revealed findings show 0.
        let found: BTreeMap<String, u64> = found.into_iter().filter(|(_, v)| *v > 0).collect();
        assert_eq!(found, per_rule, "unsafe_fixes={unsafe_fixes}");
    }
}

#[test]
fn a_retired_torch_xla_import_is_a_revealed_finding_fixed() {
    // `import torch_xla` is removed (XLA001's fix) once the fix of `xm.mark_step()` leaves the
    // file without any torch_xla use: it was not a finding of the input.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("train.py");
    fs::write(
        &f,
        "import torch_xla\nimport torch_xla.core.xla_model as xm\n\ndef step():\n    xm.mark_step()\n",
    )
    .unwrap();
    let stats = migrate_json(&[f.to_str().unwrap(), "--statistics"]);
    check_rows(&stats);
    let row = stats["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "XLA001")
        .unwrap_or_else(|| panic!("no XLA001 row: {stats}"));
    assert_eq!(
        (n(row, "found"), n(row, "revealed"), n(row, "fixed")),
        (0, 1, 1),
        "{row}"
    );
}

#[test]
fn the_text_table_names_every_column() {
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .current_dir(repo())
        .args(["migrate", "--statistics", "examples/cuda"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let header = text.lines().next().unwrap();
    for col in [
        "rule", "found", "revealed", "fixed", "left", "absorbed", "fix",
    ] {
        assert!(header.split_whitespace().any(|w| w == col), "{header}");
    }
    assert!(
        text.contains("found + revealed = fixed + left + absorbed"),
        "{text}"
    );
    // The family table and the total carry the share converted, as a percentage.
    let family = text.lines().find(|l| l.starts_with("family")).unwrap();
    assert!(family.ends_with(" converted"), "{family}");
    let total = text.lines().find(|l| l.starts_with("total")).unwrap();
    assert!(total.ends_with('%'), "{total}");
    assert!(
        text.contains("converted = (fixed + absorbed) / (found + revealed)"),
        "{text}"
    );
}

#[cfg(unix)]
#[test]
fn a_dangling_symlink_in_a_walked_folder_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "clean.py", "import torch\nx = torch.zeros(3)\n");
    std::os::unix::fs::symlink("gone.py", d.join("link.py")).unwrap();
    let assert = tpuport()
        .args(["migrate", "--check", d.to_str().unwrap()])
        .assert()
        .code(0);
    let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("warning: ")
            && err.contains("link.py: dangling symbolic link")
            && err.contains("gone.py"),
        "{err}"
    );
    assert!(err.contains("0 with errors"), "{err}");
    // --quiet hides warnings like the summary; the exit code is the same.
    tpuport()
        .args(["migrate", "--check", "-q", d.to_str().unwrap()])
        .assert()
        .code(0)
        .stderr("");
}

#[test]
fn repetitive_findings_are_grouped_in_text_but_not_in_quiet_or_json() {
    let dir = tempfile::tempdir().unwrap();
    let calls: String = (1..=7).map(|i| format!("foo(\"cuda\", {i})\n")).collect();
    let f = write(dir.path(), "many.py", format!("import torch\n{calls}"));
    let f = f.to_str().unwrap();
    let out = tpuport().args(["migrate", f]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches(": DEV017 ").count(), 3, "{text}");
    assert!(
        text.contains(
            "many.py: … and 4 more DEV017 with this message in this file (lines 5, 6, 7, 8)"
        ),
        "{text}"
    );
    // Seven DEV017, and the program's PRG001 (a loose script nothing ported).
    let quiet = tpuport().args(["migrate", "-q", f]).output().unwrap();
    let quiet = String::from_utf8(quiet.stdout).unwrap();
    assert_eq!(
        quiet.lines().filter(|l| l.contains(": DEV017 ")).count(),
        7,
        "{quiet}"
    );
    assert_eq!(quiet.lines().count(), 8, "{quiet}");
    let json = tpuport()
        .args(["migrate", "--output-format", "json", f])
        .output()
        .unwrap();
    assert_eq!(common::diagnostic_lines(&json.stdout).len(), 8);
}
