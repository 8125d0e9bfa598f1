//! The error paths of `tpuport run` and of the commands that write files, as a user meets them
//! (issue 26): a venv without torch (said before the run, and what to do when the script stops
//! at `import torch`), a script's traceback as `python script.py` shows it (no agent or runpy
//! frames, in the terminal and in the events file, in both runtimes), an events file on a full
//! disk (`/dev/full`, and a 64 KiB tmpfs where a mount namespace can be made), an unwritable
//! `--events` and an unwritable `-o` folder. No script here imports torch: each Python run costs
//! a fraction of a second.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command as Std, Output};

use assert_cmd::Command;
use common::{repo, venv};
use tpuport::profile::event::Event;

/// A venv without torch (nor pip), made from the project venv's base interpreter.
fn venv_without_torch(dir: &Path) -> PathBuf {
    let cfg = fs::read_to_string(venv().join("pyvenv.cfg")).unwrap();
    let home = cfg
        .lines()
        .find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == "home"))
        .map(|(_, v)| PathBuf::from(v.trim()))
        .expect("home in pyvenv.cfg");
    let v = dir.join("notorch");
    let out = Std::new(home.join("python3"))
        .args(["-m", "venv", "--without-pip"])
        .arg(&v)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, text).unwrap();
    p
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `tpuport` with `env` as the script's environment (through `--python`).
fn tpuport_in(env: &Path) -> Command {
    let mut c = common::tpuport(env, 120);
    c.env_remove("VIRTUAL_ENV")
        .arg("run")
        .arg("--python")
        .arg(env);
    c
}

fn run_end(path: &Path) -> tpuport::profile::event::RunEnd {
    match common::events(path).pop() {
        Some(Event::RunEnd(e)) => e,
        _ => unreachable!(),
    }
}

#[test]
fn a_venv_without_torch_is_named_before_the_run_and_when_the_script_stops() {
    let dir = tempfile::tempdir().unwrap();
    let env = venv_without_torch(dir.path());
    let uses = write(
        dir.path(),
        "uses.py",
        "import torch\nprint(torch.zeros(1))\n",
    );
    let plain = write(dir.path(), "plain.py", "print('hello without torch')\n");
    let ev = dir.path().join("ev.jsonl");
    let out = tpuport_in(&env)
        .args(["--no-tui", "--events"])
        .arg(&ev)
        .arg(&uses)
        .assert()
        .code(1)
        .get_output()
        .clone();
    let err = stderr(&out);
    let named = format!(
        "tpuport: note: torch is not installed in the venv {} (Python ",
        env.display()
    );
    let todo = format!(
        "install it there (`{}/bin/python -m pip install torch`), or point --python (or $VIRTUAL_ENV) at the venv you train in",
        env.display()
    );
    let note = err
        .find(&named)
        .unwrap_or_else(|| panic!("no note:\n{err}"));
    let traceback = err.find("Traceback").expect("the traceback");
    assert!(note < traceback, "the note comes before the run:\n{err}");
    assert!(err.contains(", set by --python); "), "{err}");
    assert!(err.contains(&todo), "{err}");
    let end = format!(
        "tpuport run: {} stopped at `import torch` (exit 1): torch is not installed in the venv {}",
        uses.display(),
        env.display()
    );
    assert!(err.contains(&end), "{err}");
    assert!(!err.contains("on the sim target"), "{err}");
    let e = run_end(&ev);
    let x = e.exception.expect("the exception");
    assert_eq!(
        (x.kind.as_str(), x.message.as_str()),
        ("ModuleNotFoundError", "No module named 'torch'")
    );

    // A script that does not import torch runs as usual, after the same note; $VIRTUAL_ENV
    // picks the venv this time.
    let out = common::tpuport(&env, 120)
        .args(["run", "--no-tui", "--events"])
        .arg(&ev)
        .arg(&plain)
        .assert()
        .code(0)
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stdout).contains("hello without torch"));
    let err = stderr(&out);
    assert!(
        err.contains(&named) && err.contains(", set by $VIRTUAL_ENV); "),
        "{err}"
    );
    assert!(err.contains("finished (exit 0)"), "{err}");

    // `--nproc` needs torchrun, which comes with torch: refused before anything starts.
    let out = tpuport_in(&env)
        .args(["--nproc", "2", "--no-tui"])
        .arg(&plain)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let err = stderr(&out);
    assert!(
        err.starts_with("tpuport: --nproc starts the ranks with torchrun, which comes with torch, and torch is not installed in the venv ")
            && err.contains(&todo)
            && err.lines().count() == 1,
        "{err}"
    );
}

