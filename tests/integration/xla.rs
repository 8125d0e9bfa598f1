//! PyTorch/XLA → TorchTPU (issue 6), end to end through the binary: the six torch_xla scripts in
//! examples/xla migrate to code that parses, every torch_xla reference left has a diagnostic, a
//! second migration changes nothing; the per-family statistics; the structural fixes
//! (optimizer_step's fix class, helpers once per file and removed when unused).

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use common::diagnostic_lines;

const SCRIPTS: &[&str] = &[
    "resnet_mp.py",
    "decoder_lm.py",
    "ddp_xla.py",
    "fsdp_xla.py",
    "spmd_xla.py",
    "amp_xla.py",
];

fn tpuport() -> Command {
    Command::cargo_bin("tpuport").unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/xla")
        .join(name)
}

/// Lines with a torch_xla reference, found by Python's own parser: uses of names bound by a
/// `torch_xla` import, and strings that are an XLA device, backend, rendezvous or variable.
/// `None` when python3 is missing.
fn torch_xla_reference_lines(path: &Path) -> Option<Vec<usize>> {
    const FIND: &str = r#"
import ast, json, re, sys
tree = ast.parse(open(sys.argv[1]).read())
names = set()
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.name == "torch_xla" or a.name.startswith("torch_xla."):
                names.add(a.asname or a.name.split(".")[0])
    elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch_xla"):
        for a in node.names:
            names.add(a.asname or a.name)
lines = set()
strings = re.compile(r"^(xla(:\d+)?|openxla(_eval)?|(xla|pjrt)://|PJRT_\w+|XLA_\w+|PT_XLA_\w+|LIBTPU_INIT_ARGS)$")
for node in ast.walk(tree):
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
        lines.add(node.lineno)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and strings.match(node.value):
        lines.add(node.lineno)
print(json.dumps(sorted(lines)))
"#;
    let out = Std::new("python3")
        .args(["-c", FIND])
        .arg(path)
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}: python could not parse the migrated file: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn migrate_copy(name: &str, unsafe_fixes: bool) -> (tempfile::TempDir, PathBuf, String) {
    let dir = crate::common::project();
    let f = dir.path().join(name);
    fs::copy(example(name), &f).unwrap();
    let mut cmd = tpuport();
    cmd.args(["migrate", "--write", "-q"]);
    if unsafe_fixes {
        cmd.arg("--unsafe-fixes");
    }
    let out = cmd.arg(&f).output().unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = fs::read_to_string(&f).unwrap();
    (dir, f, text)
}

/// Acceptance 1: each script migrates (with and without --unsafe-fixes) to code that parses,
/// every torch_xla reference left carries a diagnostic, and a second migration changes nothing.
#[test]
fn examples_migrate_to_parsing_code_with_every_reference_reported_idempotently() {
    for name in SCRIPTS {
        for unsafe_fixes in [false, true] {
            let (_dir, f, once) = migrate_copy(name, unsafe_fixes);
            assert_ne!(
                once,
                fs::read_to_string(example(name)).unwrap(),
                "{name}: nothing was migrated"
            );
            let mut cmd = tpuport();
            cmd.args(["migrate", "--write", "--output-format", "json"]);
            if unsafe_fixes {
                cmd.arg("--unsafe-fixes");
            }
            let second = cmd.arg(&f).output().unwrap();
            assert_eq!(
                fs::read_to_string(&f).unwrap(),
                once,
                "{name} (unsafe fixes: {unsafe_fixes}): the second migration changed it"
            );
            let Some(refs) = torch_xla_reference_lines(&f) else {
                eprintln!("python3 not found: reference check skipped");
                return;
            };
            let reported = diagnostic_lines(&second.stdout);
            let unreported: Vec<(usize, &str)> = refs
                .into_iter()
                .filter(|l| !reported.contains(l))
                .map(|l| (l, once.lines().nth(l - 1).unwrap_or("")))
                .collect();
            assert!(
                unreported.is_empty(),
                "{name} (unsafe fixes: {unsafe_fixes}): torch_xla references without a diagnostic: {unreported:#?}"
            );
        }
    }
}

