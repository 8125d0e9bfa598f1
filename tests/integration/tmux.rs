//! The dashboard in a real terminal: `tpuport run` under tmux (send-keys, capture-pane) shows
//! the step counter advancing, freezes, asks before quitting a running script (and leaves if it
//! ends before the answer), stops it, and gives back a terminal where the shell prompt works;
//! `tpuport top` follows a file as another process appends to it; `tpuport migrate -i` accepts,
//! skips and edits fixes, and the file on disk has exactly the accepted ones. Without tmux the tests skip, saying so on stderr, except
//! under CI (`CI` set) or with `TPUPORT_REQUIRE_TMUX=1`, where they fail. Each test uses its own
//! tmux server (`-L`), killed at the end even on failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    pub(crate) fn send(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "t"];
        a.extend_from_slice(keys);
        self.cmd(&a);
    }

    pub(crate) fn screen(&self) -> String {
        self.cmd(&["capture-pane", "-p", "-t", "t"])
    }

    /// Wait until the screen satisfies `f`; panic with the screen after `secs`.
    pub(crate) fn wait(&self, what: &str, secs: u64, f: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if f(&s) {
                return s;
            }
            if start.elapsed() > Duration::from_secs(secs) {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // The server goes, and so does its socket file (tmux leaves it behind).
        let socket = self.cmd(&["display-message", "-p", "#{socket_path}"]);
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
        let socket = socket.trim();
        if !socket.is_empty() {
            let _ = std::fs::remove_file(socket);
        }
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn venv() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo().join("scripts/bootstrap"))
        .output()
        .expect("bash");
    assert!(out.status.success(), "scripts/bootstrap failed");
    PathBuf::from(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .trim(),
    )
}

/// The step number in the dashboard's header (`... step 12  status running`).
fn step_on(screen: &str) -> Option<u64> {
    let line = screen.lines().find(|l| l.contains("status "))?;
    let rest = &line[line.find("  step ")? + 7..];
    rest.split_whitespace().next()?.parse().ok()
}

/// Whether tmux is installed. When it is not, the test fails under CI (`CI` set, and not to
/// `false` or `0`) or with `TPUPORT_REQUIRE_TMUX=1`; elsewhere it skips, saying so on the real
/// stderr (`eprintln!` would be captured by the test harness and never shown).
pub(crate) fn have_tmux() -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"));
    let required = std::env::var("TPUPORT_REQUIRE_TMUX").is_ok_and(|v| v == "1");
    assert!(
        !ci && !required,
        "tmux is not installed, and CI or TPUPORT_REQUIRE_TMUX=1 requires the tmux tests \
         (apt-get install tmux)"
    );
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: tmux is not installed (apt-get install tmux to run this test)"
    );
    false
}

/// A tmux server of our own with a shell whose prompt is `READY$`.
pub(crate) fn start(name: &str) -> Tmux {
    let t = Tmux {
        socket: format!("tpuport-{name}-{}", std::process::id()),
    };
    t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "120",
        "-y",
        "40",
        "env PS1='READY$ ' bash --norc --noprofile -i",
    ]);
    t.wait("the shell prompt", 10, |s| s.contains("READY$"));
    t
}