/// What `python script.py` writes on stderr.
fn python_stderr(env: &Path, script: &Path) -> String {
    let out = Std::new(env.join("bin/python"))
        .arg(script)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    stderr(&out)
}

#[test]
fn a_traceback_shows_what_python_shows_in_both_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    let env = venv_without_torch(dir.path());
    let boom = write(
        dir.path(),
        "boom.py",
        "def inner(x):\n    return {}[x]\n\n\ndef outer():\n    try:\n        inner('k')\n    except KeyError as e:\n        raise ValueError('bad value') from e\n\n\nouter()\n",
    );
    let syntax = write(dir.path(), "syntax.py", "x = (\n");
    for script in [&boom, &syntax] {
        let python = python_stderr(&env, script);
        for (runtime, flags) in [("embedded", &[][..]), ("subprocess", &["--subprocess"][..])] {
            let ev = dir.path().join(format!("{runtime}.jsonl"));
            let out = tpuport_in(&env)
                .args(flags)
                .args(["--no-tui", "--events"])
                .arg(&ev)
                .arg(script)
                .assert()
                .code(1)
                .get_output()
                .clone();
            let err = stderr(&out);
            assert!(
                err.contains(&python),
                "{runtime}: python shows\n{python}\ntpuport shows\n{err}"
            );
            assert!(
                !err.contains("tpuport_agent") && !err.contains("runpy"),
                "{err}"
            );
            let evs = common::events(&ev);
            let Some(Event::RunStart(s)) = evs.first() else {
                unreachable!()
            };
            assert_eq!(s.runtime, runtime);
            let x = run_end(&ev).exception.expect("the exception");
            assert_eq!(
                x.traceback, python,
                "{runtime}: the events file's traceback"
            );
        }
    }
}

fn full_disk_line(err: &str, path: &str) -> bool {
    err.lines().any(|l| {
        l.starts_with(&format!(
            "tpuport: cannot write the events file {path}: No space left on device (os error 28); free some space there, or write the events elsewhere with --events PATH"
        ))
    })
}

/// Run `sh -c script` in a private mount namespace with a 64 KiB tmpfs mounted on `mnt`
/// (`$1` in the script); None where no namespace can be made (not root, no unshare).
fn with_small_disk(mnt: &Path, script: &str, args: &[&Path]) -> Option<Output> {
    let probe = Std::new("unshare").args(["-m", "true"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED: the tmpfs full-disk check (needs `unshare -m`, i.e. root); /dev/full is checked"
        );
        return None;
    }
    fs::create_dir_all(mnt).unwrap();
    let body = format!("mount -t tmpfs -o size=64k tmpfs \"$1\" || exit 97\n{script}");
    let out = Std::new("unshare")
        .args(["-m", "sh", "-c", &body, "sh"])
        .arg(mnt)
        .args(args)
        .env("VIRTUAL_ENV", venv())
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(97),
        "mount failed: {}",
        stderr(&out)
    );
    Some(out)
}

