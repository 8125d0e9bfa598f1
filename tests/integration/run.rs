//! `tpuport run` end to end, with real Python (and real torch where needed) from the project
//! venv (`bash scripts/bootstrap`). Tests that import torch are few and grouped: each costs
//! seconds just to `import torch`.

use crate::common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use common::{events, repo, venv};
use tpuport::profile::event::Event;
use tpuport::profile::summary::Summary;

fn tpuport(venv: &Path) -> Command {
    common::tpuport(venv, 300)
}

fn script(name: &str) -> String {
    repo()
        .join("tests/scripts")
        .join(name)
        .display()
        .to_string()
}

fn run_end(evs: &[Event]) -> &tpuport::profile::event::RunEnd {
    match evs.last() {
        Some(Event::RunEnd(e)) => e,
        _ => unreachable!(),
    }
}

/// Acceptance (issue 3, point 1): an MLP with torch.compile(dynamic=False) and changing batch
/// sizes. Compiles in the events = Dynamo's own count (before and after torch._dynamo.reset()),
/// steps = optimizer steps, and the recompile limit shows as limit_hit.
#[test]
fn host_target_observes_compiles_steps_and_syncs() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("ev.jsonl");
    let counts = dir.path().join("counts.json");
    // 11 distinct sizes: 8 compiles (Dynamo's recompile_limit), then the limit is hit.
    let sizes = [
        "8", "8", "16", "8", "24", "32", "40", "48", "56", "64", "72", "80", "88",
    ];
    let out = tpuport(&venv)
        .env("DYNAMO_COUNTS", &counts)
        .args(["run", "--target", "host", "--no-tui", "--events"])
        .arg(&ev)
        .arg(script("mlp_compile.py"))
        .args(sizes)
        .assert()
        .code(0)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("loss"),
        "the script's stdout passes through"
    );
    let evs = events(&ev);
    let dynamo: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&counts).unwrap()).unwrap();
    let s = Summary::from_events(&evs);
    let ok_before = dynamo["frames_ok_before_reset"].as_u64().unwrap();
    let ok_after = dynamo["frames_ok_after_reset"].as_u64().unwrap();
    assert_eq!(ok_before, 8, "Dynamo compiles up to its recompile limit");
    assert_eq!(ok_after, 1, "one compile after torch._dynamo.reset()");
    // Successful compiles = Dynamo's frame counter; every record (failed ones too) = its metrics.
    assert_eq!(
        s.compiles,
        ok_before + ok_after,
        "compile events vs Dynamo's own count"
    );
    assert_eq!(
        s.compiles + s.failed_compiles,
        dynamo["forward_records"].as_u64().unwrap()
    );
    assert_eq!(
        s.failed_compiles,
        dynamo["forward_records_before_reset"].as_u64().unwrap() - ok_before
    );
    assert_eq!(s.recompiles, ok_before - 1);
    assert!(s.limit_hit, "the recompile limit hit is reported");
    assert!(stderr.contains("recompile limit hit"), "{stderr}");
    assert_eq!(s.steps, dynamo["optimizer_steps"].as_u64().unwrap());
    assert_eq!(
        s.syncs,
        dynamo["item_calls"].as_u64().unwrap(),
        ".item() calls are counted"
    );
    let reasons: Vec<&str> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Compile(c) => c.reason.as_deref(),
            _ => None,
        })
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("size mismatch at index 0")),
        "{reasons:?}"
    );
    let sites: Vec<String> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Sync(s) => s.sites.first().map(|x| x.0.clone()),
            _ => None,
        })
        .collect();
    assert!(
        sites.iter().all(|s| s.ends_with("mlp_compile.py:27")),
        "{sites:?}"
    );
    assert!(s.peak_rss.unwrap() > 10_000_000);
    assert_eq!(run_end(&evs).status, "ok");
    // The script's output is in the events too.
    assert!(
        evs.iter().any(
            |e| matches!(e, Event::Log(l) if l.stream == "stdout" && l.line.starts_with("loss"))
        )
    );
    assert!(
        stderr.contains("steps: 13") && stderr.contains("compiles: 9 (7 recompiles"),
        "{stderr}"
    );
}

