//! The xla-cpu target end to end (issue 24): TorchTPU 0.2.0 itself runs the script on XLA:CPU,
//! through the CPU PJRT plugin and tpuport's shim that `scripts/bootstrap-xla-cpu` installs
//! (scripts/test runs it first). Each test starts Python with TorchTPU (seconds), so they are
//! few and each checks a lot. Outside CI, without the install, they say so and pass.

use crate::common;

use std::path::Path;

use assert_cmd::Command;
use common::{events, repo, success, venv};
use serde_json::Value;
use tpuport::profile::event::Event;

/// Whether xla-cpu is installed here; under CI (Linux x86_64) it must be.
pub(crate) fn installed() -> bool {
    let ok = tpuport::runtime::xla_cpu::location()
        .is_some_and(|root| tpuport::runtime::xla_cpu::XlaCpu::open(&root).is_ok());
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"));
    let supported = tpuport::runtime::xla_cpu::this_platform() == ("linux", "x86_64");
    assert!(
        ok || !ci || !supported,
        "xla-cpu is not installed: scripts/test runs scripts/bootstrap-xla-cpu first"
    );
    if !ok {
        eprintln!("SKIPPED: xla-cpu is not installed (bash scripts/bootstrap-xla-cpu)");
    }
    ok
}

fn tpuport(venv: &Path) -> Command {
    common::tpuport(venv, 900)
}

fn warnings<'a>(evs: &'a [Event], category: &str) -> Vec<&'a str> {
    evs.iter()
        .filter_map(|e| match e {
            Event::Warning(w) if w.category == category => Some(w.message.as_str()),
            _ => None,
        })
        .collect()
}

/// TorchTPU's device, its own error for an op it lacks, every XLA:CPU gap run (eager and
/// compiled) and named once, TPU precision on TorchTPU's kernels, live tpu tensors as HBM;
/// the run says which target and why.
#[test]
fn torch_tpu_itself_runs_the_script() {
    if !installed() {
        return;
    }
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("ev.jsonl");
    let out = tpuport(&venv)
        .args(["run", "--no-tui", "--hbm-track", "full", "--events"])
        .arg(&ev)
        .arg(repo().join("tests/scripts/xla_cpu_api.py"))
        .output()
        .unwrap();
    let stdout = success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for check in [
        "ok device tpu:0",
        "ok accelerator tpu 1",
        "ok median raises TorchTPU's error",
        "ok gaps",
        "ok precision default",
        "ok memory 4194304",
    ] {
        assert!(stdout.contains(check), "{check}\n{stdout}\n{stderr}");
    }
    assert!(
        stderr.contains("tpuport: note: running on the xla-cpu target (auto: no TPU on this machine; TorchTPU 0.2.0 runs on XLA:CPU"),
        "{stderr}"
    );
    let evs = events(&ev);
    let Some(Event::RunStart(start)) = evs.first() else {
        panic!("no run_start")
    };
    assert_eq!(start.target, "xla-cpu");
    // Each gap once, as an emulation note; never a TPU gap.
    let gaps = warnings(&evs, "XlaCpuGap");
    for gap in [
        "aten::cumsum runs on the host CPU",
        "aten::cumprod runs on the host CPU",
        "aten::linalg_inv_ex runs on the host CPU",
        "scaled_dot_product_attention runs in its math form",
        "a compiled graph (at ",
    ] {
        assert_eq!(
            gaps.iter().filter(|g| g.contains(gap)).count(),
            1,
            "{gap}: {gaps:#?}"
        );
    }
    assert!(
        warnings(&evs, "TpuCpuFallbackWarning").is_empty(),
        "no op fell back"
    );
    assert!(
        stderr.contains("emulated (XLA:CPU, not the TPU): aten::cumsum"),
        "{stderr}"
    );
}

/// HBM on xla-cpu: the live tpu tensors are counted (the script's CPU tensors are not), and with
/// --strict-hbm an allocation past --hbm raises torch.OutOfMemoryError with TorchTPU's text.
#[test]
fn live_tpu_tensors_are_hbm_and_strict_hbm_raises() {
    if !installed() {
        return;
    }
    let out = tpuport(&venv())
        .args(["run", "--no-tui", "--strict-hbm", "--hbm", "8MiB"])
        .arg(repo().join("tests/scripts/xla_cpu_hbm.py"))
        .output()
        .unwrap();
    let stdout = success(&out);
    assert!(stdout.contains("live 4194304"), "{stdout}");
    assert!(
        stdout.contains("oom raised: the TPU ran out of memory while awaiting the materialization of value (tpuport xla-cpu: 12.0 MiB of tensors live"),
        "{stdout}"
    );
}

