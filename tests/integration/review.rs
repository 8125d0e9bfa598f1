//! `tpuport migrate -i` without a terminal: the fixes on offer are `--write`'s (accepting all of
//! them gives `--write`'s file), a skipped fix stays out while the others go in, the screen
//! drawn into ratatui's TestBackend (snapshot), and the refusal when stdout is not a terminal.
//! The real terminal is driven in `tmux.rs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tpuport::port::driver::{Format, Mode, Options};
use tpuport::port::review::{self, Decision, Reviewer};
use tpuport::port::{RuleSet, Settings};
use tpuport::ui::review::app::Review;
use tpuport::ui::review::draw::{View, draw};

use crate::common::repo;
use crate::tmux::{Tmux, have_tmux, start};

const SCRIPT: &str =
    "import torch\n\nx = torch.zeros(3, device=\"cuda\")\ntorch.cuda.synchronize()\ny = x.cuda()\n";

fn options(paths: Vec<PathBuf>, unsafe_fixes: bool) -> Options {
    Options {
        paths,
        mode: Mode::Write,
        format: Format::Text,
        settings: Settings {
            unsafe_fixes,
            ..Settings::default()
        },
        no_ignore: false,
        max_file_size: 8_000_000,
        quiet: false,
        statistics: false,
        exclude: None,
    }
}

fn write_mode(path: &Path, unsafe_fixes: bool) {
    let mut c = Command::cargo_bin("tpuport").unwrap();
    c.args(["migrate", "--write", "--isolated"]);
    if unsafe_fixes {
        c.arg("--unsafe-fixes");
    }
    c.arg(path).assert().code(predicates::ord::lt(2));
}

/// Accept every fix on offer (as `A` on each rule would), finish, and return the result.
fn accept_all(path: &Path, unsafe_fixes: bool) {
    let rules = RuleSet::builtin();
    let opts = options(vec![path.to_path_buf()], unsafe_fixes);
    let r = Reviewer::new(&rules, &opts);
    let plan = r.plan();
    let decisions = vec![Decision::Accepted; plan.proposals.len()];
    let choices = review::choices(&plan, &decisions, &BTreeMap::new());
    for (f, c) in plan.files.iter().zip(&choices) {
        r.finish_file(f, c);
    }
}

#[test]
fn accepting_every_fix_gives_what_write_gives() {
    let dir = crate::common::project();
    let mut n = 0;
    for folder in ["examples/cuda", "examples/xla"] {
        for e in std::fs::read_dir(folder).unwrap() {
            let src = e.unwrap().path();
            if src.extension().is_none_or(|x| x != "py") {
                continue;
            }
            for unsafe_fixes in [false, true] {
                let name = src.file_name().unwrap();
                let (a, b) = (dir.path().join("a"), dir.path().join("b"));
                std::fs::create_dir_all(&a).unwrap();
                std::fs::create_dir_all(&b).unwrap();
                std::fs::copy(&src, a.join(name)).unwrap();
                std::fs::copy(&src, b.join(name)).unwrap();
                write_mode(&a.join(name), unsafe_fixes);
                accept_all(&b.join(name), unsafe_fixes);
                assert_eq!(
                    std::fs::read_to_string(a.join(name)).unwrap(),
                    std::fs::read_to_string(b.join(name)).unwrap(),
                    "{} (unsafe fixes: {unsafe_fixes})",
                    src.display()
                );
                n += 1;
            }
        }
    }
    assert!(n >= 10, "{n} scripts");
}

