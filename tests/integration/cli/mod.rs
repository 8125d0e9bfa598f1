//! End-to-end tests of `tpuport migrate` and `tpuport rule`, through the real binary.
//! One module per concern; each test builds its own folder of inputs.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use predicates::prelude::*;

fn tpuport() -> Command {
    Command::cargo_bin("tpuport").unwrap()
}

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap();
    }
    fs::write(&p, text).unwrap();
    p
}

const CUDA_SCRIPT: &str = "import torch\n\ndef main():\n    torch.cuda.synchronize()\n    x = torch.zeros(3).cuda()\n    return x\n";

mod modes {
    use super::*;

    #[test]
    fn preview_shows_findings_and_diff_writes_nothing() {
        let dir = crate::common::project();
        let f = write(dir.path(), "train.py", CUDA_SCRIPT);
        tpuport()
            .args(["migrate", f.to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("CUD007 [*]"))
            .stdout(predicate::str::contains(
                "+    torch.accelerator.synchronize()",
            ))
            .stderr(predicate::str::contains("1 would change"));
        assert_eq!(fs::read_to_string(&f).unwrap(), CUDA_SCRIPT);
    }

    #[test]
    fn check_exits_0_when_clean_and_1_on_findings() {
        let dir = crate::common::project();
        let clean = write(
            dir.path(),
            "clean.py",
            "import torch\nx = torch.zeros(1).to('tpu')\n",
        );
        tpuport()
            .args(["migrate", "--check", clean.to_str().unwrap()])
            .assert()
            .code(0);
        let dirty = write(dir.path(), "dirty.py", CUDA_SCRIPT);
        tpuport()
            .args(["migrate", "--check", dirty.to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("CUD007"))
            .stdout(predicate::str::contains("+++").not());
    }

    #[test]
    fn diff_is_a_patch_git_can_apply() {
        let dir = crate::common::project();
        write(dir.path(), "train.py", CUDA_SCRIPT);
        let out = tpuport()
            .current_dir(dir.path())
            .args(["migrate", "--diff", "train.py"])
            .assert()
            .code(1)
            .get_output()
            .stdout
            .clone();
        let patch = String::from_utf8(out).unwrap();
        assert!(
            patch.starts_with("--- a/train.py\n+++ b/train.py\n"),
            "{patch}"
        );
        assert!(!patch.contains("CUD007"), "--diff prints no diagnostics");
        write(dir.path(), "fix.patch", &patch);
        let st = Std::new("git")
            .args(["apply", "fix.patch"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(st.success());
        let applied = fs::read_to_string(dir.path().join("train.py")).unwrap();
        assert!(applied.contains("torch.accelerator.synchronize()"));
        assert!(applied.contains(".to(torch.accelerator.current_accelerator())"));
    }

    #[test]
    fn write_applies_fixes_and_preserves_everything_else() {
        let dir = crate::common::project();
        // BOM, CRLF, tabs, comments and odd quoting must all survive byte for byte.
        let src = "\u{feff}import torch  # keep me\r\n\r\nif True:\r\n\tdev = torch.device('cuda')  # device\r\n\ttorch.cuda.synchronize( )\r\n";
        let f = write(dir.path(), "w.py", src);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&f, fs::Permissions::from_mode(0o751)).unwrap();
        }
        tpuport()
            .args(["migrate", "--write", f.to_str().unwrap()])
            .assert()
            .code(0)
            .stderr(predicate::str::contains("1 changed"));
        let got = fs::read_to_string(&f).unwrap();
        assert_eq!(
            got,
            "\u{feff}import torch  # keep me\r\n\r\nif True:\r\n\tdev = torch.accelerator.current_accelerator()  # device\r\n\ttorch.accelerator.synchronize( )\r\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                fs::metadata(&f).unwrap().permissions().mode() & 0o777,
                0o751
            );
        }
        // A second run has nothing left to do.
        tpuport()
            .args(["migrate", "--check", f.to_str().unwrap()])
            .assert()
            .code(0);
    }

    #[test]
    fn unsafe_fixes_need_the_flag() {
        let dir = crate::common::project();
        let f = write(
            dir.path(),
            "u.py",
            "import torch\ntorch.cuda.manual_seed(0)\n",
        );
        tpuport()
            .args(["migrate", f.to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("RNG001 [unsafe fix]"))
            .stderr(predicate::str::contains("1 unsafe fixes hidden"));
        tpuport()
            .args(["migrate", "--write", "--unsafe-fixes", f.to_str().unwrap()])
            .assert()
            .code(0);
        assert_eq!(
            fs::read_to_string(&f).unwrap(),
            "import torch\ntorch.manual_seed(0)\n"
        );
    }

    #[test]
    fn select_and_ignore() {
        let dir = crate::common::project();
        let f = write(dir.path(), "s.py", CUDA_SCRIPT);
        tpuport()
            .args(["migrate", "--check", "--select", "DEV", f.to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("DEV006"))
            .stdout(predicate::str::contains("CUD007").not());
        tpuport()
            .args([
                "migrate",
                "--check",
                "--ignore",
                "DEV,CUD",
                f.to_str().unwrap(),
            ])
            .assert()
            .code(0);
        tpuport()
            .args(["migrate", "--select", "NOPE1", f.to_str().unwrap()])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("no rule matches `NOPE1`"));
    }

    #[test]
    fn ignore_comments_silence_findings() {
        let dir = crate::common::project();
        let src = "import torch\ntorch.cuda.synchronize()  # tpuport: ignore\ntorch.cuda.init()  # tpuport: ignore[CUD007]\nlabel = \"cuda\"  # tpuport: ignore[DEV017, CUD001]\n";
        let f = write(dir.path(), "i.py", src);
        tpuport()
            .args(["migrate", "--check", "-q", f.to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("CUD013"))
            .stdout(predicate::str::contains("CUD007").not())
            .stdout(predicate::str::contains("DEV017").not());
    }

    #[test]
    fn exit_zero_keeps_errors() {
        let dir = crate::common::project();
        let f = write(dir.path(), "e.py", CUDA_SCRIPT);
        tpuport()
            .args(["migrate", "--exit-zero", f.to_str().unwrap()])
            .assert()
            .code(0);
        tpuport()
            .args([
                "migrate",
                "--exit-zero",
                dir.path().join("nope.py").to_str().unwrap(),
            ])
            .assert()
            .code(2);
    }

    #[test]
    fn json_output_carries_edits() {
        let dir = crate::common::project();
        let f = write(dir.path(), "j.py", CUDA_SCRIPT);
        let out = tpuport()
            .args([
                "migrate",
                "--check",
                "--output-format",
                "json",
                f.to_str().unwrap(),
            ])
            .assert()
            .code(1)
            .get_output()
            .stdout
            .clone();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let arr = v.as_array().unwrap();
        let sync = arr.iter().find(|d| d["rule"] == "CUD007").unwrap();
        assert_eq!(sync["line"], 4);
        assert_eq!(sync["fix_class"], "safe");
        assert_eq!(sync["edits"][0]["content"], "torch.accelerator.synchronize");
    }
}

mod walking {
    use super::*;

    #[test]
    fn folders_respect_gitignore_and_skip_other_files() {
        let dir = crate::common::project();
        write(dir.path(), ".gitignore", "build/\n");
        write(dir.path(), "a.py", CUDA_SCRIPT);
        write(dir.path(), "pkg/b.py", CUDA_SCRIPT);
        write(dir.path(), "build/c.py", CUDA_SCRIPT);
        write(dir.path(), "notes.txt", "torch.cuda.synchronize()");
        tpuport()
            .args(["migrate", "--check", "-q", dir.path().to_str().unwrap()])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("a.py"))
            .stdout(predicate::str::contains("b.py"))
            .stdout(predicate::str::contains("c.py").not())
            .stdout(predicate::str::contains("notes.txt").not());
    }
}

mod bad_input {
    use super::*;

    #[test]
    fn each_bad_file_is_explained_and_the_rest_is_processed() {
        let dir = crate::common::project();
        let d = dir.path();
        write(d, "good.py", CUDA_SCRIPT);
        write(
            d,
            "latin1.py",
            b"# caf\xe9\nimport torch\ntorch.cuda.synchronize()\n",
        );
        write(d, "binary.py", b"import torch\x00\x01\x02");
        let syntax = write(
            d,
            "syntax.py",
            "import torch\n\ndef broken(:\n    torch.cuda.synchronize()\n\ntorch.cuda.synchronize()\n",
        );
        let big = write(d, "big.py", "");
        let f = fs::File::create(&big).unwrap();
        f.set_len(50 * 1024 * 1024).unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("loop.py", d.join("loop.py")).unwrap();
        let before: Vec<(PathBuf, Vec<u8>)> = ["latin1.py", "binary.py", "syntax.py"]
            .iter()
            .map(|n| (d.join(n), fs::read(d.join(n)).unwrap()))
            .collect();

        let assert = tpuport()
            .args([
                "migrate",
                "--write",
                d.to_str().unwrap(),
                d.join("missing.py").to_str().unwrap(),
            ])
            .assert()
            .code(2);
        let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        assert!(
            err.contains("latin1.py:1:6: not valid UTF-8; re-encode"),
            "{err}"
        );
        assert!(
            err.contains("binary.py:1:13: binary file (contains a NUL byte)"),
            "{err}"
        );
        assert!(err.contains("syntax.py:3:12: syntax error"), "{err}");
        assert!(
            err.contains("big.py: file is 52 MB, over the 8 MB limit"),
            "{err}"
        );
        #[cfg(unix)]
        assert!(
            err.contains("loop.py") && err.to_lowercase().contains("symbolic link"),
            "{err}"
        );
        assert!(err.contains("missing.py: cannot open"), "{err}");

        // The good file was migrated; the bad ones are byte-identical, except that the file
        // with a syntax error was still fixed outside the broken function.
        assert!(
            fs::read_to_string(d.join("good.py"))
                .unwrap()
                .contains("torch.accelerator.synchronize()")
        );
        for (p, bytes) in &before[..2] {
            assert_eq!(&fs::read(p).unwrap(), bytes, "{}", p.display());
        }
        assert_eq!(
            fs::read_to_string(&syntax).unwrap(),
            "import torch\n\ndef broken(:\n    torch.cuda.synchronize()\n\ntorch.accelerator.synchronize()\n"
        );
        let leftovers: Vec<_> = fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".tpuport-"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left behind");
    }
}

mod user_rules {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
    }

    #[test]
    fn a_rule_folder_adds_rules_without_rust() {
        let dir = crate::common::project();
        let f = write(
            dir.path(),
            "job.py",
            "import ourlib\nourlib.cuda_sync(device=d)\nourlib.launch(device=\"gpu\")\n",
        );
        tpuport()
            .args(["migrate", "--write", "--rules"])
            .arg(fixtures().join("rules_valid"))
            .arg(&f)
            .assert()
            .code(0);
        assert_eq!(
            fs::read_to_string(&f).unwrap(),
            "import ourlib\nourlib.accel_sync(d)\nourlib.launch(device=\"tpu\")\n"
        );
        tpuport()
            .args(["rule", "TEAM001", "--rules"])
            .arg(fixtures().join("rules_valid"))
            .assert()
            .success()
            .stdout(predicate::str::contains("`{qualified}` waits on CUDA"));
    }

    #[test]
    fn test_rules_checks_a_rule_folder_against_its_fixtures() {
        tpuport()
            .args(["test-rules"])
            .arg(fixtures().join("rules_valid"))
            .assert()
            .code(0)
            .stdout(predicate::str::contains("PASS TEAM001"))
            .stdout(predicate::str::contains("2 rules: 2 passed, 0 failed"));
        // A copy whose pinned result no longer matches fails, with the diff.
        let dir = crate::common::project();
        fs::copy(
            fixtures().join("rules_valid/TEAM.toml"),
            dir.path().join("TEAM.toml"),
        )
        .unwrap();
        fs::create_dir(dir.path().join("tests")).unwrap();
        for f in ["TEAM001.py", "TEAM002.py", "TEAM002.fixed.py"] {
            fs::copy(
                fixtures().join("rules_valid/tests").join(f),
                dir.path().join("tests").join(f),
            )
            .unwrap();
        }
        write(
            &dir.path().join("tests"),
            "TEAM001.fixed.py",
            "import ourlib\n",
        );
        tpuport()
            .args(["test-rules"])
            .arg(dir.path())
            .assert()
            .code(1)
            .stdout(predicate::str::contains("FAIL TEAM001"))
            .stdout(predicate::str::contains("differs from"));
    }

    #[test]
    fn invalid_rule_files_name_the_file_line_and_fix() {
        let cases = [
            (
                "bad_id.toml",
                ":5: rule TEAM1: id must be the family prefix `TEAM` followed by 3 digits",
            ),
            (
                "unknown_position.toml",
                ":5: rule TEAM003: unknown position class `nowhere`",
            ),
            (
                "bad_placeholder.toml",
                "uses `{y}`, which is not a parameter; declare it in `params",
            ),
            ("syntax.toml", "syntax.toml:6:"),
            ("reused_id.toml", "id already used in rules/DEV.toml"),
            (
                "fix_without_action.toml",
                "needs an [rule.action]; use fix = \"manual\"",
            ),
        ];
        for (file, expected) in cases {
            let dir = crate::common::project();
            fs::copy(
                fixtures().join("rules_invalid").join(file),
                dir.path().join(file),
            )
            .unwrap();
            let py = write(dir.path(), "x.py", "x = 1\n");
            tpuport()
                .args(["migrate", "--rules"])
                .arg(dir.path())
                .arg(&py)
                .assert()
                .code(2)
                .stderr(predicate::str::contains(file))
                .stderr(predicate::str::contains(expected));
        }
    }
}

mod explain {
    use super::*;