#[test]
fn dashboard_in_a_real_terminal() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    let t = start("run");
    let line = format!(
        "cd {} && VIRTUAL_ENV={} {} run --events {} {}",
        repo().display(),
        venv().display(),
        env!("CARGO_BIN_EXE_tpuport"),
        events.display(),
        Path::new("tests/scripts/tui_steps.py").display()
    );
    t.send(&[&line, "Enter"]);
    let s = t.wait("the dashboard with a step", 60, |s| {
        s.contains("Step time") && step_on(s).is_some_and(|n| n >= 2)
    });
    let first = step_on(&s).unwrap();
    let s = t.wait("the step counter to advance", 30, |s| {
        step_on(s).is_some_and(|n| n >= first + 5)
    });
    assert!(
        s.contains("tick "),
        "the script's output is in its pane:\n{s}"
    );
    t.send(&["f"]);
    t.wait("FROZEN", 10, |s| s.contains("FROZEN"));
    t.send(&["q"]);
    t.wait("the quit question", 10, |s| {
        s.contains("Stop it and quit? y / n")
    });
    t.send(&["y"]);
    let s = t.wait("the prompt after the dashboard", 30, |s| {
        s.contains("events: ") && s.trim_end().ends_with("READY$")
    });
    assert!(s.contains("was interrupted (exit 130)"), "{s}");
    assert!(
        !s.contains("Step time"),
        "the dashboard screen is gone:\n{s}"
    );
    // The terminal is usable: cooked mode (echo, line editing), the prompt answers.
    t.send(&["echo ok-$((40+2))", "Enter"]);
    t.wait("the shell to answer", 10, |s| s.contains("\nok-42"));
    let text = std::fs::read_to_string(&events).unwrap();
    let last = text.lines().last().unwrap();
    assert!(
        last.contains("\"run_end\"") && last.contains("\"interrupted\""),
        "{last}"
    );
}

/// `q` while the script runs, and the script ends before the question is answered: the user
/// asked to leave, so the dashboard goes without a second `q` on the summary screen.
#[test]
fn quit_asked_as_the_script_ends_leaves() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (script, done) = (dir.path().join("loop.py"), dir.path().join("done"));
    let code = "import os, sys, time\nimport tpuport\nwhile not os.path.exists(sys.argv[1]):\n    \
                time.sleep(0.1)\n    tpuport.step(samples=8)\n";
    std::fs::write(&script, code).unwrap();
    let t = start("quit-end");
    let line = format!(
        "VIRTUAL_ENV={} {} run --target host --events {} {} {}",
        venv().display(),
        env!("CARGO_BIN_EXE_tpuport"),
        dir.path().join("e.jsonl").display(),
        script.display(),
        done.display()
    );
    t.send(&[&line, "Enter"]);
    t.wait("steps", 60, |s| step_on(s).is_some_and(|n| n >= 2));
    t.send(&["q"]);
    t.wait("the quit question", 10, |s| s.contains("Stop it and quit?"));
    std::fs::write(&done, "").unwrap();
    let s = t.wait("the prompt, with no second q", 30, |s| {
        s.contains("events: ") && s.trim_end().ends_with("READY$")
    });
    assert!(s.contains("finished (exit 0)"), "{s}");
}

#[test]
fn top_follows_a_growing_file() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("rank0.jsonl");
    let recorded = std::fs::read_to_string(repo().join("tests/data/train_mlp.jsonl")).unwrap();
    let lines: Vec<&str> = recorded.lines().collect();
    // The first 10 lines, the last one cut in the middle.
    let mut head = lines[..10].join("\n");
    head.push('\n');
    head.push_str(&lines[10][..15]);
    // tpuport top starts before the job has written anything: it waits for the file.
    let t = start("top");
    t.send(&[
        &format!("{} top {}", env!("CARGO_BIN_EXE_tpuport"), events.display()),
        "Enter",
    ]);
    t.wait("the waiting dashboard", 20, |s| {
        s.contains("waiting for run_start")
    });
    std::fs::write(&events, &head).unwrap();
    let s = t.wait("the dashboard", 20, |s| {
        s.contains("Step time") && s.contains("train_mlp.py")
    });
    let before = step_on(&s).unwrap();
    // The writer goes on: the rest of the cut line, a malformed line, everything else.
    let mut rest = lines[10][15..].to_string();
    rest.push_str("\n{oops\n");
    rest.push_str(&lines[11..].join("\n"));
    rest.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&events)
        .unwrap();
    std::io::Write::write_all(&mut f, rest.as_bytes()).unwrap();
    let s = t.wait("all 30 steps and the summary", 20, |s| {
        step_on(s) == Some(30) && s.contains("Summary")
    });
    assert!(before < 30);
    assert!(s.contains("1 unreadable line skipped"), "{s}");
    t.send(&["q"]);
    t.wait("the prompt", 10, |s| {
        s.trim_end().ends_with("READY$") && !s.contains("Summary")
    });
}