/// The same on every rule fixture, through the library: the fix loop with every finding
/// accepted is the fix loop.
#[test]
fn every_fixture_accepted_whole_is_the_plain_migration() {
    use tpuport::port::choice::Choices;
    use tpuport::port::{RuleIndex, migrate_chosen, migrate_source_at};
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let mut n = 0;
    for family in std::fs::read_dir("tests/fixtures").unwrap() {
        for e in std::fs::read_dir(family.unwrap().path()).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if !name.ends_with(".py") || name.ends_with(".fixed.py") {
                continue;
            }
            let src = std::fs::read_to_string(&p).unwrap();
            for unsafe_fixes in [false, true] {
                let s = Settings {
                    unsafe_fixes,
                    ..Settings::default()
                };
                let plain = migrate_source_at(&src, Some(&p), &rules, &index, s);
                let all = Choices::all(plain.diagnostics.len());
                let (chosen, _) = migrate_chosen(&src, Some(&p), &rules, &index, s, Some(&all));
                assert_eq!(
                    plain.output,
                    chosen.output,
                    "{} ({unsafe_fixes})",
                    p.display()
                );
                n += 1;
            }
        }
    }
    assert!(n > 100, "{n} fixtures");
}

#[test]
fn a_skipped_fix_stays_out_and_the_others_go_in() {
    let dir = crate::common::project();
    let path = dir.path().join("s.py");
    std::fs::write(&path, format!("\u{feff}{}", SCRIPT.replace('\n', "\r\n"))).unwrap();
    let rules = RuleSet::builtin();
    let opts = options(vec![path.clone()], false);
    let r = Reviewer::new(&rules, &opts);
    let plan = r.plan();
    let ids: Vec<&str> = plan.proposals.iter().map(|p| p.rule.as_str()).collect();
    assert_eq!(ids, ["DEV016", "CUD007", "DEV006"]);
    let decisions = [Decision::Accepted, Decision::Skipped, Decision::Accepted];
    let choices = review::choices(&plan, &decisions, &BTreeMap::new());
    let results: Vec<_> = plan
        .files
        .iter()
        .zip(&choices)
        .map(|(f, c)| r.finish_file(f, c))
        .collect();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.starts_with(b"\xEF\xBB\xBF"), "the BOM is kept");
    let text = String::from_utf8(bytes[3..].to_vec()).unwrap();
    assert_eq!(
        text,
        "import torch\r\n\r\nx = torch.zeros(3, device=torch.accelerator.current_accelerator())\r\ntorch.cuda.synchronize()\r\ny = x.to(torch.accelerator.current_accelerator())\r\n"
    );
    let (summary, code) = review::summary(&plan, &decisions, &results);
    assert_eq!(code, 1, "a skipped fix is left: {summary}");
    assert!(summary.contains("1 changed"), "{summary}");
    assert!(
        summary.contains("fixes accepted: 2  (DEV006 ×1, DEV016 ×1)"),
        "{summary}"
    );
    assert!(
        summary.contains("fixes skipped: 1  (CUD007 ×1)"),
        "{summary}"
    );
    // Nothing accepted: nothing written.
    let skip_all = [Decision::Skipped; 3];
    let choices = review::choices(&plan, &skip_all, &BTreeMap::new());
    let res = r.finish_file(&plan.files[0], &choices[0]);
    assert!(!res.written && res.applied.is_empty());
}

/// Every other fix accepted in each example: the files still parse, and every accepted fix went
/// in or is named in the summary with why.
#[test]
fn half_the_fixes_accepted() {
    let dir = crate::common::project();
    let mut paths = vec![];
    for folder in ["examples/cuda", "examples/xla"] {
        for e in std::fs::read_dir(folder).unwrap() {
            let src = e.unwrap().path();
            if src.extension().is_some_and(|x| x == "py") {
                let to = dir.path().join(src.file_name().unwrap());
                std::fs::copy(&src, &to).unwrap();
                paths.push(to);
            }
        }
    }
    let rules = RuleSet::builtin();
    let opts = options(paths, true);
    let r = Reviewer::new(&rules, &opts);
    let plan = r.plan();
    assert!(plan.proposals.len() > 40, "{}", plan.proposals.len());
    let decisions: Vec<Decision> = (0..plan.proposals.len())
        .map(|i| [Decision::Accepted, Decision::Skipped][i % 2])
        .collect();
    let choices = review::choices(&plan, &decisions, &BTreeMap::new());
    let results: Vec<_> = plan
        .files
        .iter()
        .zip(&choices)
        .map(|(f, c)| r.finish_file(f, c))
        .collect();
    for ((f, c), res) in plan.files.iter().zip(&choices).zip(&results) {
        let text = std::fs::read_to_string(&f.path).unwrap();
        assert!(tpuport::port::parse::is_valid(&text), "{}", f.display);
        assert!(res.issue.is_none(), "{:?}", res.issue);
        for a in &c.accepted {
            assert!(
                res.applied.contains(a) || res.not_applied.iter().any(|(x, _)| x == a),
                "{}: {a}",
                f.display
            );
        }
        assert!(res.written, "{}", f.display);
    }
    let (summary, code) = review::summary(&plan, &decisions, &results);
    assert_eq!(code, 1, "{summary}");
}

