//! The explanation of rules that `tpuport rule` prints: the list of every rule by family, or
//! one rule's message, fix class, what it matches, its conditions, advice and example.

use std::fmt::Write;

use anyhow::{Result, bail};

use super::rules::{Matcher, RuleSet};

/// The text of `tpuport rule`: every rule (with `all`, or without an `id`), else the rule `id`
/// (any case) with all its variants.
pub fn explain(rules: &RuleSet, id: Option<&str>, all: bool) -> Result<String> {
    let mut o = String::new();
    if all || id.is_none() {
        for f in &rules.files {
            writeln!(o, "{}  {}  ({})", f.family, f.title, f.origin)?;
            let mut last = "";
            for r in rules.rules.iter().filter(|r| r.family == f.family) {
                if r.id != last {
                    writeln!(o, "  {}  {:<7} {}", r.id, r.fix.as_str(), r.name)?;
                    last = &r.id;
                }
            }
        }
        return Ok(o);
    }
    let id = id.unwrap_or_default().to_ascii_uppercase();
    let found = rules.get(&id);
    if found.is_empty() {
        bail!("no rule `{id}`; run `tpuport rule --all` to list the rule ids");
    }
    let first = found[0];
    writeln!(o, "{} ({})  [{}]", first.id, first.name, first.origin)?;
    for r in &found {
        writeln!(o)?;
        writeln!(o, "  {}", r.message)?;
        writeln!(o, "  fix: {}", r.fix.as_str())?;
        writeln!(o, "  matches: {}", describe(&r.matcher))?;
        for c in r.conditions() {
            writeln!(o, "  {c}")?;
        }
        if let Some(adv) = &r.advice {
            writeln!(o, "  advice: {}", adv.trim())?;
        }
        if let Some(ex) = &r.example {
            writeln!(o, "  before:\n{}", indent(&ex.before))?;
            writeln!(o, "  after:\n{}", indent(&ex.after))?;
        }
    }
    Ok(o)
}

/// What a matcher matches, in words.
fn describe(m: &Matcher) -> String {
    match m {
        Matcher::Lint(l) => format!("a syntax-tree analysis (`{}`): {}", l.name(), l.describe()),
        Matcher::Call(n) => format!("calls to {}", n.join(", ")),
        Matcher::Reference { exact, prefixes } => {
            let mut all = exact.clone();
            all.extend(prefixes.iter().map(|p| format!("{p}.*")));
            format!("references to {}", all.join(", "))
        }
        Matcher::Method(n) => format!("method calls .{}(...)", n.join("/.")),
        Matcher::Attribute(n) => format!("attributes .{}", n.join("/.")),
        Matcher::Keyword { names, calls } if calls.is_empty() => {
            format!("keyword {}=", names.join("=/"))
        }
        Matcher::Keyword { names, calls } => {
            format!("keyword {}= in {}", names.join("=/"), calls.join(", "))
        }
        Matcher::String {
            regex, positions, ..
        } => match positions {
            Some(p) => format!("strings /{}/ in {} positions", regex.as_str(), p.join(", ")),
            None => format!("strings /{}/ anywhere", regex.as_str()),
        },
    }
}

/// Indent an example by four spaces, without its trailing blank lines.
fn indent(s: &str) -> String {
    s.trim_end()
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_rule_is_an_error_and_ids_ignore_case() {
        let rules = RuleSet::builtin();
        let err = explain(&rules, Some("NOPE999"), false).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no rule `NOPE999`; run `tpuport rule --all` to list the rule ids"
        );
        let lower = explain(&rules, Some("dev001"), false).unwrap();
        assert!(lower.starts_with("DEV001 ("), "{lower}");
        assert_eq!(
            explain(&rules, None, false).unwrap(),
            explain(&rules, None, true).unwrap()
        );
    }
}
