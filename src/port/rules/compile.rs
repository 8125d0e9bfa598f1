//! Compiling a rule's TOML definition into the model: one matcher, at most one action, the
//! needles of the file pre-filter, and validation of names, templates and placeholders.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::{Result, anyhow, bail};
use regex::Regex;

use super::model::{Action, Lint, Matcher, Note, Portable, PositionPattern, Rule, Variant};
use super::schema::{
    ActionDef, FixClass, NoteWhere, PortableDef, PortableKind, RemoveKind, RenameDef, RuleDef,
    StringForm,
};

fn glob_to_regex(glob: &str) -> Result<Regex, String> {
    let mut re = String::from("(?i)^");
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            c if c.is_alphanumeric() || c == '_' => re.push(c),
            c => return Err(format!("unexpected `{c}` in identifier pattern `{glob}`")),
        }
    }
    re.push('$');
    Regex::new(&re).map_err(|e| e.to_string())
}

pub(super) fn compile_position(p: &str) -> Result<PositionPattern, String> {
    match p.rsplit_once(':') {
        Some((callee, key)) => {
            if callee.is_empty() || key.is_empty() {
                return Err(format!(
                    "`{p}`: a call slot is `qualified.name:INDEX`, `qualified.name:keyword` or `.method:INDEX`"
                ));
            }
            Ok(PositionPattern::Slot {
                callee: callee.to_string(),
                key: key.to_string(),
            })
        }
        None => glob_to_regex(p).map(PositionPattern::Ident),
    }
}

