//! `tpuport test-rules DIR`: a user's rule files checked against their own fixtures, the way the
//! built-in rules are (ast-grep's `test` for tpuport rules).
//!
//! For each rule defined in DIR's `*.toml`, the fixture `ID.py` (in DIR, `DIR/tests/` or
//! `DIR/fixtures/`, optionally under a family folder) lists the cases the rule must flag, then a
//! `# OK` line and the near misses it must leave alone. Run with only that rule, the fixture
//! must give at least one finding, none from the `# OK` line on, migrate to code that parses,
//! and migrate again to itself (with and without unsafe fixes). Where `ID.fixed.py` sits next to
//! the fixture, the safe migration must equal it (`--update` writes it). The rule's documented
//! example (`example.before` → `example.after`, and `after` stable) must hold too.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{RuleIndex, RuleSet, Settings, Target, migrate_source, parse, render};

/// What `test-rules` found for one rule.
pub struct RuleReport {
    pub id: String,
    pub fixture: Option<PathBuf>,
    pub findings: usize,
    pub problems: Vec<String>,
}

/// Check every rule defined in `dir` against its fixture. `update` (re)writes `ID.fixed.py`.
pub fn run(dir: &Path, update: bool) -> Result<Vec<RuleReport>> {
    let all = RuleSet::load(&[dir.to_path_buf()])?;
    let prefix = dir.display().to_string();
    let mut ids: Vec<String> = all
        .rules
        .iter()
        .filter(|r| r.origin.starts_with(&prefix))
        .map(|r| r.id.clone())
        .collect();
    ids.dedup();
    if ids.is_empty() {
        bail!(
            "{} defines no rules: put *.toml rule files there (see docs/writing-rules.md)",
            dir.display()
        );
    }
    let mut reports = vec![];
    for id in ids {
        let mut set = RuleSet::load(&[dir.to_path_buf()])?;
        set.filter(std::slice::from_ref(&id), &[])?;
        // `filter` keeps rules whose id starts with the code: keep this id only.
        set.rules.retain(|r| r.id == id);
        let family = set
            .rules
            .first()
            .map(|r| r.family.clone())
            .unwrap_or_default();
        let mut report = RuleReport {
            id: id.clone(),
            fixture: find_fixture(dir, &family, &id),
            findings: 0,
            problems: vec![],
        };
        report.problems.extend(example_problems(&set));
        match report.fixture.clone() {
            Some(f) => check_fixture(&set, &f, update, &mut report)?,
            None => report.problems.push(format!(
                "no fixture: write {}/tests/{id}.py with the cases the rule must flag, then a `# OK` line and near misses it must leave alone",
                dir.display()
            )),
        }
        reports.push(report);
    }
    Ok(reports)
}

