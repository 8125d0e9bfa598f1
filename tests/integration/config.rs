//! Suppression comments (`# noqa`, `# tpuport: ignore-file`) and configuration files
//! (`[tool.tpuport]` in pyproject.toml, `--config`, `--isolated`), through the real binary on
//! temporary folders.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn tpuport(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("tpuport").unwrap();
    c.current_dir(dir);
    c
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&p, text).unwrap();
    p
}

const DEVICES: &str = "import torch\nx = torch.zeros(3, device=\"cuda\")\ny = torch.ones(3, device=\"cuda\")\ntorch.cuda.synchronize()\n";

#[test]
fn ignore_file_leaves_the_file_untouched() {
    let dir = crate::common::project();
    let text =
        format!("# Copyright 2026\n# tpuport: ignore-file  (CUDA-only benchmark)\n{DEVICES}");
    let f = write(dir.path(), "bench.py", &text);
    tpuport(dir.path())
        .args(["migrate", "--write", "."])
        .assert()
        .code(0)
        .stderr(predicate::str::contains(
            "skipped by `# tpuport: ignore-file`: 1",
        ));
    assert_eq!(fs::read_to_string(&f).unwrap(), text);
}

#[test]
fn ignore_file_with_codes_silences_only_those_rules() {
    let dir = crate::common::project();
    let f = write(
        dir.path(),
        "a.py",
        &format!("# tpuport: ignore-file[DEV]\n{DEVICES}"),
    );
    tpuport(dir.path())
        .args(["migrate", "--write", "a.py"])
        .assert()
        .code(0);
    let out = fs::read_to_string(&f).unwrap();
    assert!(out.contains("device=\"cuda\""), "{out}");
    assert!(out.contains("torch.accelerator.synchronize()"), "{out}");
}

#[test]
fn noqa_keeps_its_line_and_the_next_line_is_rewritten() {
    let dir = crate::common::project();
    let f = write(
        dir.path(),
        "a.py",
        "import torch\nx = torch.zeros(3, device=\"cuda\")  # noqa: DEV016\ny = torch.ones(3, device=\"cuda\")\ntorch.cuda.synchronize()  # noqa\nz = torch.ones(3, device=\"cuda\")  # noqa: E501\n",
    );
    tpuport(dir.path())
        .args(["migrate", "--output-format", "json", "a.py"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("\"line\": 3"))
        .stdout(predicate::str::contains("\"line\": 5"))
        .stdout(predicate::str::contains("\"line\": 2").not())
        .stdout(predicate::str::contains("\"line\": 4").not());
    tpuport(dir.path())
        .args(["migrate", "--write", "a.py"])
        .assert()
        .code(0);
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        "import torch\nx = torch.zeros(3, device=\"cuda\")  # noqa: DEV016\ny = torch.ones(3, device=torch.accelerator.current_accelerator())\ntorch.cuda.synchronize()  # noqa\nz = torch.ones(3, device=torch.accelerator.current_accelerator())  # noqa: E501\n"
    );
}

#[test]
fn family_prefix_and_tpuport_noqa() {
    let dir = crate::common::project();
    let f = write(
        dir.path(),
        "a.py",
        "import torch\nx = torch.zeros(3, device=\"cuda\")  # tpuport: noqa: DEV\ntorch.cuda.synchronize()  # noqa: D, CUD9\n",
    );
    tpuport(dir.path())
        .args(["migrate", "--write", "a.py"])
        .assert()
        .code(0);
    // `DEV` covers DEV016; `D` (another linter's family) and `CUD9` do not cover CUD007.
    assert_eq!(
        fs::read_to_string(&f).unwrap(),
        "import torch\nx = torch.zeros(3, device=\"cuda\")  # tpuport: noqa: DEV\ntorch.accelerator.synchronize()  # noqa: D, CUD9\n"
    );
}

