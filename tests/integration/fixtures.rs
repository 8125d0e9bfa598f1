//! The rule fixtures, ruff-style: `tests/fixtures/<FAMILY>/<ID>.py` lists the cases the rule
//! must flag, then `# OK` near misses it must leave alone, then regressions. Each fixture runs
//! with only its own rule selected (and the rules that port the calls its `safe_if_ported`
//! names: its fix goes with theirs); the snapshot holds the diagnostics (as a user sees them),
//! the diff of the safe fixes, and the diff with `--unsafe-fixes` where that differs. Every
//! fix's output must parse: the whole file's, and each fix applied alone. A line
//! `# --- another module ---` starts another module, migrated alone (for what a rule judges
//! per file).
//!
//! Two ports: `rule_fixtures` snapshots `--to tpu` (the literal port), `rule_fixtures_portable`
//! the default `--to portable` for every rule whose portable fix differs (`*portable@*.snap`).
//!
//! A new fixture fails its first run and writes `tests/integration/snapshots/*.snap.new`: review
//! it, then accept it with `cargo insta accept` (or `INSTA_UPDATE=always cargo test`). One rule's
//! fixture alone: `INSTA_GLOB_FILTER='DEV/DEV004.py' cargo test --test integration fixtures::`.

use std::path::Path;

use tpuport::port::render;

use crate::each_file::Snapshots;
use tpuport::port::rules::Matcher;
use tpuport::port::{RuleIndex, RuleSet, Settings, Target, edit, migrate_source, parse};

/// Does the portable port of this fixture's rule differ from `--to tpu`?
fn portable_differs(path: &Path) -> bool {
    let id = path.file_stem().unwrap().to_str().unwrap();
    RuleSet::builtin()
        .get(id)
        .iter()
        .any(|r| r.portable_differs())
}

/// A line that starts another module of the fixture: for rules that judge a whole file (a
/// `safe_if_ported` device left anywhere in it), each module is migrated alone.
const ANOTHER_MODULE: &str = "# --- another module ---\n";

/// The rules a fixture runs with: its own, and those whose fixes its fix goes with
/// (`safe_if_ported`: the rules that port those calls).
fn selected(id: &str) -> Vec<String> {
    let all = RuleSet::builtin();
    let mut ids = vec![id.to_string()];
    for r in all.get(id) {
        for other in &all.rules {
            if let Matcher::Call(names) = &other.matcher
                && names.iter().any(|n| r.safe_if_ported.contains(n))
                && !ids.contains(&other.id)
            {
                ids.push(other.id.clone());
            }
        }
    }
    ids
}

fn snapshot_for(path: &Path, to: Target) -> String {
    let id = path.file_stem().unwrap().to_str().unwrap().to_string();
    let source = std::fs::read_to_string(path).unwrap();
    let mut rules = RuleSet::builtin();
    rules.filter(&selected(&id), &[]).unwrap();
    let index = RuleIndex::new(&rules);
    let name = format!(
        "{}/{}.py",
        path.parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap(),
        id
    );
    let modules: Vec<&str> = source.split(ANOTHER_MODULE).collect();
    let mut snap = String::new();
    for (i, module) in modules.iter().enumerate() {
        if i > 0 {
            snap.push_str(&format!("\n=== module {} ===\n", i + 1));
        }
        let source = if i > 0 {
            format!("{ANOTHER_MODULE}{module}")
        } else {
            module.to_string()
        };
        snap.push_str(&snapshot_module(&name, &source, &rules, &index, to));
    }
    snap
}