    #[test]
    fn rule_explains_itself() {
        tpuport()
            .args(["rule", "cud004"])
            .assert()
            .success()
            .stdout(predicate::str::contains("CUD004 (cuda-set-device)"))
            .stdout(predicate::str::contains("fix: safe"))
            .stdout(predicate::str::contains(
                "torch.accelerator.set_device_index(local_rank)",
            ));
        tpuport()
            .args(["rule", "--all"])
            .assert()
            .success()
            .stdout(predicate::str::contains("DST001"))
            .stdout(predicate::str::contains("MEM010"));
        tpuport().args(["rule", "XYZ123"]).assert().code(2);
    }
}

/// Acceptance (issue 2, point 2): a realistic DDP training script migrates to code that
/// parses, keeps no CUDA/NCCL reference without a diagnostic, and is stable.
mod acceptance {
    use super::*;

    fn python_parses(path: &Path) -> bool {
        Std::new("python3")
            .args(["-c", "import ast,sys; ast.parse(open(sys.argv[1]).read())"])
            .arg(path)
            .status()
            .map(|s| s.success())
            .unwrap_or(true)
    }

    /// Lines of CUDA/NCCL references a person would have to look at: names (`torch.cuda.x`,
    /// `.cuda()`), and strings that are exactly a device/backend/NCCL variable; not those beside
    /// the TPU (a comparison the portable port extended: `in ("cuda", "tpu")`).
    fn references(src: &str) -> Vec<usize> {
        let re = regex::Regex::new(
            r#"(\bcuda\s*[.(]|\.cuda\b|\bnccl\b(?:\s*\.)|["'](cuda(:\d+)?|nccl|[^"']*cuda:nccl[^"']*|(TORCH_)?NCCL_\w+)["'])"#,
        )
        .unwrap();
        src.lines()
            .enumerate()
            .filter(|(_, l)| {
                let code = l.split('#').next().unwrap_or("");
                let beside_tpu = code.contains("\"tpu\"") || code.contains("current_accelerator");
                !beside_tpu
                    && (re.is_match(code) || code.contains("f\"cuda:") || code.contains("cuda:{"))
            })
            .map(|(i, _)| i + 1)
            .collect()
    }

