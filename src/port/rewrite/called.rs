//! A function that a `call` rule maps, named without calling it (`sync = torch.cuda.synchronize`,
//! `hooks.append(torch.cuda.empty_cache)`): renamed where the rule's rewrite keeps the arguments
//! as they are (unsafe where it reorders them, e.g. keyword to positional-only); otherwise
//! reported with the rule's advice where the "no rule maps" fallback would have spoken.

use ruff_python_ast::{AnyNodeRef, ExprContext};
use ruff_text_size::Ranged;

use super::Checker;
use crate::port::diagnostic::Diagnostic;
use crate::port::edit::Edit;
use crate::port::rules::{Action, Variant};
use crate::port::template;

impl<'a> Checker<'a> {
    /// Report (and where possible rename) a reference to a name that a call rule maps; true if
    /// a rule took it.
    pub(super) fn reference_to_called(&mut self, node: AnyNodeRef<'a>, q: &str) -> bool {
        let range = node.range();
        let loaded = match node {
            AnyNodeRef::ExprAttribute(a) => a.ctx == ExprContext::Load,
            AnyNodeRef::ExprName(n) => n.ctx == ExprContext::Load,
            _ => false,
        };
        let called_or_inner = match self.stack.last() {
            Some(AnyNodeRef::ExprCall(c)) => c.func.range() == range,
            Some(AnyNodeRef::ExprAttribute(p)) => p.value.range() == range,
            _ => false,
        };
        if !loaded || called_or_inner {
            return false;
        }
        let Some(ids) = self.index.calls.get(q) else {
            return false;
        };
        let Some(&i) = ids.iter().find(|i| self.is_active(**i)) else {
            return false;
        };
        let rule = self.rule(i);
        let mut d = Diagnostic {
            rule: i,
            range,
            message: self.message(rule, Some(q), range),
            fix: None,
            note: None,
        };
        match renamed_to(self.v(rule), q) {
            Some((to, keeps_arguments)) => {
                let (text, import) = template::qualify(to, &self.ctx_at(range));
                let fix = self.make_fix(
                    rule,
                    vec![Edit::replace(range, text)],
                    import.into_iter().collect(),
                    (!keeps_arguments).then(|| {
                        format!("named, not called: the calls through this name must pass their arguments as `{to}` takes them")
                    }),
                );
                if !keeps_arguments {
                    d.note = Some(format!(
                        "named, not called: the calls through this name must pass their arguments as `{to}` takes them"
                    ));
                }
                d.fix = Some(fix);
            }
            // Reported only where the "no rule maps" fallback would speak instead.
            None if !self.has_fallback(q) => return false,
            None => {
                d.note = Some(
                    "named, not called: the rewrite needs the call's arguments; replace this reference by hand"
                        .into(),
                );
            }
        }
        let d = self.finalize(d);
        if !(d.fix.as_ref())
            .is_some_and(|f| f.edits.iter().all(|e| self.text(e.range) == e.content))
        {
            self.diags.push(d);
        }
        true
    }
}

impl Checker<'_> {
    fn has_fallback(&self, q: &str) -> bool {
        self.index.prefixes.iter().any(|(p, i)| {
            self.is_active(*i)
                && (q == p
                    || (q.starts_with(p.as_str()) && q.as_bytes().get(p.len()) == Some(&b'.')))
        })
    }
}

/// The name a call rule renames `q` to, and whether the arguments stay exactly as they are
/// (a rename) rather than being rebuilt (`to` with `args` that only pass parameters on).
fn renamed_to<'r>(v: &'r Variant, q: &str) -> Option<(&'r str, bool)> {
    match v.action.as_ref()? {
        Action::Rename(map) => map
            .get("*")
            .or_else(|| map.get(q))
            .map(|t| (t.as_str(), true)),
        Action::Call { to: Some(to), args } if !to.starts_with('.') => {
            let passes_on = v.convert.is_empty()
                && args.iter().all(|a| {
                    let a = a.split_once('=').map(|(_, v)| v).unwrap_or(a);
                    a.strip_prefix('{')
                        .and_then(|a| a.strip_suffix('}'))
                        .is_some_and(|p| v.params.iter().any(|x| x == p))
                });
            passes_on.then_some((to.as_str(), false))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source};

    /// (rule id, has a fix, note) of each finding with all built-in rules.
    fn findings(src: &str) -> Vec<(String, bool, Option<String>)> {
        let rules = RuleSet::builtin();
        let index = RuleIndex::new(&rules);
        let out = migrate_source(src, &rules, &index, Settings::default());
        out.diagnostics
            .iter()
            .map(|d| {
                (
                    rules.rules[d.rule].id.clone(),
                    d.fix.is_some(),
                    d.note.clone(),
                )
            })
            .collect()
    }

    #[test]
    fn named_mapped_functions_are_the_rules_business() {
        let f = findings("import torch\nsync = torch.cuda.synchronize\n");
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].0.as_str(), f[0].1), ("CUD007", true));
        // Not renameable (the rule rebuilds the call): reported by its rule, not the fallback.
        let f = findings("import torch_xla.amp\ncls = torch_xla.amp.GradScaler\n");
        assert!(f.iter().any(|(id, fix, note)| {
            id == "XAMP004"
                && !fix
                && note
                    .as_deref()
                    .is_some_and(|n| n.contains("named, not called"))
        }));
        // Called, or set: the usual paths.
        let f = findings("import torch\ntorch.cuda.synchronize()\n");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].0, "CUD007");
    }
}
