//! Every rule's documented example (`example.before` / `example.after` in rules/*.toml) is
//! checked: migrating `before` with all built-in rules and --unsafe-fixes gives `after`, and
//! `after` migrates to itself.

use tpuport::port::{RuleIndex, RuleSet, Settings, migrate_source};

#[test]
fn rule_examples_hold() {
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let settings = Settings { unsafe_fixes: true };
    let mut failures = vec![];
    for r in &rules.rules {
        let Some(ex) = &r.example else { continue };
        let before = ex.before.trim_start_matches('\n');
        let after = ex.after.trim_start_matches('\n');
        let out = migrate_source(before, &rules, &index, settings);
        let got = out.output.unwrap_or_else(|| before.to_string());
        if got != after {
            failures.push(format!("{}:\n--- expected\n{after}--- got\n{got}", r.id));
        }
        let again = migrate_source(after, &rules, &index, settings);
        if again.output.is_some() {
            failures.push(format!(
                "{}: `after` is not stable under a second migration",
                r.id
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fixable_rules_document_an_example() {
    let rules = RuleSet::builtin();
    let mut seen = std::collections::HashSet::new();
    let missing: Vec<&str> = rules
        .rules
        .iter()
        .filter(|r| r.action.is_some() && seen.insert(r.id.clone()))
        .filter(|r| rules.get(&r.id).iter().all(|x| x.example.is_none()))
        .map(|r| r.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "fixable rules without an example: {missing:?}"
    );
}
