//! Every rule's documented example (`example.before` / `example.after` in rules/*.toml) is
//! checked: migrating `before` with all built-in rules and --unsafe-fixes gives `after`, and
//! `after` migrates to itself.

use tpuport::port::RuleSet;
use tpuport::port::testrules::example_problems;

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
        .filter(|r| r.action.is_some() && seen.insert(r.id.clone()))
        .filter(|r| rules.get(&r.id).iter().all(|x| x.example.is_none()))
        .map(|r| r.id.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "fixable rules without an example: {missing:?}"
    );
}