/// The GPT example trains on xla-cpu (compiled through TorchTPU: Dynamo's compile and
/// TorchTPU's compile-cache counters are in the events), with losses that match the host's
/// within the TPU's precision.
#[test]
fn gpt_example_trains_on_torch_tpu_with_the_hosts_losses() {
    if !installed() {
        return;
    }
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let loss_lines = |target: &str, device: &str| -> (Vec<f64>, Vec<Event>) {
        let ev = dir.path().join(format!("{target}.jsonl"));
        let out = tpuport(&venv)
            .args(["run", "--no-tui", "--target", target, "--events"])
            .arg(&ev)
            .arg(repo().join("examples/tpu/train_gpt.py"))
            .args(["--steps", "21", "--device", device])
            .output()
            .unwrap();
        let stdout = success(&out);
        let losses = stdout
            .lines()
            .filter_map(|l| l.split("loss ").nth(1))
            .map(|v| v.trim().parse::<f64>().unwrap())
            .collect();
        (losses, events(&ev))
    };
    let (host, _) = loss_lines("host", "cpu");
    let (tpu, evs) = loss_lines("xla-cpu", "tpu");
    assert_eq!(host.len(), 3, "{host:?}");
    assert_eq!(tpu.len(), 3, "{tpu:?}");
    for (h, t) in host.iter().zip(&tpu) {
        // bf16 autocast on both; the TPU's matmul precision on xla-cpu: well within 1e-2.
        assert!((h - t).abs() / h < 1e-2, "host {host:?} xla-cpu {tpu:?}");
    }
    assert!(tpu[2] < tpu[0] * 0.6, "it trains: {tpu:?}");
    let compiles = evs
        .iter()
        .filter(|e| matches!(e, Event::Compile(c) if c.status == "ok"))
        .count();
    assert!(compiles >= 1, "Dynamo compiled through TorchTPU");
    let cache: Vec<Value> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Step(s) => s.extra.get("tpu_cache").cloned(),
            _ => None,
        })
        .collect();
    assert_eq!(cache.len(), 21, "every step has TorchTPU's cache counters");
    let last = cache.last().unwrap();
    assert!(last["compilations"].as_u64().unwrap() > 0, "{last}");
    assert!(
        last["hits"].as_u64().unwrap() > last["compilations"].as_u64().unwrap(),
        "later steps hit the cache: {last}"
    );
}

/// A model left on the CPU and tied weights a move untied: `run`'s summary and `check` say so
/// ("the optimizer's parameters are on cpu, not tpu"), and check blocks the port.
#[test]
fn a_model_on_the_cpu_and_untied_weights_are_reported_by_run_and_check() {
    if !installed() {
        return;
    }
    let venv = venv();
    let out = tpuport(&venv)
        .args(["run", "--no-tui"])
        .arg(repo().join("tests/scripts/placement.py"))
        .output()
        .unwrap();
    let stdout = success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("tied after the move: False"), "{stdout}");
    assert!(
        stderr.contains("WRONG DEVICE: the optimizer's parameters are on cpu, not tpu (2 on cpu)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "UNTIED WEIGHTS: wte.weight and lm_head.weight shared one weight before .to(), and this move untied them"
        ),
        "{stderr}"
    );
    // check: the original on the host, the port on xla-cpu.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        repo().join("tests/scripts/placement.py"),
        dir.path().join("train.py"),
    )
    .unwrap();
    let out = tpuport(&venv)
        .arg("check")
        .arg(dir.path().join("train.py"))
        .args(["--steps", "2", "--output-format", "json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(report["port"]["target"], "xla-cpu", "{report:#}");
    let run = report["sections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "run")
        .unwrap();
    assert_eq!(run["verdict"], "blocked", "{run:#}");
    assert!(
        run["summary"]
            .as_str()
            .unwrap()
            .contains("but the optimizer's parameters are on cpu, not tpu"),
        "{run:#}"
    );
    // The port keeps the tie (DEV018 turns on in-place parameter swapping on a TPU), so the
    // move no longer unties wte and lm_head there.
    assert!(
        !run["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i.as_str().unwrap().contains("lm_head.weight")),
        "{run:#}"
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The sim's copy of TorchTPU cannot drift unseen: its API checks (tests/scripts/sim_api.py)
/// hold on TorchTPU itself, and TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS, set at the start, makes the
/// internal helpers warn once on both.
#[test]
fn the_sims_api_checks_hold_on_torch_tpu() {
    if !installed() {
        return;
    }
    let venv = venv();
    let out = tpuport(&venv)
        .args(["run", "--target", "xla-cpu", "--no-tui", "--cpu-fallback"])
        .arg(repo().join("tests/scripts/sim_api.py"))
        .output()
        .unwrap();
    let stdout = success(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("operator 'aten::median' is not implemented for TPU. Falling back to CPU"),
        "TorchTPU's own CPU fallback: {stderr}"
    );
    crate::sim::every_api_check_passed(&stdout);
    for target in ["sim", "xla-cpu"] {
        let out = tpuport(&venv)
            .args(["run", "--no-tui", "--target", target])
            .env("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS", "1")
            .arg(repo().join("tests/scripts/sim_legacy.py"))
            .output()
            .unwrap();
        assert!(
            success(&out).contains("ok legacy device APIs warn once"),
            "{target}"
        );
    }
}

/// `--nproc 2` where xla-cpu is installed: xla-cpu runs one process, so the ranks run on the sim,
/// and the run says why (once, and in each rank's events).
#[test]
fn ranks_fall_back_to_the_sim_saying_why() {
    if !installed() {
        return;
    }
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let out = tpuport(&venv)
        .current_dir(dir.path())
        .args(["run", "--nproc", "2", "--no-tui", "--events"])
        .arg(&runs)
        .arg(repo().join("tests/scripts/ranks.py"))
        .env("STEPS", "2")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the ranks run on the sim: xla-cpu runs one process"),
        "{stderr}"
    );
    for rank in ["rank0.jsonl", "rank1.jsonl"] {
        let evs = events(&runs.join(rank));
        let Some(Event::RunStart(s)) = evs.first() else {
            panic!("no run_start")
        };
        assert_eq!(s.target, "sim", "{rank}");
        assert!(
            s.target_reason.contains("one of 2 ranks"),
            "{}",
            s.target_reason
        );
    }
}