#[test]
fn a_full_disk_while_writing_events_is_one_clear_line_and_no_half_line() {
    let dir = tempfile::tempdir().unwrap();
    let env = venv_without_torch(dir.path());
    let plain = write(dir.path(), "plain.py", "print('hello')\n");
    let out = tpuport_in(&env)
        .args(["--no-tui", "--events", "/dev/full"])
        .arg(&plain)
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(
        full_disk_line(&stderr(&out), "/dev/full"),
        "{}",
        stderr(&out)
    );

    // A real file system that fills while the script writes (every output line is an event).
    let spam = write(
        dir.path(),
        "spam.py",
        "import time\nfor i in range(20000):\n    print('line', i, 'x' * 40)\n    if i % 1000 == 0:\n        time.sleep(0.02)\n",
    );
    let mnt = dir.path().join("mnt");
    let copy = dir.path().join("copy.jsonl");
    let tpuport = assert_cmd::cargo::cargo_bin("tpuport");
    let script = "\"$2\" run --no-tui --python \"$5\" --events \"$1/run.jsonl\" \"$3\" > /dev/null\ncode=$?\ncp \"$1/run.jsonl\" \"$4\"\nexit $code";
    let Some(out) = with_small_disk(&mnt, script, &[&tpuport, &spam, &copy, &env]) else {
        return;
    };
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    let shown = mnt.join("run.jsonl").display().to_string();
    assert!(full_disk_line(&err, &shown), "{err}");
    assert!(err.trim_end().ends_with("the script was stopped"), "{err}");
    let text = fs::read_to_string(&copy).unwrap();
    assert!(
        text.len() > 32 * 1024 && text.ends_with('\n'),
        "{} bytes",
        text.len()
    );
    for l in text.lines() {
        Event::parse(l).unwrap_or_else(|e| panic!("a half-written line ({e}): {l}"));
    }
}

#[test]
fn a_full_disk_under_report_leaves_no_half_written_file() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("mnt");
    let listing = dir.path().join("listing.txt");
    let tpuport = assert_cmd::cargo::cargo_bin("tpuport");
    let events = repo().join("tests/data/train_mlp.jsonl");
    let script =
        "\"$2\" report \"$3\" -o \"$1/report\"\ncode=$?\nls -A \"$1/report\" > \"$4\"\nexit $code";
    let Some(out) = with_small_disk(&mnt, script, &[&tpuport, &events, &listing]) else {
        return;
    };
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("No space left on device (os error 28)); free some space there, or choose another folder with -o"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    // Whatever is in the folder is a whole file: no temporary file is left behind.
    let files = fs::read_to_string(&listing).unwrap();
    assert!(!files.lines().any(|f| f.starts_with('.')), "{files}");
}

/// `-o` (report, check, tune, man) and `--events` where nothing can be written: one line that
/// names the folder and the flag, exit 2, and nothing made.
#[test]
fn unwritable_output_folders_are_one_clear_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "a-file", "");
    let plain = write(dir.path(), "plain.py", "print('hello')\n");
    let events = repo().join("tests/data/train_mlp.jsonl");
    let under = file.join("out");
    let os = |s: &dyn AsRef<std::ffi::OsStr>| s.as_ref().to_os_string();
    let cases = [
        (
            vec![os(&"report"), os(&events), os(&"-o"), os(&under)],
            format!(
                "tpuport: cannot create the report folder {} ({} is a file, not a folder); choose another with -o",
                under.display(),
                file.display()
            ),
        ),
        (
            vec![os(&"check"), os(&plain), os(&"-o"), os(&under)],
            format!(
                "tpuport: cannot create the report folder {}",
                under.display()
            ),
        ),
        (
            vec![os(&"tune"), os(&plain), os(&"-o"), os(&under)],
            format!(
                "tpuport: cannot create the folder for the runs' events files {}",
                under.display()
            ),
        ),
        (
            vec![os(&"man"), os(&"-o"), os(&under)],
            format!(
                "tpuport: cannot create the folder for the man pages {}",
                under.display()
            ),
        ),
        (
            vec![
                os(&"run"),
                os(&"--no-tui"),
                os(&"--events"),
                os(&under.join("e.jsonl")),
                os(&plain),
            ],
            format!(
                "tpuport: cannot create the folder {} for the events file ({} is a file, not a folder); choose another place with --events PATH",
                under.display(),
                file.display()
            ),
        ),
        (
            vec![
                os(&"run"),
                os(&"--no-tui"),
                os(&"--events"),
                os(&dir.path()),
                os(&plain),
            ],
            format!(
                "tpuport: cannot create the events file {} (Is a directory (os error 21)); choose another place with --events PATH",
                dir.path().display()
            ),
        ),
    ];
    for (args, expected) in cases {
        let out = common::tpuport(&venv(), 60)
            .args(&args)
            .assert()
            .code(2)
            .get_output()
            .clone();
        let err = stderr(&out);
        assert!(err.starts_with(&expected), "{args:?}:\n{err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line:\n{err}");
        assert!(!under.exists());
    }
    // Where permissions apply (not root), a read-only folder says so too.
    let ro = dir.path().join("ro");
    fs::create_dir(&ro).unwrap();
    let mut perms = fs::metadata(&ro).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
    fs::set_permissions(&ro, perms).unwrap();
    if Std::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() != b"0")
    {
        let out = Command::cargo_bin("tpuport")
            .unwrap()
            .args([os(&"report"), os(&events), os(&"-o"), os(&ro)])
            .assert()
            .code(2)
            .get_output()
            .clone();
        assert!(
            stderr(&out).contains("Permission denied"),
            "{}",
            stderr(&out)
        );
        assert!(fs::read_dir(&ro).unwrap().next().is_none());
    }
}

