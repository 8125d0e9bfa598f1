//! Every rule's documented example (`example.before` / `example.after` in rules/*.toml) is
//! checked: migrating `before` with all built-in rules and --unsafe-fixes gives `after`, and
//! `after` migrates to itself.

use std::path::Path;

use tpuport::port::testrules::example_problems;
use tpuport::port::{FixClass, RuleIndex, RuleSet, Settings, Target, migrate_source};

/// The same check `tpuport test-rules` runs on a user's rules, over every built-in rule.
#[test]
fn rule_examples_hold() {
    let failures = example_problems(&RuleSet::builtin());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixable_rules_document_an_example() {
    let rules = RuleSet::builtin();
    let mut seen = std::collections::HashSet::new();
    let missing: Vec<&str> = rules
        .rules
        .iter()
        .filter(|r| r.literal.action.is_some() && seen.insert(r.id.clone()))
        .filter(|r| rules.get(&r.id).iter().all(|x| x.example.is_none()))
        .map(|r| r.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "fixable rules without an example: {missing:?}"
    );
}

/// Every unsafe fix says why it is unsafe (its finding's note), in both ports: on every rule
/// fixture (its rule alone) and every documented example (all rules).
#[test]
fn every_unsafe_fix_says_why() {
    let all = RuleSet::builtin();
    let all_index = RuleIndex::new(&all);
    let mut missing = vec![];
    let mut check = |what: &str, src: &str, rules: &RuleSet, index: &RuleIndex| {
        for to in [Target::Portable, Target::Tpu] {
            let settings = Settings {
                unsafe_fixes: false,
                to,
                min_torch: None,
            };
            let out = migrate_source(src, rules, index, settings);
            for d in &out.diagnostics {
                let unsafe_ = d
                    .fix
                    .as_ref()
                    .is_some_and(|f| f.applicability == FixClass::Unsafe);
                if unsafe_ && d.note.as_deref().is_none_or(str::is_empty) {
                    missing.push(format!(
                        "{what} (--to {}): {} at {:?}: {}",
                        to.as_str(),
                        rules.rules[d.rule].id,
                        d.range,
                        d.message
                    ));
                }
            }
        }
    };
    for r in &all.rules {
        if let Some(ex) = &r.example {
            check(&format!("{} example", r.id), &ex.before, &all, &all_index);
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for fam in std::fs::read_dir(&root).unwrap() {
        for f in std::fs::read_dir(fam.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            let id = p.file_stem().unwrap().to_str().unwrap().to_string();
            let mut rules = RuleSet::builtin();
            rules.filter(std::slice::from_ref(&id), &[]).unwrap();
            let index = RuleIndex::new(&rules);
            let src = std::fs::read_to_string(&p).unwrap();
            check(&format!("fixture {id}"), &src, &rules, &index);
        }
    }
    assert!(
        missing.is_empty(),
        "unsafe fixes without a reason ({}):\n{}",
        missing.len(),
        missing.join("\n")
    );
}