#[test]
fn ctrl_c_sigterm_and_a_crash_leave_a_working_terminal() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let venv = venv();
    let t = start("signals");
    let run = |script: &str, events: &Path| {
        let pid = dir.path().join("pid");
        // `exec` so the pid file names tpuport itself.
        let line = format!(
            "cd {} && VIRTUAL_ENV={} sh -c 'echo $$ > {}; exec {} run --events {} {}'",
            repo().display(),
            venv.display(),
            pid.display(),
            env!("CARGO_BIN_EXE_tpuport"),
            events.display(),
            script
        );
        t.send(&[&line, "Enter"]);
        pid
    };

    // Ctrl-C is a key in raw mode: it interrupts the script; the summary screen stays.
    let ev = dir.path().join("ctrl_c.jsonl");
    run("tests/scripts/tui_steps.py", &ev);
    t.wait("steps", 60, |s| step_on(s).is_some_and(|n| n >= 2));
    t.send(&["C-c"]);
    t.wait("the summary screen", 30, |s| {
        s.contains("The script ended: interrupted (exit 130)")
    });
    t.send(&["q"]);
    let s = t.wait("the prompt", 10, |s| s.trim_end().ends_with("READY$"));
    assert!(s.contains("was interrupted (exit 130)"), "{s}");

    // SIGTERM from elsewhere: the script is interrupted and the dashboard leaves by itself.
    t.send(&["clear", "Enter"]);
    let ev = dir.path().join("term.jsonl");
    let pid_file = run("tests/scripts/tui_steps.py", &ev);
    t.wait("steps", 60, |s| step_on(s).is_some_and(|n| n >= 2));
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    let s = t.wait("the prompt after SIGTERM", 30, |s| {
        s.contains("events: ") && s.trim_end().ends_with("READY$")
    });
    assert!(!s.contains("Step time"), "{s}");

    // A script that crashes: the summary says how, and the terminal comes back.
    t.send(&["clear", "Enter"]);
    let ev = dir.path().join("segv.jsonl");
    run("tests/scripts/fail_segv.py", &ev);
    t.wait("the summary screen", 60, |s| {
        s.contains("The script ended: signal (exit 139)")
    });
    t.send(&["q"]);
    let s = t.wait("the prompt", 10, |s| s.trim_end().ends_with("READY$"));
    assert!(s.contains("crashed (SIGSEGV)"), "{s}");
    t.send(&["echo ok-$((40+2))", "Enter"]);
    t.wait("the shell to answer", 10, |s| s.contains("\nok-42"));
}

#[test]
fn top_over_a_folder_of_ranks() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let recorded = |name: &str| std::fs::read_to_string(repo().join(name)).unwrap();
    std::fs::write(
        dir.path().join("rank0.jsonl"),
        recorded("tests/data/train_mlp.jsonl"),
    )
    .unwrap();
    let t = start("ranks");
    t.send(&[
        &format!(
            "{} top {}",
            env!("CARGO_BIN_EXE_tpuport"),
            dir.path().display()
        ),
        "Enter",
    ]);
    t.wait("rank 0", 20, |s| {
        s.contains("rank0.jsonl") && s.contains("Summary")
    });
    // A second rank starts writing: it is picked up, and `n` shows it.
    std::fs::write(
        dir.path().join("rank1.jsonl"),
        recorded("tests/data/mlp_limit.jsonl"),
    )
    .unwrap();
    t.wait("two files", 20, |s| s.contains("rank0.jsonl (1/2)"));
    t.send(&["n"]);
    let s = t.wait("rank 1", 20, |s| s.contains("rank1.jsonl (2/2)"));
    assert!(s.contains("mlp_compile.py"), "{s}");
    t.send(&["q"]);
    t.wait("the prompt", 10, |s| {
        s.trim_end().ends_with("READY$") && !s.contains("Summary")
    });
}