#[test]
fn an_edited_fix_writes_what_was_saved() {
    let dir = crate::common::project();
    let path = dir.path().join("s.py");
    std::fs::write(&path, SCRIPT).unwrap();
    let rules = RuleSet::builtin();
    let opts = options(vec![path.clone()], false);
    let r = Reviewer::new(&rules, &opts);
    let plan = r.plan();
    let p = &plan.proposals[1];
    let fix = review::fix_of(&plan, p).unwrap();
    let (span, text) = review::edit_span(&plan.files[0], fix);
    assert_eq!(text, "torch.accelerator.synchronize()");
    let edited = review::edited_fix(fix, span, "torch.accelerator.synchronize()  # was cuda\n");
    let decisions = [Decision::Skipped, Decision::Accepted, Decision::Skipped];
    let choices = review::choices(&plan, &decisions, &BTreeMap::from([(1, edited)]));
    r.finish_file(&plan.files[0], &choices[0]);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        SCRIPT.replace(
            "torch.cuda.synchronize()",
            "torch.accelerator.synchronize()  # was cuda"
        )
    );
}

#[test]
fn review_screen() {
    let rules = RuleSet::builtin();
    let opts = options(vec![PathBuf::from("tests/data/review.py")], false);
    let r = Reviewer::new(&rules, &opts);
    let plan = r.plan();
    let mut app = Review::new(plan.proposals.iter().map(|p| p.rule.clone()).collect());
    app.key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('y'),
        crossterm::event::KeyModifiers::NONE,
    ));
    let p = &plan.proposals[app.current];
    let file = &plan.files[p.file];
    let diff = r.preview(file, p.diag, None);
    let doc = r.doc(&p.rule);
    let view = View::of(&plan, p, &diff, &doc, false);
    let mut t = Terminal::new(TestBackend::new(100, 32)).unwrap();
    t.draw(|f| draw(f, &app, &view)).unwrap();
    insta::assert_snapshot!(format!("{}", t.backend()));
}

#[test]
fn without_a_terminal_it_says_what_to_use() {
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["migrate", "-i", "tests/data/review.py"])
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8_lossy(&out);
    assert!(
        err.contains("needs a terminal") && err.contains("--diff") && err.contains("--write"),
        "{err}"
    );
    for conflict in [
        &["--write"][..],
        &["--diff"],
        &["--check"],
        &["--output-format", "json"],
    ] {
        Command::cargo_bin("tpuport")
            .unwrap()
            .args(["migrate", "-i", "tests/data/review.py"])
            .args(conflict)
            .assert()
            .code(2);
    }
}

// ---- in a real terminal (tmux; helpers in `tmux.rs`) ----------------------------------------

/// `tests/data/review.py` copied to a new folder as `train.py`, and `tpuport migrate -i` started
/// on it in a tmux session `name` (`env`: assignments put before the command).
fn review_in_tmux(name: &str, env: &str) -> (tempfile::TempDir, PathBuf, Tmux) {
    let dir = crate::common::project();
    let script = dir.path().join("train.py");
    std::fs::copy(repo().join("tests/data/review.py"), &script).unwrap();
    let t = start(name);
    let line = format!(
        "cd {} && {env}{} migrate -i --isolated train.py; echo exit=$?",
        dir.path().display(),
        env!("CARGO_BIN_EXE_tpuport"),
    );
    t.send(&[&line, "Enter"]);
    (dir, script, t)
}

