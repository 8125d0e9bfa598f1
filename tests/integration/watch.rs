//! `--watch` (issue 15, acceptance 3): `tpuport run --watch` re-runs the script when it changes
//! (stopping it first if it still runs) and again after it ended; `tpuport migrate --watch`
//! checks again when a file changes. Each test edits a file and waits for the re-run in the
//! process's output; Ctrl-C (SIGINT) ends the watch.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::venv;

/// Start a watching tpuport (no stdin, its output piped): the child, and its output lines.
fn spawn(cmd: &mut Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut child);
    (child, rx)
}

/// The child's stdout and stderr lines, merged, as they come.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    for r in [
        Box::new(out) as Box<dyn std::io::Read + Send>,
        Box::new(err) as Box<dyn std::io::Read + Send>,
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(r).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
    }
    rx
}

/// Wait (at most `secs`) for a line containing `needle`; the lines seen so far on failure.
#[track_caller]
fn expect(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, needle: &str, secs: u64) {
    expect_all(rx, seen, &[needle], secs);
}

/// Wait (at most `secs`) until every needle has been on some line since now, in any order:
/// stdout and stderr are read by separate threads, so lines of the two streams may swap.
#[track_caller]
fn expect_all(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, needles: &[&str], secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut missing: Vec<&str> = needles.to_vec();
    while Instant::now() < deadline && !missing.is_empty() {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(100)) {
            missing.retain(|n| !l.contains(n));
            seen.push(l);
        }
    }
    assert!(
        missing.is_empty(),
        "no line with {missing:?} after {secs} s; output:\n{}",
        seen.join("\n")
    );
}

fn interrupt(child: &mut Child) -> std::process::ExitStatus {
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "still watching 20 s after Ctrl-C"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Give inotify a moment, then replace the file as editors do (write a temp file, rename).
fn save(path: &std::path::Path, text: &str) {
    std::thread::sleep(Duration::from_millis(400));
    let tmp = path.with_extension("swp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn run_watch_reruns_the_script_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("train.py");
    // Version 1 runs for a long time: the change must stop it and start version 2.
    std::fs::write(
        &script,
        "import time\nprint('version 1', flush=True)\ntime.sleep(60)\n",
    )
    .unwrap();
    let (mut child, rx) = spawn(
        Command::new(env!("CARGO_BIN_EXE_tpuport"))
            .current_dir(dir.path())
            .env("VIRTUAL_ENV", venv())
            .args(["run", "--watch", "--no-tui", "--target", "host", "--events"])
            .arg(dir.path().join("events.jsonl"))
            .arg(&script),
    );
    let mut seen = vec![];
    expect(&rx, &mut seen, "version 1", 60);
    save(&script, "print('version 2', flush=True)\n");
    expect(&rx, &mut seen, "a file changed: stopping the script", 60);
    expect_all(
        &rx,
        &mut seen,
        &[
            "train.py changed: running it again",
            "version 2",
            "watching",
        ],
        60,
    );
    // After it ended: a change of another Python file in the folder runs it again.
    save(&dir.path().join("helper.py"), "X = 1\n");
    expect_all(
        &rx,
        &mut seen,
        &[
            "helper.py changed: running it again",
            "version 2",
            "watching",
        ],
        60,
    );
    // Files that are not Python (events, logs) do not count.
    save(&dir.path().join("notes.txt"), "x\n");
    std::thread::sleep(Duration::from_millis(1000));
    while let Ok(l) = rx.try_recv() {
        assert!(!l.contains("running it again"), "{l}");
    }
    let st = interrupt(&mut child);
    assert_eq!(st.code(), Some(0), "the last run's exit code");
    let text = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
    assert!(
        text.lines().last().unwrap().contains("\"run_end\""),
        "{text}"
    );
}

#[test]
fn migrate_watch_checks_again_on_save() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("train.py");
    std::fs::write(&file, "import torch\nx = torch.zeros(1)\n").unwrap();
    let (mut child, rx) = spawn(
        Command::new(env!("CARGO_BIN_EXE_tpuport"))
            .current_dir(dir.path())
            .args(["migrate", "--isolated", "--watch"])
            .arg(dir.path()),
    );
    let mut seen = vec![];
    expect(&rx, &mut seen, "watching for changes", 60);
    assert!(
        !seen.iter().any(|l| l.contains("CUD")),
        "no findings at first: {seen:?}"
    );
    save(&file, "import torch\nx = torch.zeros(1).cuda()\n");
    // The notice (stderr) and the finding (stdout) may arrive in either order.
    expect_all(
        &rx,
        &mut seen,
        &[
            "train.py changed: checking again",
            "train.py:2",
            "watching for changes",
        ],
        60,
    );
    interrupt(&mut child);
    // --watch never writes.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "import torch\nx = torch.zeros(1).cuda()\n"
    );
}
