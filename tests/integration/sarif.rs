//! The machine formats of `tpuport migrate`: `--output-format sarif` is valid against the
//! official SARIF 2.1.0 schema (tests/data/sarif-schema-2.1.0.json, checked by `jsonschema` from
//! the tools venv of scripts/bootstrap-tools), names the rules its results use, and its fixes
//! rewrite the file as `--write` does; `--output-format github` prints one escaped workflow
//! command per finding.
//!
//! The tools venv: `TPUPORT_TOOLS_VENV` (scripts/test exports it), else scripts/bootstrap-tools
//! is run here. Without it the schema test fails under CI (`CI` set, and not to `false` or `0`)
//! or with `TPUPORT_REQUIRE_TOOLS=1`, and skips elsewhere, saying so on stderr.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

use crate::common::{self, repo};

/// Rules of the test's own, so that the exact output does not follow the built-in rules' text:
/// a safe fix whose message and advice need escaping, and a manual finding.
const RULES: &str = r#"
family = "ESC"
title = "Rules for the output-format tests"

[[rule]]
id = "ESC001"
name = "sync-helper"
message = "`{qualified}` waits on CUDA: 100%, always"
advice = """
Use the TorchTPU-aware helper,
or call torch.accelerator.synchronize()."""
fix = "safe"
match.call = ["ourlib.cuda_sync"]
action = { to = "ourlib.accel_sync" }

[[rule]]
id = "ESC002"
name = "cuda-only"
message = "`{qualified}` has no TPU form"
fix = "manual"
match.call = ["ourlib.cuda_only"]
"#;

const SOURCE: &str = "import ourlib\n\n# é: one character, two bytes\nx = \"é\"; ourlib.cuda_sync()\nourlib.cuda_only(x)\n";

/// A folder with the rules (in `rules/`) and `SOURCE` as a file whose name needs escaping.
fn fixture() -> (tempfile::TempDir, &'static str) {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("rules")).unwrap();
    fs::write(dir.path().join("rules/ESC.toml"), RULES).unwrap();
    let name = "t,1:%.py";
    fs::write(dir.path().join(name), SOURCE).unwrap();
    (dir, name)
}

fn migrate(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("tpuport")
        .unwrap()
        .current_dir(dir)
        .args(["migrate", "--rules", "rules", "--select", "ESC"])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn github_annotations_are_one_escaped_line_per_finding() {
    let (dir, name) = fixture();
    let out = migrate(dir.path(), &["--output-format", "github", name]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = concat!(
        "::notice file=t%2C1%3A%25.py,line=4,col=10,endLine=4,endColumn=28,title=ESC001::",
        "`ourlib.cuda_sync` waits on CUDA: 100%25, always [fix: tpuport migrate --write]",
        "%0Ahelp: Use the TorchTPU-aware helper,%0Aor call torch.accelerator.synchronize().\n",
        "::warning file=t%2C1%3A%25.py,line=5,col=1,endLine=5,endColumn=20,title=ESC002::",
        "`ourlib.cuda_only` has no TPU form\n",
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), expected);
}

#[test]
fn statistics_refuse_the_sarif_and_github_formats() {
    let (dir, name) = fixture();
    for format in ["sarif", "github"] {
        let out = migrate(
            dir.path(),
            &["--statistics", "--output-format", format, name],
        );
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("--output-format json"), "{err}");
    }
}