/// Issue 15, acceptance 1: `run --nproc 2` in a terminal shows the dashboard over the run folder
/// with both ranks side by side, the slow one flagged as the straggler; after the job, the table.
#[test]
fn nproc_dashboard_shows_every_rank() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("job");
    let t = start("nproc");
    let line = format!(
        "cd {} && SLOW_RANK=1 STEPS=40 VIRTUAL_ENV={} {} run --nproc 2 --target sim --events {} {}",
        dir.path().display(),
        venv().display(),
        env!("CARGO_BIN_EXE_tpuport"),
        folder.display(),
        repo().join("tests/scripts/ranks.py").display()
    );
    t.send(&[&line, "Enter"]);
    let s = t.wait("both ranks in the ranks pane", 120, |s| {
        s.contains("Ranks: 2") && s.contains("▶0") && s.contains(" 1 ")
    });
    assert!(s.contains("rank0.jsonl"), "{s}");
    let s = t.wait("the straggler flagged", 120, |s| {
        s.contains("rank 1 straggles")
    });
    assert!(s.contains("own"), "{s}");
    t.wait("the end of the job", 120, |s| {
        s.contains("Summary") && s.matches(" ok ").count() >= 2
    });
    t.send(&["q"]);
    let s = t.wait("the table after the dashboard", 30, |s| {
        s.trim_end().ends_with("READY$") && s.contains("torchrun exited with 0")
    });
    assert!(s.contains("rank 1 is a straggler"), "{s}");
    assert!(s.contains("torchrun.log"), "{s}");
    assert!(folder.join("rank0.jsonl").is_file() && folder.join("rank1.jsonl").is_file());
}

/// `run --watch` with the dashboard: a change stops the running script and the dashboard starts
/// over in place (same screen, fresh numbers); `q` on the summary ends the watch.
#[test]
fn run_watch_restarts_the_dashboard_in_place() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("loop.py");
    std::fs::copy(repo().join("tests/scripts/tui_steps.py"), &script).unwrap();
    let t = start("watch");
    let line = format!(
        "cd {} && VIRTUAL_ENV={} {} run --watch --target host --events {} loop.py",
        dir.path().display(),
        venv().display(),
        env!("CARGO_BIN_EXE_tpuport"),
        dir.path().join("e.jsonl").display(),
    );
    t.send(&[&line, "Enter"]);
    t.wait("ten steps", 60, |s| step_on(s).is_some_and(|n| n >= 10));
    // The new version runs 5 steps and ends.
    let text = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, text.replace("else 600", "else 5")).unwrap();
    let s = t.wait("the second run's summary", 60, |s| {
        s.contains("Summary") && s.contains("steps: 5")
    });
    assert!(s.contains("loop.py"), "{s}");
    t.send(&["s"]);
    t.wait("the note in the output pane", 10, |s| {
        s.contains("changed: running it again")
    });
    t.send(&["q"]);
    let s = t.wait("the prompt", 20, |s| s.trim_end().ends_with("READY$"));
    assert!(s.contains("finished (exit 0)"), "{s}");
}

/// Run by `panic_restores_the_terminal` inside tmux: takes the terminal over with the real
/// dashboard, draws, then panics. Ignored in normal runs (it needs a terminal).
#[test]
#[ignore = "helper: run inside a terminal by panic_restores_the_terminal"]
fn panic_helper() {
    let mut d = tpuport::ui::live::Dashboard::start(false).expect("a terminal");
    d.note("about to panic");
    d.draw().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    panic!("deliberate panic while the dashboard is up");
}