/// The two single-process scripts need no manual work for torch_xla once unsafe fixes are
/// applied: no torch_xla import is left (the AMP one keeps only its XLA_USE_BF16 finding).
#[test]
fn single_process_scripts_drop_torch_xla() {
    let (_d, _f, lm) = migrate_copy("decoder_lm.py", true);
    // The docstring still tells the story; the code no longer uses torch_xla.
    let code = lm.split_once("\"\"\"\n\n").unwrap().1;
    let uses: Vec<&str> = code
        .lines()
        .filter(|l| l.contains("torch_xla") && !l.trim_start().starts_with('#'))
        .collect();
    assert!(uses.is_empty(), "{uses:?}");
    assert!(lm.contains("torch.compile(forward_loss, backend=\"tpu\", fullgraph=True)"));
    assert!(lm.contains("device = torch.device(\"tpu\")"));
    assert!(lm.contains("# tpuport XLA008: torch_xla.sync() removed"));
    let (_d, _f, amp) = migrate_copy("amp_xla.py", true);
    assert!(amp.contains("with torch.autocast(\"tpu\", dtype=torch.bfloat16):"));
    assert!(amp.contains("optimizer = torch.optim.AdamW("));
    assert!(amp.contains("        optimizer.step()\n"));
    let left: Vec<&str> = amp
        .lines()
        .filter(|l| l.starts_with("import torch_xla") || l.starts_with("from torch_xla"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!amp.contains("metrics_report"), "{amp}");
}

/// Acceptance 2: the statistics per rule and per family for the six scripts.
#[test]
fn statistics_for_the_examples() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/xla");
    for (unsafe_fixes, name) in [(false, "statistics"), (true, "statistics_unsafe")] {
        let mut cmd = tpuport();
        cmd.args(["migrate", "--statistics"]);
        if unsafe_fixes {
            cmd.arg("--unsafe-fixes");
        }
        let out = cmd.arg(&dir).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8(out.stdout).unwrap();
        // No findings or diffs, only the table.
        assert!(!text.contains("--- a/"), "{text}");
        insta::assert_snapshot!(name, text);
    }
    // The JSON form carries the same totals.
    let out = tpuport()
        .args(["migrate", "--statistics", "--output-format", "json"])
        .arg(&dir)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fams = v["families"].as_array().unwrap();
    let sum: u64 = fams.iter().map(|f| f["found"].as_u64().unwrap()).sum();
    assert_eq!(sum, v["total"]["found"].as_u64().unwrap());
    assert!(fams.iter().any(|f| f["name"] == "XM"));
}

fn migrate_text(src: &str, args: &[&str]) -> (String, String) {
    let dir = crate::common::project();
    let f = dir.path().join("train.py");
    fs::write(&f, src).unwrap();
    let out = tpuport()
        .args(["migrate", "--write"])
        .args(args)
        .arg(&f)
        .output()
        .unwrap();
    (
        fs::read_to_string(&f).unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// xm.optimizer_step → opt.step() is safe in a single process or with DDP, unsafe (with the
/// gradient-averaging advice) in a multi-process script without DDP.
#[test]
fn optimizer_step_fix_class_follows_the_script() {
    let body = "def _mp_fn(i):\n    loss.backward()\n    xm.optimizer_step(opt)\n";
    let multi = format!(
        "import torch_xla.core.xla_model as xm\nimport torch_xla.distributed.xla_multiprocessing as xmp\n{body}\nxmp.spawn(_mp_fn)\n"
    );
    let (out, report) = migrate_text(&multi, &[]);
    assert!(out.contains("xm.optimizer_step(opt)"), "{out}");
    assert!(report.contains("XM013 [unsafe fix]"), "{report}");
    assert!(
        report.contains("no longer average the gradients"),
        "{report}"
    );

    let ddp = multi.replace(
        "loss.backward()",
        "model = torch.nn.parallel.DistributedDataParallel(net)\n    loss.backward()",
    );
    let ddp = format!("import torch\n{ddp}");
    let (out, _) = migrate_text(&ddp, &[]);
    assert!(out.contains("    opt.step()\n"), "{out}");

    let single = format!("import torch_xla.core.xla_model as xm\n{body}\n_mp_fn(0)\n");
    let (out, _) = migrate_text(&single, &[]);
    assert!(out.contains("    opt.step()\n"), "{out}");
}

/// A helper is inserted once per file, after the imports, whatever the number of uses; it goes
/// again when no code calls it.
#[test]
fn helpers_are_inserted_once_and_removed_when_unused() {
    let src = "import torch_xla.runtime as xr\n\n\ndef f():\n    return xr.world_size()\n\n\ndef g():\n    return xr.world_size() * 2\n";
    let (out, _) = migrate_text(src, &[]);
    assert_eq!(
        out.matches("def _tpuport_world_size():").count(),
        1,
        "{out}"
    );
    assert!(out.starts_with("import os\nimport torch\n\n\ndef _tpuport_world_size():"));
    assert_eq!(out.matches("_tpuport_world_size()").count(), 3);
    // The user replaces the calls: the helper is removed on the next run.
    let edited = out.replace("return _tpuport_world_size()", "return 8");
    let (cleaned, _) = migrate_text(&edited, &[]);
    assert!(!cleaned.contains("_tpuport_world_size"), "{cleaned}");
    assert!(cleaned.contains("def f():\n    return 8\n"), "{cleaned}");
}