/// One module of a fixture: its findings and fixes.
fn snapshot_module(
    name: &str,
    source: &str,
    rules: &RuleSet,
    index: &RuleIndex,
    to: Target,
) -> String {
    let settings = |unsafe_fixes| Settings {
        unsafe_fixes,
        to,
        min_torch: None,
    };
    let safe = migrate_source(source, rules, index, settings(false));
    let unsafe_ = migrate_source(source, rules, index, settings(true));
    assert!(
        safe.internal_error.is_none(),
        "{name}: {:?}",
        safe.internal_error
    );
    assert!(
        unsafe_.internal_error.is_none(),
        "{name}: {:?}",
        unsafe_.internal_error
    );
    assert!(
        !safe.diagnostics.is_empty(),
        "{name}: the fixture must contain cases the rule flags"
    );
    // Each fix alone, applied to the fixture, leaves valid Python (the fix loop reverts a file
    // whose result does not parse; this names the fix that broke it).
    for d in &unsafe_.diagnostics {
        let Some(fix) = &d.fix else { continue };
        let (alone, _) = edit::apply_fixes(source, &[(0, fix)]);
        assert!(
            parse::is_valid(&alone),
            "{name}: the fix of the finding at {:?} ({}) does not parse:\n{}",
            d.range,
            d.message,
            render::unified_diff(name, source, &alone)
        );
    }
    for (out, unsafe_fixes) in [(&safe.output, false), (&unsafe_.output, true)] {
        let Some(out) = out else { continue };
        assert!(
            parse::is_valid(out),
            "{name}: the fixed file does not parse:\n{out}"
        );
        // Idempotent: migrating the result again, with the same settings, changes nothing.
        let again = migrate_source(out, rules, index, settings(unsafe_fixes));
        if let Some(twice) = &again.output {
            panic!(
                "{name}: a second migration (unsafe fixes: {unsafe_fixes}) changed the file again:\n{}",
                render::unified_diff(name, out, twice)
            );
        }
    }

    let required = Settings::default().required();
    let mut snap = render::diagnostics_text(name, source, &safe.diagnostics, rules, required, true);
    match &safe.output {
        Some(out) => snap.push_str(&render::unified_diff(name, source, out)),
        None => snap.push_str("(no safe fixes)\n"),
    }
    if unsafe_.output != safe.output {
        snap.push_str("\n--- with --unsafe-fixes ---\n");
        let out = unsafe_.output.as_deref().unwrap_or(source);
        snap.push_str(&render::unified_diff(name, source, out));
    }
    snap
}

const LITERAL: Snapshots = Snapshots {
    module: "fixtures",
    test: "rule_fixtures",
    dir: "fixtures",
    depth: 1,
};

const PORTABLE: Snapshots = Snapshots {
    test: "rule_fixtures_portable",
    ..LITERAL
};

/// `--to tpu`: the literal port.
#[test]
fn rule_fixtures() {
    LITERAL.each(|path| {
        let snap = snapshot_for(path, Target::Tpu);
        LITERAL.note(path, &snap);
        insta::assert_snapshot!(snap);
    });
}

/// The default, `--to portable`, for the rules whose fix differs there.
#[test]
fn rule_fixtures_portable() {
    PORTABLE.each(|path| {
        if portable_differs(path) {
            let snap = snapshot_for(path, Target::Portable);
            PORTABLE.note(path, &snap);
            insta::assert_snapshot!(snap);
        }
    });
}

/// Every rule with a fix has a fixture, and every fixture names a rule.
#[test]
fn every_rule_has_a_fixture() {
    let rules = RuleSet::builtin();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut missing = vec![];
    for r in &rules.rules {
        // PRG001 judges a whole run's programs, not one file, and KRN005 reads the project's
        // setup.py files, LIB025 and DEV022 its YAML configs, DEV024 its build files beside a
        // notebook: tests/integration/programs.rs.
        if ["PRG001", "KRN005", "LIB025", "DEV022", "DEV024"].contains(&r.id.as_str()) {
            continue;
        }
        let f = root.join(&r.family).join(format!("{}.py", r.id));
        if !f.exists() && !missing.contains(&r.id) {
            missing.push(r.id.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "rules without a fixture in tests/fixtures: {missing:?}"
    );
    for fam in std::fs::read_dir(&root).unwrap() {
        for f in std::fs::read_dir(fam.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            let id = p.file_stem().unwrap().to_str().unwrap().to_string();
            assert!(!rules.get(&id).is_empty(), "{} names no rule", p.display());
        }
    }
}
