//! `tpuport run --nproc` end to end (issue 15), with real torch from the project venv: the ranks
//! of a DDP + all_reduce script under torchrun, the straggler, a dead rank and a hung one
//! (`--timeout`), and `tpuport report` of the run folder. One test: each job starts Python.

use assert_cmd::Command;

use crate::common::{events, repo, steps, success, venv};

/// `tpuport run --nproc 2` (issue 15): both ranks of a DDP + all_reduce script finish, each with
/// its events file in the run folder, and the summary names the rank made slow as the
/// straggler; a rank killed mid-run ends the job, and is reported dead with its signal; a hung
/// rank is stopped by `--timeout`.
#[test]
fn nproc_names_the_straggler_the_dead_and_the_hung_rank() {
    let venv = venv();
    let dir = tempfile::tempdir().unwrap();
    let job = |name: &str, env: (&str, &str), extra: &[&str]| {
        let folder = dir.path().join(name);
        let out = Command::cargo_bin("tpuport")
            .unwrap()
            .current_dir(dir.path())
            .env("VIRTUAL_ENV", &venv)
            .env_remove("PYTHONPATH")
            .env(env.0, env.1)
            .timeout(std::time::Duration::from_secs(300))
            .args(["run", "--nproc", "2", "--target", "sim"])
            .args(extra)
            .arg("--events")
            .arg(&folder)
            .arg(repo().join("tests/scripts/ranks.py"))
            .output()
            .unwrap();
        (out, folder)
    };
    let (out, folder) = job("slow", ("SLOW_RANK", "1"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    for rank in 0..2 {
        let f = folder.join(format!("rank{rank}.jsonl"));
        assert_eq!(steps(&f), 8, "{stderr}");
    }
    assert!(stderr.contains("rank 1 is a straggler"), "{stderr}");
    assert!(!stderr.contains("rank 0 is a straggler"), "{stderr}");
    // `tpuport report FOLDER`: the ranks side by side in summary.md, and rank 0's breakdown shows
    // it waiting in the collectives for the slow rank.
    let out_dir = dir.path().join("report");
    let rep = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["report"])
        .arg(&folder)
        .arg("-o")
        .arg(&out_dir)
        .output()
        .unwrap();
    success(&rep);
    let md = std::fs::read_to_string(out_dir.join("summary.md")).unwrap();
    assert!(md.contains("## Ranks"), "{md}");
    assert!(
        md.contains("| 0 | ok | 8 |") && md.contains("| 1 | ok | 8 |"),
        "{md}"
    );
    assert!(md.contains("**rank 1 is a straggler"), "{md}");
    let collective = md
        .lines()
        .find(|l| l.starts_with("| collective |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(!collective.contains("| 0.00 ms"), "{collective}");

    let (out, folder) = job("dead", ("DIE_RANK", "1"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rank 1 died: killed by signal 9 after 2 steps"),
        "{stderr}"
    );
    // The surviving rank's file is complete (it ends with run_end), whatever torchrun did to it.
    events(&folder.join("rank0.jsonl"));

    // A hung rank: its own --timeout stops it, torchrun then stops the other, and the job ends
    // with both files complete and the hung rank named.
    let (out, folder) = job("hung", ("HANG_RANK", "1"), &["--timeout", "30"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("rank 1 died: stopped by --timeout (hung?) after 2 steps\n"),
        "{stderr}"
    );
    // Rank 0 was waiting for it in the all_reduce (the agent's watchdog reported the wait).
    assert!(
        stderr.contains("rank 0 died: stopped by --timeout (hung?) after 2 steps, waiting in all_reduce (ranks.py:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("rank 1 was outside any collective when stopped, while rank 0 waited in one: look at rank 1"),
        "{stderr}"
    );
    events(&folder.join("rank0.jsonl"));
    events(&folder.join("rank1.jsonl"));
}