pub(super) fn compile_rule(
    def: RuleDef,
    family: &str,
    origin: &str,
    line: usize,
    positions: &HashMap<String, Vec<PositionPattern>>,
    file_portable: Option<PortableKind>,
) -> Result<Rule> {
    let m = def.matcher;
    let kinds = [
        m.call.is_some(),
        m.reference.is_some(),
        m.method.is_some(),
        m.attribute.is_some(),
        m.string.is_some(),
        m.keyword.is_some(),
        m.lint.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    let calls_as_filter = m.keyword.is_some() && m.call.is_some();
    if kinds != 1 && !(calls_as_filter && kinds == 2) {
        bail!(
            "[rule.match] needs exactly one of `lint`, `call`, `reference`, `method`, `attribute`, `keyword` (optionally with `call` as a filter) or `string`"
        );
    }
    let mut needles: Vec<String> = vec![];
    let matcher = if let Some(name) = &m.lint {
        let Some(lint) = Lint::from_name(name) else {
            let known: Vec<&str> = Lint::ALL.iter().map(|(n, ..)| *n).collect();
            bail!(
                "unknown lint `{name}`; built-in lints: {}",
                known.join(", ")
            );
        };
        if def.fix != FixClass::Manual && !lint.fixes() {
            bail!("a `lint` rule reports only: use fix = \"manual\"");
        }
        Matcher::Lint(lint)
    } else if let Some(names) = m.keyword {
        // Any one of the keywords (needles are all required; `|` is one of).
        needles.push(names.join("|"));
        Matcher::Keyword {
            names,
            calls: m.call.unwrap_or_default(),
        }
    } else if let Some(names) = m.call {
        check_qualified(&names)?;
        Matcher::Call(names)
    } else if let Some(names) = m.reference {
        let mut exact = vec![];
        let mut prefixes = vec![];
        for n in names {
            match n.strip_suffix(".*") {
                Some(p) => prefixes.push(p.to_string()),
                None => exact.push(n),
            }
        }
        check_qualified(&exact)?;
        check_qualified(&prefixes)?;
        Matcher::Reference { exact, prefixes }
    } else if let Some(names) = m.method {
        needles.push(names.join("|"));
        Matcher::Method(names)
    } else if let Some(names) = m.attribute {
        needles.push(names.join("|"));
        Matcher::Attribute(names)
    } else if let Some(re) = m.string {
        let regex = Regex::new(&re).map_err(|e| anyhow!("`string` is not a valid regex: {e}"))?;
        if let Some(lit) = leading_literal(&re) {
            needles.push(lit);
        }
        let positions_used = match m.positions {
            None => bail!(
                "a `string` match needs `in = [...]`: position classes such as \"device\", or \"*\" for anywhere"
            ),
            Some(p) if p.iter().any(|x| x == "*") => None,
            Some(p) => {
                for class in &p {
                    if !positions.contains_key(class) {
                        let mut known: Vec<&String> = positions.keys().collect();
                        known.sort();
                        bail!(
                            "unknown position class `{class}`; known classes: {}; or define it under [positions]",
                            known
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        );
                    }
                }
                Some(p)
            }
        };
        Matcher::String {
            regex,
            positions: positions_used,
            forms: m.forms.unwrap_or_else(|| vec![StringForm::Plain]),
        }
    } else {
        unreachable!()
    };
    // Every segment of a qualified name must be spelled somewhere in a file that uses it
    // (`from torch import cuda as c; c.synchronize()` spells `cuda` and `synchronize`): one
    // name needs all of its segments; several need what they all share, and one of their last
    // segments (`torch.backends.cuda.*` or `torch.backends.cudnn.*`: `cuda|cudnn`, not
    // `backends` alone, which Hugging Face's `requires_backends` spells in every model file).
    let names: Vec<&str> = match &matcher {
        Matcher::Call(names) => names.iter().map(String::as_str).collect(),
        Matcher::Reference { exact, prefixes } => {
            exact.iter().chain(prefixes).map(String::as_str).collect()
        }
        _ => vec![],
    };
    if let [name] = names.as_slice() {
        needles.extend(name.split('.').map(str::to_string));
    } else if let [first, rest @ ..] = names.as_slice() {
        let mut common: Vec<String> = first.split('.').map(str::to_string).collect();
        for n in rest {
            let segs: HashSet<&str> = n.split('.').collect();
            common.retain(|s| segs.contains(s.as_str()));
        }
        let mut lasts: Vec<&str> = names.iter().filter_map(|n| n.rsplit('.').next()).collect();
        lasts.sort_unstable();
        lasts.dedup();
        if !lasts.iter().any(|l| common.iter().any(|c| c == l)) {
            common.push(lasts.join("|"));
        }
        needles.extend(common);
    }
    // Segments that nearly every PyTorch file spells many times (`torch`, `nn`, `utils`) tell the
    // prefilter nothing and cost a match each: the rarer segments decide.
    // (A rule keeps its longest segment if none is rarer.)
    let rare: Vec<String> = needles
        .iter()
        .filter(|n| !["torch", "nn", "utils", "functional", "F"].contains(&n.as_str()))
        .cloned()
        .collect();
    if !rare.is_empty() {
        needles = rare;
    } else if let Some(longest) = needles.iter().max_by_key(|n| n.len()).cloned() {
        needles = vec![longest];
    }
    if let Some(n) = def.needles {
        needles = n;
    }
    needles.sort();
    needles.dedup();

    let when = m.when.clone();
    // A keyword rule's `when` names the keyword itself: `dynamic = ["True"]`.
    let keyword_when = match &matcher {
        Matcher::Keyword { names, .. } => {
            if let Some(k) = when.keys().find(|k| !names.contains(*k)) {
                bail!("`match.when` names `{k}`, which is not one of the matched keywords");
            }
            true
        }
        _ => false,
    };
    if !when.is_empty() && !keyword_when && !matches!(matcher, Matcher::Call(_)) {
        bail!("`match.when` needs a `match.call` or `match.keyword` rule");
    }
    let receiver = m
        .receiver
        .map(|r| Regex::new(&r).map_err(|e| anyhow!("`receiver` is not a valid regex: {e}")))
        .transpose()?;

    let act = def.action.unwrap_or_default();
    if act.fix.is_some() || act.fix_safety.is_some() || act.extends {
        bail!(
            "`fix`, `fix_safety` and `extends` belong in [rule.portable]; the rule's own are keys of the rule"
        );
    }
    if let Some(p) = when
        .keys()
        .find(|p| !keyword_when && !act.params.as_ref().is_some_and(|ps| ps.contains(*p)))
    {
        bail!("`match.when` names `{p}`, which is not one of the action's `params`");
    }
    let own_fix = matches!(&matcher, Matcher::Lint(l) if l.fixes());
    let literal = compile_variant(def.fix, def.fix_safety.clone(), &act, &matcher, own_fix)?;
    let writes_tpu = literal.action.as_ref().is_some_and(|a| a.writes_tpu())
        || literal
            .convert
            .values()
            .any(|c| c.templates().any(|t| writes_tpu_text(t)));
    let portable = match def.portable {
        None => match file_portable {
            Some(k) => portable_kind(k, &matcher)?,
            None if writes_tpu && literal.fix != FixClass::Manual => Portable::Replaces,
            None => Portable::Same,
        },
        Some(PortableDef::Kind(k)) => portable_kind(k, &matcher)?,
        Some(PortableDef::Action(a)) => {
            let fix = a.fix.unwrap_or(def.fix);
            let safety = a.fix_safety.clone().or(def.fix_safety.clone());
            let mut v = compile_variant(fix, safety, &a, &matcher, own_fix)?;
            v.extends = a.extends;
            Portable::Own(Box::new(v))
        }
    };
    check_qualified(&def.unsafe_if_uses)?;
    check_qualified(&def.unless_uses)?;
    check_qualified(&def.only_if_uses)?;
    check_qualified(&def.not_if_uses)?;
    check_qualified(&def.remove_after)?;
    check_qualified(&def.safe_after)?;
    check_qualified(&def.safe_if_ported)?;
    Ok(Rule {
        id: def.id,
        family: family.to_string(),
        name: def.name,
        message: def.message,
        advice: def.advice,
        matcher,
        literal,
        portable,
        receiver,
        min_args: m.min_args,
        when,
        example: def.example,
        unsafe_if_uses: def.unsafe_if_uses,
        unless_uses: def.unless_uses,
        only_if_uses: def.only_if_uses,
        not_if_uses: def.not_if_uses,
        remove_after: def.remove_after,
        safe_after: def.safe_after,
        safe_if_ported: def.safe_if_ported,
        needles,
        origin: origin.to_string(),
        line,
    })
}

/// Does template text name a TorchTPU thing (`"tpu"`, `tpu_dist`, `torch.tpu.*`, `.is_tpu`)?
fn writes_tpu_text(t: &str) -> bool {
    let b = t.as_bytes();
    t.match_indices("tpu").any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| b[j]);
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

impl Action {
    /// Does the action write a TorchTPU name (the literal port)?
    pub(super) fn writes_tpu(&self) -> bool {
        match self {
            Action::Rename(m) => m.values().any(|t| writes_tpu_text(t)),
            Action::Replace(t) | Action::String(t) | Action::Assign(t) => writes_tpu_text(t),
            Action::Call { to, args } => {
                to.as_deref().is_some_and(writes_tpu_text)
                    || args.iter().any(|a| writes_tpu_text(a))
            }
            Action::Remove(_) | Action::Unwrap => false,
        }
    }
}

fn portable_kind(k: PortableKind, matcher: &Matcher) -> Result<Portable> {
    let string = matches!(matcher, Matcher::String { .. });
    Ok(match k {
        PortableKind::Same => Portable::Same,
        PortableKind::None => Portable::Replaces,
        PortableKind::Device | PortableKind::Backend if !string => {
            bail!("portable = \"device\" and \"backend\" work with `string` matches only")
        }
        PortableKind::Device => Portable::Device,
        PortableKind::Backend => Portable::Backend,
    })
}

/// One mode's fix: the action, its parameters and templates, checked.
fn compile_variant(
    fix: FixClass,
    fix_safety: Option<String>,
    act: &ActionDef,
    matcher: &Matcher,
    own_fix: bool,
) -> Result<Variant> {
    let params = act.params.clone().unwrap_or_default();
    let action = compile_action(act, matcher)?;
    if fix != FixClass::Manual && action.is_none() && !own_fix {
        bail!(
            "fix = \"{}\" needs an [rule.action]; use fix = \"manual\" for a diagnostic-only rule",
            fix.as_str()
        );
    }
    if fix == FixClass::Manual && action.is_some() {
        bail!("fix = \"manual\" rules must not have an [rule.action]; use \"safe\" or \"unsafe\"");
    }
    for (p, c) in &act.convert {
        if !params.contains(p) {
            bail!("[rule.action.convert.{p}]: `{p}` is not in `params`");
        }
        if let Some(re) = &c.manual_text {
            Regex::new(re).map_err(|e| anyhow!("[rule.action.convert.{p}] manual_text: {e}"))?;
        }
    }
    // Placeholders in templates must name parameters (or the built-ins).
    let templates: Vec<&String> = act
        .replace
        .iter()
        .chain(act.args.iter().flatten())
        .chain(act.assign.iter())
        .chain(act.convert.values().flat_map(|c| c.literal.values()))
        .chain(act.convert.values().flat_map(|c| {
            [
                &c.missing, &c.none, &c.int, &c.string, &c.true_, &c.false_, &c.other,
            ]
            .into_iter()
            .flatten()
        }))
        .collect();
    for t in templates {
        for ph in placeholders(t).map_err(|e| anyhow!("template `{t}`: {e}"))? {
            let known =
                params.contains(&ph) || ["receiver", "value", "matched"].contains(&ph.as_str());
            if !known {
                bail!(
                    "template `{t}` uses `{{{ph}}}`, which is not a parameter; declare it in `params = [...]`"
                );
            }
        }
    }
    let note = act.note.clone().map(|text| Note {
        text,
        only_in_loop: act.note_in == Some(NoteWhere::Loop),
    });
    if note.as_ref().is_some_and(|n| n.text.contains('\n')) {
        bail!("`note` must be one line");
    }
    if act.note_in.is_some() && note.is_none() {
        bail!("`note_in` needs a `note`");
    }
    Ok(Variant {
        fix,
        action,
        params,
        pass_rest: act.pass_rest,
        convert: act.convert.clone(),
        note,
        fix_safety,
        extends: false,
    })
}

fn compile_action(act: &ActionDef, matcher: &Matcher) -> Result<Option<Action>> {
    let n = [
        act.rename.is_some(),
        act.replace.is_some(),
        act.args.is_some() || act.to.is_some(),
        act.string.is_some(),
        act.remove.is_some(),
        act.unwrap.is_some(),
        act.assign.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if n > 1 {
        bail!(
            "[rule.action] takes one of `rename`, `replace`, `to`/`args`, `string`, `remove`, `unwrap` or `assign`"
        );
    }
    let is_string = matches!(matcher, Matcher::String { .. });
    Ok(if let Some(r) = &act.rename {
        if !matches!(matcher, Matcher::Call(_) | Matcher::Reference { .. }) {
            bail!("`rename` works with `call` and `reference` matches");
        }
        let map = match r {
            RenameDef::One(to) => {
                let mut m = BTreeMap::new();
                m.insert("*".to_string(), to.clone());
                m
            }
            RenameDef::Map(m) => m.clone(),
        };
        Some(Action::Rename(map))
    } else if let Some(t) = &act.replace {
        Some(Action::Replace(t.clone()))
    } else if act.args.is_some() || act.to.is_some() {
        if !matches!(matcher, Matcher::Call(_) | Matcher::Method(_)) {
            bail!("`to`/`args` rewrite a call: use them with `call` or `method` matches");
        }
        Some(Action::Call {
            to: act.to.clone(),
            args: act.args.clone().unwrap_or_default(),
        })
    } else if let Some(s) = &act.string {
        if !is_string {
            bail!("`string` rewrites work with `string` matches only");
        }
        Some(Action::String(s.clone()))
    } else if let Some(k) = act.remove {
        if k == RemoveKind::Keyword && !matches!(matcher, Matcher::Keyword { .. }) {
            bail!("remove = \"keyword\" works with `keyword` matches only");
        }
        Some(Action::Remove(k))
    } else if let Some(t) = &act.assign {
        if !matches!(matcher, Matcher::Reference { .. })
            || act.params.as_ref().is_none_or(|p| p.len() != 1)
        {
            bail!(
                "`assign` works with `reference` matches and one parameter (`params = [\"value\"]`)"
            );
        }
        Some(Action::Assign(t.clone()))
    } else if act.unwrap.is_some() {
        if !matches!(matcher, Matcher::Call(_)) {
            bail!("unwrap = \"with\" works with `call` matches only");
        }
        Some(Action::Unwrap)
    } else {
        None
    })
}

fn check_qualified(names: &[String]) -> Result<()> {
    for n in names {
        let ok = !n.is_empty()
            && n.split('.')
                .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
        if !ok {
            bail!("`{n}` is not a dotted qualified name such as `torch.cuda.synchronize`");
        }
    }
    Ok(())
}

/// Placeholders `{name}` in a template (`{{`/`}}` are literal braces).
pub fn placeholders(t: &str) -> Result<Vec<String>, String> {
    let mut out = vec![];
    let b = t.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' if b.get(i + 1) == Some(&b'{') => i += 2,
            b'}' if b.get(i + 1) == Some(&b'}') => i += 2,
            b'{' => {
                let end = t[i..].find('}').ok_or("unclosed `{`")? + i;
                let name = &t[i + 1..end];
                if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    return Err(format!(
                        "`{{{name}}}` is not a placeholder; write `{{{{` for a literal brace"
                    ));
                }
                out.push(name.to_string());
                i = end + 1;
            }
            b'}' => return Err("unmatched `}`; write `}}` for a literal brace".into()),
            _ => i += 1,
        }
    }
    Ok(out)
}