/// `tpuport migrate -i` in a real terminal: accept the first fix (DEV016), skip the second
/// (CUD007), accept the third (DEV006); the file then has the first and third fixes only, and the
/// summary says so. No Python needed.
#[test]
fn review_screen_accepts_one_fix_and_skips_another() {
    if !have_tmux() {
        return;
    }
    let (dir, script, t) = review_in_tmux("review", "");
    let s = t.wait("the first fix", 30, |s| s.contains("fix 1 of 3"));
    assert!(s.contains("train.py:3:27") && s.contains("DEV016"), "{s}");
    assert!(
        s.contains("+x = torch.zeros(3, device=torch.accelerator.current_accelerator())"),
        "{s}"
    );
    assert!(s.contains("Rule DEV016"), "the rule's doc is shown:\n{s}");
    t.send(&["y"]);
    let s = t.wait("the second fix", 10, |s| s.contains("fix 2 of 3"));
    assert!(s.contains("CUD007") && s.contains("accepted 1"), "{s}");
    assert!(s.contains("+torch.accelerator.synchronize()"), "{s}");
    t.send(&["n"]);
    let s = t.wait("the third fix", 10, |s| s.contains("fix 3 of 3"));
    assert!(s.contains("DEV006") && s.contains("skipped 1"), "{s}");
    t.send(&["?"]);
    t.wait("the help", 10, |s| s.contains("Keys (any key closes)"));
    t.send(&["?"]);
    t.wait("the help to close", 10, |s| {
        !s.contains("Keys (any key closes)")
    });
    t.send(&["y"]);
    let s = t.wait("the summary and the prompt", 30, |s| {
        s.contains("exit=") && s.trim_end().ends_with("READY$")
    });
    assert!(s.contains("1 changed (train.py)"), "{s}");
    assert!(
        s.contains("fixes accepted: 2  (DEV006 ×1, DEV016 ×1)"),
        "{s}"
    );
    assert!(s.contains("fixes skipped: 1  (CUD007 ×1)"), "{s}");
    assert!(s.contains("exit=1"), "a skipped fix is left: {s}");
    assert!(!s.contains("fix 3 of 3"), "the review screen is gone:\n{s}");
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "import torch\n\nx = torch.zeros(3, device=torch.accelerator.current_accelerator())\ntorch.cuda.synchronize()\ny = x.to(torch.accelerator.current_accelerator())\n"
    );
    // No temp file left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "requirements.txt")
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

/// `e` leaves the screen for `$EDITOR` (here a `sed` that appends a comment to the fixed line),
/// comes back, and the edit is what is written; `q` then skips the rest.
#[test]
fn review_screen_edits_a_fix_and_quits() {
    if !have_tmux() {
        return;
    }
    let (_dir, script, t) = review_in_tmux("review-edit", "EDITOR='sed -i \"s/)$/)  # edited/\"' ");
    t.wait("the first fix", 30, |s| s.contains("fix 1 of 3"));
    t.send(&["n"]);
    t.wait("the second fix", 10, |s| s.contains("fix 2 of 3"));
    t.send(&["e"]);
    let s = t.wait("the third fix, after the edit", 30, |s| {
        s.contains("fix 3 of 3")
    });
    assert!(s.contains("fix 2 edited and accepted"), "{s}");
    t.send(&["q"]);
    let s = t.wait("the summary", 30, |s| {
        s.contains("exit=") && s.trim_end().ends_with("READY$")
    });
    assert!(s.contains("review ended with q"), "{s}");
    assert!(s.contains("fixes accepted: 1  (CUD007 ×1)"), "{s}");
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "import torch\n\nx = torch.zeros(3, device=\"cuda\")\ntorch.accelerator.synchronize()  # edited\ny = x.cuda()\n"
    );
}
