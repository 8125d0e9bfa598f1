//! The command snippets a user copies from the documentation run as shown. A ```sh block right
//! after the line `<!-- doc-test -->` in README.md or a page of docs/ is one: each page's blocks
//! run in order, as one shell session, in a fresh folder that stands for the root of a clone
//! (copies of `examples/`, `tests/rules_valid/` and `tests/data/check/`), with the built
//! `tpuport` first on PATH, the project venv as `$VIRTUAL_ENV` and `$HOME` in the folder. Every
//! command must exit 0; `tpuport migrate`, `check` and `doctor` may also exit 1, their answer
//! "findings" / "needs work or blocked" / "a check failed". One test for every page, so that the
//! commands that start Python (about 5 s each for `import torch`) are paid for once per run of the
//! suite. The install commands themselves (pip, uv, cargo install) are not run here: the wheel
//! is built and installed by `scripts/test-wheel`.

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;

use crate::common::{repo, venv};
use crate::docs::doc_files;

const MARK: &str = "<!-- doc-test -->";

/// The marked blocks of a page: (line of the fence, the commands, continuation lines joined).
fn snippets(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != MARK {
            i += 1;
            continue;
        }
        let start = i + 1;
        assert!(
            lines.get(start).is_some_and(|l| l.starts_with("```sh")),
            "line {}: `{MARK}` must be followed by a ```sh block",
            i + 1
        );
        let mut commands: Vec<String> = Vec::new();
        let mut pending = String::new();
        i = start + 1;
        while i < lines.len() && !lines[i].starts_with("```") {
            let line = lines[i];
            i += 1;
            let t = line.trim();
            if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
                continue;
            }
            if let Some(head) = line.strip_suffix('\\') {
                pending.push_str(head);
                continue;
            }
            pending.push_str(line);
            commands.push(std::mem::take(&mut pending));
        }
        out.push((start + 1, commands));
    }
    out
}

/// `s` as one word for bash.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell session of a page: each command, then a check of its exit code.
fn session(page: &str, blocks: &[(usize, Vec<String>)]) -> String {
    let mut script = String::from("set -u -o pipefail\n");
    for (line, commands) in blocks {
        for c in commands {
            let answers = ["migrate", "check", "doctor"]
                .iter()
                .any(|sub| c.trim_start().starts_with(&format!("tpuport {sub}")));
            let allowed = if answers { 1 } else { 0 };
            let what = quoted(&format!("{page}, block at line {line}: {c}"));
            script.push_str(&format!(
                "echo \"\\$ \"{cmd} >&2\n{c}\nrc=$?\nif [ $rc -gt {allowed} ]; then echo \"doc-test: exit $rc from \"{what} >&2; exit 100; fi\n",
                cmd = quoted(c)
            ));
        }
    }
    script
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            if e.file_name() != "__pycache__" {
                copy_dir(&e.path(), &dest);
            }
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn marker_blocks_are_found_with_their_commands() {
    let page = "text\n<!-- doc-test -->\n```sh\n# a comment\ntpuport migrate a.py   # findings\n\ntpuport run \\\n  b.py\n```\n```sh\nnot marked\n```\n";
    let blocks = snippets(page);
    assert_eq!(
        blocks,
        [(
            3,
            vec![
                "tpuport migrate a.py   # findings".to_string(),
                "tpuport run   b.py".to_string()
            ]
        )]
    );
    let s = session("p.md", &blocks);
    assert!(s.contains("if [ $rc -gt 1 ]"), "{s}");
    assert!(s.contains("if [ $rc -gt 0 ]"), "{s}");
    // A command that fails stops the session and is named; `cd` carries over to the next line.
    let failing = [(
        7,
        vec![
            "cd /".to_string(),
            "test \"$PWD\" = /".to_string(),
            "(exit 3)".to_string(),
            "echo never".to_string(),
        ],
    )];
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(session("p.md", &failing))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(100), "{stderr}");
    assert!(
        stderr.contains("doc-test: exit 3 from p.md, block at line 7: (exit 3)"),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("never"));
}

#[test]
fn the_snippets_a_user_copies_run() {
    let pages: Vec<_> = doc_files()
        .into_iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let blocks = snippets(&text);
            let name = f.strip_prefix(repo()).unwrap().display().to_string();
            (!blocks.is_empty()).then_some((name, blocks))
        })
        .collect();
    let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"README.md"),
        "README.md has snippets marked `{MARK}` (install, quick start): {names:?}"
    );
    let venv = venv();
    let cache = std::env::var_os("TPUPORT_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(&std::env::var("HOME").unwrap()).join(".cache/tpuport"));
    let bin = Path::new(env!("CARGO_BIN_EXE_tpuport")).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    for (name, blocks) in &pages {
        let root = tempfile::tempdir().unwrap();
        for part in ["examples", "tests/rules_valid", "tests/data/check"] {
            copy_dir(&repo().join(part), &root.path().join(part));
        }
        std::fs::create_dir(root.path().join("home")).unwrap();
        let out = Command::new("bash")
            .arg("-c")
            .arg(session(name, blocks))
            .current_dir(root.path())
            .env("PATH", &path)
            .env("HOME", root.path().join("home"))
            .env("TPUPORT_CACHE", &cache)
            .env("VIRTUAL_ENV", &venv)
            .env_remove("PYTHONPATH")
            .timeout(Duration::from_secs(900))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: a snippet failed (exit {:?})\n--- stdout\n{}\n--- stderr\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