/// The sim target maps the "tpu" device onto the host; the subprocess runtime
/// (`python -m tpuport_agent`) gives the same events; `tpuport.step()` marks steps.
#[test]
fn sim_target_in_the_subprocess_runtime() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("ev.jsonl");
    let out = tpuport(&venv)
        .args([
            "run",
            "--target",
            "sim",
            "--subprocess",
            "--no-tui",
            "--events",
        ])
        .arg(&ev)
        .arg(script("sim_device.py"))
        .assert()
        .code(0)
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ok torch.Size([4, 2]) cpu torch.bfloat16"),
        "{stdout}"
    );
    // Pinned host memory works on a CPU-only host as on a TPU VM.
    assert!(stdout.contains("pinned torch.Size([4, 8])"), "{stdout}");
    // An integer device is the TPU (torch's current accelerator), not CUDA's missing driver.
    assert!(
        stdout.contains("int device cpu torch.Size([4, 2])"),
        "{stdout}"
    );
    // An op TorchTPU lacks fails with its message; so does an enabled GradScaler.
    assert!(
        stdout.contains(
            "median: operator 'aten::median' is not implemented for TPU. Please file a feature request"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("scaler enabled=False ran"), "{stdout}");
    assert!(
        stdout.contains("scaler enabled=True: operator 'aten::_amp_foreach_non_finite_check_and_unscale_' is not implemented for TPU"),
        "{stdout}"
    );
    let evs = events(&ev);
    let Event::RunStart(rs) = &evs[0] else {
        unreachable!()
    };
    assert_eq!(rs.target, "sim");
    assert_eq!(rs.target_reason, "--target sim");
    assert_eq!(rs.runtime, "subprocess");
    assert_eq!(rs.chip.as_deref(), Some("v5e"));
    let steps: Vec<(u64, Option<f64>, String)> = evs
        .iter()
        .filter_map(|e| match e {
            Event::Step(s) => Some((s.step, s.samples, s.source.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        steps,
        (1..=3)
            .map(|i| (i, Some(4.0), "marker".to_string()))
            .collect::<Vec<_>>()
    );
}

/// Every failure mode: the documented exit code, and a complete events file.
#[test]
fn failure_modes_exit_codes_and_complete_events() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[&str], i32, &str); 8] = [
        ("max_steps.py", &["--max-steps", "5"], 0, "ok"),
        ("at_exit.py", &[], 0, "ok"),
        ("fail_exception.py", &[], 1, "exception"),
        ("fail_exit.py", &[], 3, "exit"),
        ("fail_segv.py", &[], 139, "signal"),
        ("fail_abort.py", &[], 134, "signal"),
        ("fail_sigkill.py", &[], 137, "signal"),
        ("hang.py", &["--timeout", "1"], 124, "timeout"),
    ];
    for (name, flags, code, status) in cases {
        let ev = dir.path().join(format!("{name}.jsonl"));
        let out = tpuport(&venv)
            .args(["run", "--target", "host", "--no-tui"])
            .args(flags)
            .arg("--events")
            .arg(&ev)
            .arg(script(name))
            .assert()
            .code(code)
            .get_output()
            .clone();
        let evs = events(&ev);
        let end = run_end(&evs);
        assert_eq!(
            (end.exit_code, end.status.as_str()),
            (code, status),
            "{name}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        match name {
            "max_steps.py" => {
                // Stopped at the end of the fifth step: nothing after it ran.
                assert_eq!(end.steps, 5);
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    !stdout.contains("caught") && !stdout.contains("after the loop"),
                    "{stdout}"
                );
                assert!(
                    stderr.contains("stopped after 5 steps (--max-steps)"),
                    "{stderr}"
                );
            }
            "fail_exception.py" => {
                let exc = end.exception.as_ref().unwrap();
                assert_eq!(exc.kind, "ValueError");
                assert!(exc.traceback.contains("in inner"), "{}", exc.traceback);
                assert!(stderr.contains("ValueError: bad value in the script"));
            }
            "fail_segv.py" => {
                assert_eq!(end.signal, Some(11));
                assert!(stderr.contains("crashed (SIGSEGV)"), "{stderr}");
            }
            "fail_sigkill.py" => assert!(stderr.contains("SIGKILL: out of memory"), "{stderr}"),
            "at_exit.py" => {
                // atexit first, seeing the globals; then the objects, before finalization.
                let atexit = stderr.find("atexit sees Held");
                let released = stderr.find("released, interpreter finalizing: False");
                assert!(
                    atexit.is_some() && released.is_some() && atexit < released,
                    "{stderr}"
                );
            }
            _ => {}
        }
    }
}

/// Ctrl-C is forwarded (KeyboardInterrupt, exit 130); a second one kills (exit 137).
#[test]
fn ctrl_c_is_forwarded_and_a_second_one_kills() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    for (args, presses, code) in [(&[][..], 1, 130), (&["ignore-sigint"][..], 2, 137)] {
        let ev = dir.path().join(format!("int{presses}.jsonl"));
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("tpuport"))
            .env("VIRTUAL_ENV", &venv)
            .args(["run", "--target", "host", "--no-tui", "--events"])
            .arg(&ev)
            .arg(script("hang.py"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Wait for the script to start (it prints "hanging").
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 8];
        std::io::Read::read_exact(&mut out, &mut buf).unwrap();
        for _ in 0..presses {
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            std::thread::sleep(Duration::from_millis(300));
        }
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(code));
        let evs = events(&ev);
        assert_eq!(run_end(&evs).status, "interrupted");
    }
}

/// `tpuport tune` (issue 15): the three eager modes run one after another, each row of the table
/// is its events file's numbers, and on the sim the recommendation rests on host syncs, not on
/// the host's times.
#[test]
fn tune_runs_each_mode_and_recommends_from_the_numbers() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let out = tpuport(&venv)
        .args(["tune", "--steps", "6", "--target", "sim", "-o"])
        .arg(dir.path())
        .arg(repo().join("examples/tpu/train_mlp.py"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for mode in ["strict", "debug", "defer-fuse"] {
        let file = dir.path().join(format!("{mode}-default.jsonl"));
        let s = Summary::from_events(&events(&file));
        assert_eq!(s.steps, 6, "{mode}");
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{mode} / default ")))
            .unwrap_or_else(|| panic!("no row for {mode}:\n{stdout}"));
        let median = format!("{:.1} ms", s.median_step().unwrap() * 1e3);
        assert!(row.contains(&median), "{row} lacks {median}");
        assert!(row.contains(&format!(" {} ", s.compiles)), "{row}");
    }
    assert!(
        stdout.contains("recommended: try defer-fuse on a TPU"),
        "{stdout}"
    );
}