#[test]
fn pyproject_ignore_is_respected_and_select_on_the_command_line_wins() {
    let dir = crate::common::project();
    write(
        dir.path(),
        "pyproject.toml",
        "[project]\nname = \"demo\"\n\n[tool.tpuport]\nignore = [\"DEV\"]\n",
    );
    write(dir.path(), "src/a.py", DEVICES);
    // From a subfolder: the file is found upward from the path.
    tpuport(&dir.path().join("src"))
        .args(["migrate", "--output-format", "json", "a.py"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("CUD007"))
        .stdout(predicate::str::contains("DEV016").not());
    tpuport(dir.path())
        .args([
            "migrate",
            "--output-format",
            "json",
            "--select",
            "DEV",
            "src",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("DEV016"))
        .stdout(predicate::str::contains("CUD007").not());
    tpuport(dir.path())
        .args(["migrate", "--output-format", "json", "--isolated", "src"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("DEV016"))
        .stdout(predicate::str::contains("CUD007"));
}

#[test]
fn explicit_config_file() {
    let dir = crate::common::project();
    write(dir.path(), "a.py", DEVICES);
    write(dir.path(), "ci/tpuport.toml", "select = [\"CUD\"]\n");
    tpuport(dir.path())
        .args([
            "migrate",
            "--output-format",
            "json",
            "--config",
            "ci/tpuport.toml",
            "a.py",
        ])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("CUD007"))
        .stdout(predicate::str::contains("DEV016").not());
    tpuport(dir.path())
        .args(["migrate", "--config", "missing.toml", "a.py"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("missing.toml: cannot read"));
}

#[test]
fn exclude_patterns_skip_paths_while_walking() {
    let dir = crate::common::project();
    write(
        dir.path(),
        "pyproject.toml",
        "[tool.tpuport]\nexclude = [\"vendor/\", \"*_pb2.py\"]\n",
    );
    write(dir.path(), "train.py", DEVICES);
    write(dir.path(), "vendor/lib.py", DEVICES);
    write(dir.path(), "proto/msg_pb2.py", DEVICES);
    tpuport(dir.path())
        .args(["migrate", "--check", "."])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("train.py"))
        .stdout(predicate::str::contains("vendor").not())
        .stdout(predicate::str::contains("msg_pb2").not())
        .stderr(predicate::str::contains("1 files scanned"));
    // A file named on the command line is always taken, as with ruff.
    tpuport(dir.path())
        .args(["migrate", "--check", "vendor/lib.py"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("vendor/lib.py"));
}

#[test]
fn unsafe_fixes_and_rules_from_the_file() {
    let dir = crate::common::project();
    write(
        dir.path(),
        "a.py",
        "import torch\ntorch.cuda.manual_seed(0)\nwith torch.cuda.stream(s):\n    pass\n",
    );
    tpuport(dir.path())
        .args(["migrate", "--check", "."])
        .assert()
        .stderr(predicate::str::contains("2 unsafe fixes hidden"));
    write(dir.path(), "tpuport.toml", "unsafe-fixes = true\n");
    tpuport(dir.path())
        .args(["migrate", "--check", "."])
        .assert()
        .stderr(predicate::str::contains("unsafe fixes hidden").not());
    tpuport(dir.path())
        .args(["migrate", "--check", "--no-unsafe-fixes", "."])
        .assert()
        .stderr(predicate::str::contains("2 unsafe fixes hidden"));
    write(dir.path(), "tpuport.toml", "rules = [\"nowhere\"]\n");
    tpuport(dir.path())
        .args(["migrate", "--check", "."])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("nowhere"));
}

#[test]
fn a_bad_key_is_an_error_naming_the_file_line_and_valid_keys() {
    let dir = crate::common::project();
    write(
        dir.path(),
        "pyproject.toml",
        "[project]\nname = \"demo\"\n\n[tool.tpuport]\nselect = [\"DEV\"]\nunsafe_fixes = true\n",
    );
    write(dir.path(), "a.py", DEVICES);
    tpuport(dir.path())
        .args(["migrate", "a.py"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pyproject.toml:6:"))
        .stderr(predicate::str::contains("unknown field `unsafe_fixes`"))
        .stderr(predicate::str::contains("`unsafe-fixes`"))
        .stderr(predicate::str::contains("--isolated"));
    write(
        dir.path(),
        "pyproject.toml",
        "[tool.tpuport]\nselect = \"DEV\n",
    );
    tpuport(dir.path())
        .args(["migrate", "a.py"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pyproject.toml:2:"));
    write(
        dir.path(),
        "pyproject.toml",
        "[tool.tpuport]\nignore = [\"NOPE\"]\n",
    );
    tpuport(dir.path())
        .args(["migrate", "a.py"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no rule matches `NOPE`"));
    // --isolated reads no file at all.
    tpuport(dir.path())
        .args(["migrate", "--isolated", "a.py"])
        .assert()
        .code(1);
}