fn find_fixture(dir: &Path, family: &str, id: &str) -> Option<PathBuf> {
    let file = format!("{id}.py");
    [
        dir.join(&file),
        dir.join("tests").join(&file),
        dir.join("fixtures").join(&file),
        dir.join(family).join(&file),
        dir.join("tests").join(family).join(&file),
        dir.join("fixtures").join(family).join(&file),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Every documented example of the rules in `set`, migrated with them all and unsafe fixes:
/// `example.before` must give `example.after`, and `after` must migrate to itself. One line (and
/// a diff) per example that does not hold; none when all do.
pub fn example_problems(set: &RuleSet) -> Vec<String> {
    let index = RuleIndex::new(set);
    let mut problems = vec![];
    for r in &set.rules {
        let Some(ex) = &r.example else { continue };
        let before = ex.before.trim_start_matches('\n');
        // `after` is the literal port; `portable` (where given) the default one, else the same.
        let modes = [
            (Target::Tpu, "example.after", ex.after.as_str()),
            (
                Target::Portable,
                if ex.portable.is_some() {
                    "example.portable"
                } else {
                    "example.after (also the portable port: give example.portable where it differs)"
                },
                ex.portable.as_deref().unwrap_or(&ex.after),
            ),
        ];
        for (to, name, after) in modes {
            let settings = Settings {
                unsafe_fixes: true,
                to,
                min_torch: None,
            };
            let after = after.trim_start_matches('\n');
            let out = migrate_source(before, set, &index, settings);
            let got = out.output.unwrap_or_else(|| before.to_string());
            if got != after {
                problems.push(format!(
                    "{}: example.before does not migrate to {name} with --to {} (line {} of {}):\n{}",
                    r.id,
                    to.as_str(),
                    r.line,
                    r.origin,
                    render::unified_diff("example", after, &got)
                ));
            }
            if migrate_source(after, set, &index, settings)
                .output
                .is_some()
            {
                problems.push(format!(
                    "{}: {name} is not stable under a second migration with --to {} (line {} of {})",
                    r.id,
                    to.as_str(),
                    r.line,
                    r.origin
                ));
            }
        }
    }
    problems
}

fn check_fixture(set: &RuleSet, path: &Path, update: bool, report: &mut RuleReport) -> Result<()> {
    let name = path.display().to_string();
    let source = std::fs::read_to_string(path).with_context(|| format!("cannot read {name}"))?;
    let index = RuleIndex::new(set);
    let safe = migrate_source(&source, set, &index, Settings::default());
    report.findings = safe.diagnostics.len();
    let ok_line = source
        .lines()
        .position(|l| l.trim_start().starts_with("# OK"))
        .map(|i| i + 1);
    let lines = render::LineIndex::new(&source);
    let mut flagged_ok = vec![];
    for d in &safe.diagnostics {
        let (line, _) = lines.line_col(&source, d.range.start());
        if ok_line.is_some_and(|ok| line >= ok) {
            flagged_ok.push(line.to_string());
        }
    }
    if safe.diagnostics.is_empty() {
        report
            .problems
            .push(format!("{name}: the rule flags nothing in its fixture"));
    }
    if !flagged_ok.is_empty() {
        report.problems.push(format!(
            "{name}: findings after the `# OK` line (lines {}): the rule flags a near miss",
            flagged_ok.join(", ")
        ));
    }
    for unsafe_fixes in [false, true] {
        let settings = Settings {
            unsafe_fixes,
            ..Settings::default()
        };
        let out = migrate_source(&source, set, &index, settings);
        let mode = if unsafe_fixes {
            " with unsafe fixes"
        } else {
            ""
        };
        if let Some(e) = &out.internal_error {
            report.problems.push(format!("{name}{mode}: {e}"));
            continue;
        }
        let Some(text) = out.output else { continue };
        if !parse::is_valid(&text) {
            let mut msg = format!("{name}{mode}: the migrated fixture does not parse:\n");
            let _ = write!(msg, "{}", render::unified_diff(&name, &source, &text));
            report.problems.push(msg);
            continue;
        }
        if let Some(twice) = migrate_source(&text, set, &index, settings).output {
            report.problems.push(format!(
                "{name}{mode}: a second migration changes the result again:\n{}",
                render::unified_diff(&name, &text, &twice)
            ));
        }
    }
    let fixed_path = path.with_extension("fixed.py");
    let fixed = safe.output.clone().unwrap_or_else(|| source.clone());
    if update {
        std::fs::write(&fixed_path, &fixed)
            .with_context(|| format!("cannot write {}", fixed_path.display()))?;
    } else if fixed_path.is_file() {
        let want = std::fs::read_to_string(&fixed_path)
            .with_context(|| format!("cannot read {}", fixed_path.display()))?;
        if want != fixed {
            report.problems.push(format!(
                "{name}: the safe migration differs from {} (review, then `--update`):\n{}",
                fixed_path.display(),
                render::unified_diff(&fixed_path.display().to_string(), &want, &fixed)
            ));
        }
    }
    Ok(())
}

/// The report as the terminal shows it, and whether every rule passed.
pub fn render(reports: &[RuleReport]) -> (String, bool) {
    let mut out = String::new();
    let mut failed = 0;
    for r in reports {
        if r.problems.is_empty() {
            let _ = writeln!(
                out,
                "PASS {} ({} findings in its fixture)",
                r.id, r.findings
            );
        } else {
            failed += 1;
            let _ = writeln!(out, "FAIL {}", r.id);
            for p in &r.problems {
                for (i, l) in p.lines().enumerate() {
                    let _ = writeln!(out, "  {}{l}", if i == 0 { "- " } else { "  " });
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "{} rules: {} passed, {failed} failed",
        reports.len(),
        reports.len() - failed
    );
    (out, failed == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULE: &str = r#"
family = "MYX"
title = "test"

[[rule]]
id = "MYX001"
name = "old-sync"
message = "`{qualified}` is the old sync"
fix = "safe"
match.call = ["mylib.old_sync"]
action.rename = "mylib.new_sync"
example.before = '''
import mylib
mylib.old_sync()
'''
example.after = '''
import mylib
mylib.new_sync()
'''
"#;

    fn setup(fixture: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("myx.toml"), RULE).unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/MYX001.py"), fixture).unwrap();
        dir
    }

    #[test]
    fn a_good_fixture_passes_and_update_pins_the_result() {
        let dir = setup("import mylib\nmylib.old_sync()\n\n# OK\nmylib.other()\n");
        let reports = run(dir.path(), true).unwrap();
        let (text, ok) = render(&reports);
        assert!(ok, "{text}");
        assert!(text.contains("PASS MYX001 (1 findings"), "{text}");
        let fixed = std::fs::read_to_string(dir.path().join("tests/MYX001.fixed.py")).unwrap();
        assert!(fixed.contains("mylib.new_sync()"));
        // A changed expectation is reported with a diff.
        std::fs::write(dir.path().join("tests/MYX001.fixed.py"), "import mylib\n").unwrap();
        let (text, ok) = render(&run(dir.path(), false).unwrap());
        assert!(!ok && text.contains("differs from"), "{text}");
    }

    #[test]
    fn near_misses_flagged_and_missing_fixtures_fail() {
        let dir = setup("import mylib\nmylib.old_sync()\n# OK\nmylib.old_sync()\n");
        let (text, ok) = render(&run(dir.path(), false).unwrap());
        assert!(
            !ok && text.contains("after the `# OK` line (lines 4)"),
            "{text}"
        );
        std::fs::remove_file(dir.path().join("tests/MYX001.py")).unwrap();
        let (text, ok) = render(&run(dir.path(), false).unwrap());
        assert!(!ok && text.contains("no fixture"), "{text}");
    }
}