/// The literal word a regex starts with (`^cuda:(\d+)$` → `cuda`), for the file pre-filter.
fn leading_literal(re: &str) -> Option<String> {
    let s = re.trim_start_matches("(?i)").trim_start_matches('^');
    let s = s.strip_prefix("(?:").unwrap_or(s);
    let lit: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    // A trailing quantifier would make the last character optional.
    let next = s[lit.len()..].chars().next();
    let lit = match next {
        Some('?' | '*' | '{') => lit[..lit.len().saturating_sub(1)].to_string(),
        _ => lit,
    };
    (lit.len() >= 3).then_some(lit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_literals() {
        assert_eq!(
            leading_literal("^cuda:([1-9]\\d*)$").as_deref(),
            Some("cuda")
        );
        assert_eq!(leading_literal("(?i)^nccl$").as_deref(), Some("nccl"));
        assert_eq!(leading_literal("^x?"), None);
        assert_eq!(leading_literal("^cudas?$").as_deref(), Some("cuda"));
    }

    #[test]
    fn placeholder_parsing() {
        assert_eq!(placeholders("f({a}, {{b}})").unwrap(), vec!["a"]);
        assert!(placeholders("f({a)").is_err());
        assert!(placeholders("}").is_err());
    }

    /// A rule matching any of several keywords reads a file that spells one of them: the
    /// file pre-filter's needles are all required, so the names are one `|` needle.
    #[test]
    fn one_of_several_keywords_is_enough() {
        let src = "from transformers import AutoModelForCausalLM\n\nm = AutoModelForCausalLM.from_pretrained(\"gpt2\", load_in_4bit=True)\n";
        let found = crate::port::test_support::findings("LIB011", src, None);
        assert_eq!(found.len(), 1, "{found:?}");
    }
}
