//! The explanation of rules that `tpuport rule` prints: the list of every rule by family, or
//! one rule's message, fix class, what it matches, its conditions, advice and example.

use std::fmt::Write;

use anyhow::{Result, bail};

use super::rules::{FixClass, Matcher, Portable, REPLACES_CUDA, Rule, RuleSet, Target};

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
                    writeln!(o, "  {}  {:<7} {}", r.id, r.literal.fix.as_str(), r.name)?;
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
        writeln!(o, "  fix: {}", fix_line(r))?;
        writeln!(o, "  matches: {}", describe(&r.matcher))?;
        for c in r.conditions() {
            writeln!(o, "  {c}")?;
        }
        if let Some(adv) = &r.advice {
            writeln!(o, "  advice: {}", adv.trim())?;
        }
        if let Some(ex) = &r.example {
            writeln!(o, "  before:\n{}", indent(&ex.before))?;
            match &ex.portable {
                Some(p) => {
                    writeln!(o, "  after (portable, the default):\n{}", indent(p))?;
                    writeln!(o, "  after (--to tpu):\n{}", indent(&ex.after))?;
                }
                None => writeln!(o, "  after:\n{}", indent(&ex.after))?,
            }
        }
    }
    Ok(o)
}

/// What the portable forms change on machines that are neither CUDA nor a TPU.
const OTHER_MACHINES: &str = "On an MPS or XPU machine the current accelerator is that one: code that failed there for want of CUDA now runs on it, and a device chosen by availability takes it where the original took the CPU; on a CPU-only torch build (no accelerator) `current_accelerator()` is None and the string forms fall back to \"cuda\" (`getattr(current_accelerator(), \"type\", \"cuda\")`), as the original had it";

/// The fix class in both modes, and what the portable mode does.
fn fix_line(r: &Rule) -> String {
    let literal = r.literal.fix.as_str();
    let portable = r.fix_class(Target::Portable).as_str();
    match &r.portable {
        _ if r.literal.fix == FixClass::Manual => literal.to_string(),
        Portable::Same => {
            format!("{literal} (the same fix with --to portable, the default, and --to tpu)")
        }
        Portable::Replaces => format!(
            "{portable} with --to portable, the default ({REPLACES_CUDA}); {literal} with --to tpu"
        ),
        Portable::Device => format!(
            "{portable} with --to portable, the default: the current accelerator's device (`torch.accelerator.current_accelerator()`, its `.type` where a string is needed, `\"cuda\"` where torch has no accelerator, a comparison extended to the TPU); {literal} with --to tpu: the TorchTPU name. {OTHER_MACHINES}"
        ),
        Portable::Backend => format!(
            "{portable} with --to portable, the default: the current accelerator's default backend (`torch.distributed.get_default_backend_for_device(...)`: nccl on CUDA, tpu_dist under TorchTPU; a comparison extended to \"tpu_dist\"); {literal} with --to tpu: \"tpu_dist\". On an MPS machine the backend is gloo, on XPU xccl"
        ),
        Portable::Own(v) => {
            let safety = v
                .fix_safety
                .as_deref()
                .filter(|_| v.fix == FixClass::Unsafe)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            format!(
                "{portable} with --to portable, the default{safety}; {literal} with --to tpu (see the examples)"
            )
        }
    }
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