/// The xla-cpu target's own error paths: a torch outside TorchTPU's 2.11–2.15, a missing CPU
/// plugin and a broken shim are each one line before the run, with what to do, and exit 2; where
/// the target was not asked for, the run goes to the sim and says why.
#[test]
fn xla_cpu_errors_are_one_line_with_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "hi.py", "print('hi')\n");
    // A venv with torch 2.9 (its dist-info is all that is read).
    let old = venv_without_torch(dir.path());
    let site = fs::read_dir(old.join("lib"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
        .join("site-packages");
    fs::create_dir_all(site.join("torch-2.9.0.dist-info")).unwrap();
    let out = tpuport_in(&old)
        .args(["--target", "xla-cpu", "--no-tui"])
        .arg(&script)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.lines().any(|l| l.starts_with("tpuport: --target xla-cpu: ")
            && l.contains("TorchTPU 0.2.0 supports torch 2.11–2.15, and the script's environment has torch 2.9.0")),
        "{err}"
    );
    // Installs that cannot serve: a missing plugin, a shim that is not a library.
    let install = |name: &str, shim: &[u8], plugin: bool| {
        let x = dir.path().join(name);
        fs::create_dir_all(x.join("site")).unwrap();
        fs::create_dir_all(x.join("plugin")).unwrap();
        if plugin {
            fs::write(x.join("plugin/p.so"), b"").unwrap();
        }
        fs::write(x.join("shim.so"), shim).unwrap();
        fs::write(x.join(".complete"), b"").unwrap();
        fs::write(
            x.join("xla-cpu.json"),
            r#"{"python": "3.11", "torch_tpu": "0.2.0", "libtpu": "0.0.52", "site": "site", "shim": "shim.so",
                "plugin": {"dist": "lammps-jax-pjrt-cpu", "version": "0.11.2", "pjrt_api": "0.115", "path": "plugin/p.so"}}"#,
        )
        .unwrap();
        x
    };
    let cases = [
        (
            install("noplugin", b"x", false),
            "the CPU PJRT plugin is missing: ",
        ),
        (
            install("badshim", b"garbage", true),
            "the PJRT shim cannot be used: ",
        ),
    ];
    for (x, says) in &cases {
        let out = common::tpuport(&venv(), 120)
            .env("TPUPORT_XLA_CPU", x)
            .args(["run", "--target", "xla-cpu", "--no-tui"])
            .arg(&script)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let line = err
            .lines()
            .find(|l| l.starts_with("tpuport: --target xla-cpu: "))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(
            line.contains(says) && line.ends_with("(run scripts/bootstrap-xla-cpu again)"),
            "{line}"
        );
        // Not asked for: the sim, saying why.
        let out = common::tpuport(&venv(), 120)
            .env("TPUPORT_XLA_CPU", x)
            .args(["run", "--no-tui"])
            .arg(&script)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains("running on the sim target (auto: no TPU on this machine")
                && err.contains(&format!("xla-cpu cannot serve: {says}")),
            "{err}"
        );
    }
}

/// A file whose lines end in lone carriage returns (classic Mac) is refused with what to do,
/// and left as it was (a fuzz case: the fixes' line arithmetic lost the lines after a comment).
#[test]
fn lone_carriage_returns_are_refused_and_the_file_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let text = "import torch_xla.core.xla_model as xm # note\rxm.master_print(\"loss\", 1)\r";
    let path = write(dir.path(), "train.py", text);
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["migrate", "--isolated", "--write"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lone carriage returns"),
        "{}",
        stderr(&out)
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
}