    #[test]
    fn ddp_script_migrates_cleanly() {
        for example in ["ddp_train.py", "single_gpu_train.py", "fsdp_lm.py"] {
            let dir = crate::common::project();
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/cuda")
                .join(example);
            let f = dir.path().join(example);
            fs::copy(&src, &f).unwrap();
            tpuport()
                .args(["migrate", "--write"])
                .arg(&f)
                .assert()
                .code(predicate::in_iter([0, 1]));
            let out = fs::read_to_string(&f).unwrap();
            assert!(python_parses(&f), "{example}: migrated code does not parse");
            // Second migration: nothing changes; what remains is reported.
            let second = tpuport()
                .args(["migrate", "--write", "--output-format", "json"])
                .arg(&f)
                .assert()
                .get_output()
                .stdout
                .clone();
            assert_eq!(
                fs::read_to_string(&f).unwrap(),
                out,
                "{example}: second migration changed it"
            );
            let diag_lines = common::diagnostic_lines(&second);
            // The CPU fallback for a requested CUDA device (`if args.device == "cuda" and not
            // torch.cuda.is_available():`) is right on every machine as written: kept, with no
            // finding (safety/fallback.rs).
            let fallback = |l: &usize| {
                let line = out.lines().nth(l - 1).unwrap_or("");
                line.contains("not torch.cuda.is_available()") && line.contains("== \"cuda\"")
            };
            let unreported: Vec<(usize, &str)> = references(&out)
                .into_iter()
                .filter(|l| !diag_lines.contains(l) && !fallback(l))
                .map(|l| (l, out.lines().nth(l - 1).unwrap()))
                .collect();
            assert!(
                unreported.is_empty(),
                "{example}: CUDA/NCCL references without a diagnostic: {unreported:#?}"
            );
        }
        // The DDP script in particular needs no porting work at all: what is left is performance
        // advice (a CNN without channels-last, `.item()` every step, a partial last batch), the
        // TPU's default float32 matmul precision (PRC008: it trains in float32) and, under the
        // portable default, `cudnn.benchmark = True`, which only `--to tpu` removes (it does
        // nothing on a TPU and still tunes CUDA).
        let dir = crate::common::project();
        let f = dir.path().join("ddp_train.py");
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cuda/ddp_train.py"),
            &f,
        )
        .unwrap();
        tpuport()
            .args(["migrate", "--write", "--ignore", "PERF,DYN,PRC"])
            .arg(&f)
            .assert()
            .code(0);
        let left = tpuport().args(["migrate", "-q"]).arg(&f).output().unwrap();
        let left = String::from_utf8_lossy(&left.stdout);
        let ids: Vec<&str> = left
            .lines()
            .filter_map(|l| l.split(": ").nth(1)?.split_whitespace().next())
            .collect();
        assert_eq!(
            ids,
            ["PERF001", "PRC008", "PERF002", "PRC001", "DYN006"],
            "{left}"
        );
    }
}

mod progress;