#[test]
fn sarif_fixes_rewrite_the_file_as_write_does() {
    let (dir, name) = fixture();
    let out = migrate(dir.path(), &["--output-format", "sarif", name]);
    let log: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "tpuport");
    assert_eq!(run["tool"]["driver"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(run["invocations"][0]["executionSuccessful"], true);
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{run}");
    let (fixed, manual) = (&results[0], &results[1]);
    assert_eq!(
        (&fixed["ruleId"], &fixed["level"]),
        (&"ESC001".into(), &"note".into())
    );
    assert_eq!(
        (&manual["ruleId"], &manual["level"]),
        (&"ESC002".into(), &"warning".into())
    );
    assert!(manual.get("fixes").is_none(), "{manual}");
    let loc = &fixed["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "t%2C1%3A%25.py");
    assert_eq!(
        loc["region"]["startColumn"], 10,
        "columns count characters: {loc}"
    );
    // Apply the replacements (line and column in characters) and compare with --write.
    let mut lines: Vec<String> = SOURCE.split_inclusive('\n').map(String::from).collect();
    let changes = &fixed["fixes"][0]["artifactChanges"][0];
    assert_eq!(changes["artifactLocation"]["uri"], "t%2C1%3A%25.py");
    for r in changes["replacements"].as_array().unwrap().iter().rev() {
        let reg = &r["deletedRegion"];
        let at = |k: &str| reg[k].as_u64().unwrap() as usize;
        assert_eq!(at("startLine"), at("endLine"), "{reg}");
        let line: Vec<char> = lines[at("startLine") - 1].chars().collect();
        let (a, b) = (at("startColumn") - 1, at("endColumn") - 1);
        let new = r["insertedContent"]["text"].as_str().unwrap();
        let mut s: String = line[..a].iter().collect();
        s.push_str(new);
        s.extend(&line[b..]);
        lines[at("startLine") - 1] = s;
    }
    let by_sarif = lines.concat();
    migrate(dir.path(), &["--write", "-q", name]);
    let written = fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(by_sarif, written);
}

const VALIDATE: &str = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
v = cls(schema, format_checker=cls.FORMAT_CHECKER)
bad = 0
for path in sys.argv[2:]:
    for e in v.iter_errors(json.load(open(path))):
        bad += 1
        print(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
sys.exit(1 if bad else 0)
"#;

/// Every rule and result of a log agree: ruleIndex points at the rule of ruleId, the rules are
/// the ones used, each once.
fn check_rules(log: &Value) -> usize {
    let run = &log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    let results = run["results"].as_array().unwrap();
    for r in results {
        let i = r["ruleIndex"].as_u64().unwrap() as usize;
        assert_eq!(rules[i]["id"], r["ruleId"], "{r}");
    }
    for (i, rule) in rules.iter().enumerate() {
        assert!(results.iter().any(|r| r["ruleIndex"] == i), "unused {rule}");
        assert!(
            rule["properties"]["fixClass"].is_string() && rule["properties"]["family"].is_string()
        );
    }
    results.len()
}

#[test]
fn sarif_is_valid_against_the_official_schema() {
    let Some(venv) = common::tools_venv("the SARIF schema test") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Files that fail: not UTF-8, and a syntax error (still migrated outside it).
    fs::write(dir.path().join("latin1.py"), b"x = '\xe9'\nimport torch\n").unwrap();
    fs::write(
        dir.path().join("broken.py"),
        "import torch\nx = torch.zeros(3).cuda(\n",
    )
    .unwrap();
    let mut logs: Vec<PathBuf> = vec![];
    for unsafe_fixes in [false, true] {
        let mut cmd = Command::cargo_bin("tpuport").unwrap();
        cmd.current_dir(repo()).args([
            "migrate",
            "--output-format",
            "sarif",
            "examples",
            "tests/fixtures",
        ]);
        if unsafe_fixes {
            cmd.arg("--unsafe-fixes");
        }
        let out = cmd.arg(dir.path()).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log: Value = serde_json::from_slice(&out.stdout).unwrap();
        let inv = &log["runs"][0]["invocations"][0];
        assert_eq!(inv["executionSuccessful"], false);
        let notes = inv["toolExecutionNotifications"].as_array().unwrap();
        for f in ["latin1.py", "broken.py"] {
            assert!(
                notes
                    .iter()
                    .any(|n| n["level"] == "error"
                        && n["message"]["text"].as_str().unwrap().contains(f)),
                "{f} not in {notes:?}"
            );
        }
        // The same findings as the JSON output.
        let mut json = Command::cargo_bin("tpuport").unwrap();
        json.current_dir(repo()).args([
            "migrate",
            "--output-format",
            "json",
            "examples",
            "tests/fixtures",
        ]);
        if unsafe_fixes {
            json.arg("--unsafe-fixes");
        }
        let json = json.arg(dir.path()).output().unwrap();
        let listed: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(check_rules(&log), listed.as_array().unwrap().len());
        let p = dir.path().join(format!("log-{unsafe_fixes}.sarif"));
        fs::write(&p, &out.stdout).unwrap();
        logs.push(p);
    }
    let (small, name) = fixture();
    let out = migrate(small.path(), &["--output-format", "sarif", name]);
    let p = dir.path().join("small.sarif");
    fs::write(&p, &out.stdout).unwrap();
    logs.push(p);
    let out = Std::new(venv.join("bin/python"))
        .arg("-c")
        .arg(VALIDATE)
        .arg(repo().join("tests/data/sarif-schema-2.1.0.json"))
        .args(&logs)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "not valid SARIF 2.1.0:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
