//! The `assign` action: replace an assignment whose single target is the match
//! (`torch.backends.cuda.matmul.allow_tf32 = False`) by a template chosen by the assigned value
//! (`torch.set_float32_matmul_precision("highest")`); an empty template removes the statement.

use std::collections::HashMap;

use ruff_python_ast as ast;
use ruff_text_size::Ranged;

use super::bind::Bound;
use super::{Checker, Match};
use crate::port::edit::{Edit, Fix};
use crate::port::rules::{FixClass, Rule};
use crate::port::template;

impl<'a> Checker<'a> {
    pub(super) fn assign_fix(&self, rule: &Rule, t: &str, m: &Match<'a>) -> Result<Fix, String> {
        let target = m.reference.ok_or("not a reference")?;
        let stmt = self
            .stack
            .iter()
            .rev()
            .find_map(|n| n.as_stmt_ref())
            .ok_or("not inside a statement")?;
        let assign = match stmt {
            ast::StmtRef::Assign(a) if a.targets.len() == 1 && a.targets[0].range() == target => a,
            _ => return Err("not a plain assignment to it: rewrite this code by hand".into()),
        };
        let v = self.v(rule);
        let param = v.params.first().ok_or("no parameter")?;
        let value = self.value(&assign.value);
        let mut downgrade = None;
        if let Some(conv) = v.convert.get(param)
            && !template::has_literal(conv, Some(&value))
        {
            let explicit = template::has_explicit(conv, value.kind);
            if value.kind.listed_in(&conv.manual_for) && !explicit {
                return Err(format!(
                    "`{}` is {}: no mechanical rewrite",
                    value.text,
                    template::kind_name(value.kind)
                ));
            }
            if value.kind.listed_in(&conv.unsafe_for) {
                let what = format!(
                    "the value `{}` is {}",
                    value.text,
                    template::kind_name(value.kind)
                );
                downgrade = Some(match &v.fix_safety {
                    Some(s) => format!("{what}: {s}"),
                    None => format!("{what}: the rewrite is proven only for the other values"),
                });
            }
        }
        let values = Bound {
            values: HashMap::from([(param.clone(), value)]),
            rest: vec![],
            sources: HashMap::new(),
            downgrade: downgrade.clone(),
        };
        let r = self.render(t, &values, rule, stmt.range())?;
        if r.text.trim().is_empty() {
            let mut fix = self.removal_fix(rule, target, 0, false)?;
            if let Some(why) = downgrade
                && fix.applicability > FixClass::Unsafe
            {
                fix.applicability = FixClass::Unsafe;
                fix.why_unsafe = Some(why);
            }
            return Ok(fix);
        }
        Ok(self.make_fix(
            rule,
            vec![Edit::replace(stmt.range(), r.text)],
            r.imports,
            downgrade.or_else(|| r.duplicated.then(|| super::fix::TWICE.to_string())),
        ))
    }
}