#[test]
fn panic_restores_the_terminal() {
    if !have_tmux() {
        return;
    }
    let t = start("panic");
    let me = std::env::current_exe().unwrap();
    t.send(&[
        &format!(
            "{} --ignored --exact tmux::panic_helper --nocapture; stty -a | tr ' ' '\\n' | grep -x -e echo -e icanon | tr '\\n' ' '; echo",
            me.display()
        ),
        "Enter",
    ]);
    t.wait("the dashboard", 20, |s| s.contains("about to panic"));
    let s = t.wait("the prompt after the panic", 20, |s| {
        s.trim_end().ends_with("READY$") && s.contains("test result")
    });
    assert!(
        s.contains("deliberate panic while the dashboard is up"),
        "the panic message is readable:\n{s}"
    );
    assert!(
        !s.contains("about to panic"),
        "the dashboard screen is gone:\n{s}"
    );
    // `stty -a` lists `-echo`/`-icanon` in raw mode; the grep kept only the plain words.
    assert!(
        s.lines().any(|l| {
            let mut w: Vec<&str> = l.split_whitespace().collect();
            w.sort();
            w == ["echo", "icanon"]
        }),
        "cooked mode is back (echo, icanon):\n{s}"
    );
    t.send(&["echo ok-$((40+2))", "Enter"]);
    t.wait("the shell to answer", 10, |s| s.contains("\nok-42"));
}

/// `tpuport migrate` over 1,500 files with stderr on the terminal and the patch piped to a
/// file: the progress bar is drawn (seen in the pane's raw output), then erased; the final
/// screen has the summary and no bar line, and the patch has no trace of the bar.
#[test]
fn migrate_progress_bar_is_cleared() {
    if !have_tmux() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    for i in 0..1500 {
        std::fs::write(
            tree.join(format!("f{i:04}.py")),
            "import torch\n\nx = torch.randn(3).cuda()\n",
        )
        .unwrap();
    }
    let raw = dir.path().join("raw.log");
    let patch = dir.path().join("out.patch");
    let t = start("progress");
    t.cmd(&[
        "pipe-pane",
        "-t",
        "t",
        "-o",
        &format!("cat > {}", raw.display()),
    ]);
    // One worker so that the run lasts long enough for the bar to be drawn; the environment
    // variables that hide the bar are removed.
    let line = format!(
        "env -u CI -u TPUPORT_NO_PROGRESS {} migrate --diff -j 1 {} > {}; echo rc=$?",
        env!("CARGO_BIN_EXE_tpuport"),
        tree.display(),
        patch.display()
    );
    t.send(&[&line, "Enter"]);
    // A line `rc=N` (the command line itself holds `rc=$?`).
    let status = |s: &str| {
        s.lines()
            .find_map(|l| l.trim().strip_prefix("rc=")?.parse::<i32>().ok())
    };
    let s = t.wait("the summary and the prompt", 120, |s| {
        status(s).is_some() && s.trim_end().ends_with("READY$")
    });
    assert_eq!(status(&s), Some(1), "{s}");
    assert!(
        s.lines().any(|l| l.starts_with(
            "tpuport migrate: 1500 files scanned (1500 parsed), 1500 would change, 0 with errors"
        )),
        "the summary is intact:\n{s}"
    );
    assert!(
        !s.contains("migrating "),
        "no bar is left on the screen:\n{s}"
    );
    let text = std::fs::read_to_string(&patch).unwrap();
    assert!(
        text.starts_with("--- a/"),
        "{}",
        &text[..text.len().min(200)]
    );
    assert_eq!(text.matches("\n+++ b/").count(), 1500);
    assert!(!text.contains('\x1b') && !text.contains("migrating "));
    // The bar was there at some point (else this test would prove nothing).
    // `pipe-pane` writes through `cat`: wait until it has caught up with the end of the run.
    let start = Instant::now();
    let bytes = loop {
        let b = String::from_utf8_lossy(&std::fs::read(&raw).unwrap_or_default()).to_string();
        if b.contains("rc=1") || start.elapsed() > Duration::from_secs(10) {
            break b;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        bytes.contains("migrating ") && bytes.contains("/1500 files"),
        "the bar was drawn: {:?}",
        &bytes[..bytes.len().min(400)]
    );
}
