//! Simple local data flow for strings: `loc = f"cuda:{rank}"` assigned once to a name, and the
//! name later used in a device place (`torch.load(p, map_location=loc)`, `.to(loc)`): the string
//! takes the roles of the name's uses (and any reason a use gives not to rewrite it).

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use super::Checker;
use super::roles::Role;

/// Collects the ancestors of the names at the target ranges.
struct Uses<'a> {
    targets: Vec<TextRange>,
    stack: Vec<AnyNodeRef<'a>>,
    found: Vec<(Vec<AnyNodeRef<'a>>, TextRange)>,
}

impl<'a> SourceOrderVisitor<'a> for Uses<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        let r = node.range();
        if let AnyNodeRef::ExprName(n) = node
            && self.targets.contains(&n.range)
        {
            self.found.push((self.stack.clone(), n.range));
        }
        self.stack.push(node);
        if self.targets.iter().any(|t| r.contains_range(*t)) {
            TraversalSignal::Traverse
        } else {
            TraversalSignal::Skip
        }
    }

    fn leave_node(&mut self, _node: AnyNodeRef<'a>) {
        self.stack.pop();
    }
}

impl<'a> Checker<'a> {
    /// The roles of the string at `range` (ancestors: the stack less `depth`), with those of the
    /// uses of the name it is assigned to, and why a use says it is not a device (if one does).
    pub(super) fn roles_with_flow(
        &self,
        range: TextRange,
        depth: usize,
    ) -> (Vec<Role>, Option<String>) {
        let ancestors = &self.stack[..self.stack.len() - depth];
        let mut roles = self.roles_in(ancestors, range);
        let mut veto = None;
        for (anc, at) in self.uses_of_assigned(ancestors, range, false) {
            roles.extend(self.roles_in(&anc, at));
            veto = veto.or_else(|| self.not_a_device(&anc, at));
        }
        (roles, veto)
    }

    /// For `name = <string>` (through conditional expressions and `or`; with `test`, also
    /// through `not`, comparisons and the callee of a call: `use_triton = not x.is_cuda`), where
    /// `name` is bound once in its scope: each read of it, with its ancestors.
    pub(super) fn uses_of_assigned(
        &self,
        ancestors: &[AnyNodeRef<'a>],
        range: TextRange,
        test: bool,
    ) -> Vec<(Vec<AnyNodeRef<'a>>, TextRange)> {
        let mut child = range;
        let mut target = None;
        for anc in ancestors.iter().rev() {
            match anc {
                AnyNodeRef::ExprIf(e) if e.test.range() != child => child = e.range,
                AnyNodeRef::ExprBoolOp(e) => child = e.range,
                AnyNodeRef::ExprUnaryOp(e) if test => child = e.range,
                AnyNodeRef::ExprCompare(e) if test => child = e.range,
                AnyNodeRef::ExprCall(e) if test && e.func.range() == child => child = e.range(),
                AnyNodeRef::StmtAssign(a) if a.targets.len() == 1 => {
                    if let Expr::Name(n) = &a.targets[0] {
                        target = Some(n);
                    }
                    break;
                }
                _ => break,
            }
        }
        let Some(name) = target else { return vec![] };
        let Some(b) = self.sem.bindings.iter().position(|b| b.range == name.range) else {
            return vec![];
        };
        let scope = self.sem.bindings[b].scope;
        let bound = self
            .sem
            .bindings
            .iter()
            .filter(|x| x.scope == scope && x.name == name.id.as_str())
            .count();
        if bound != 1 {
            return vec![];
        }
        let targets: Vec<TextRange> = self
            .sem
            .loads
            .iter()
            .filter(|(_, to)| *to == Some(b))
            .map(|(r, _)| *r)
            .collect();
        if targets.is_empty() {
            return vec![];
        }
        let mut v = Uses {
            targets,
            stack: vec![],
            found: vec![],
        };
        for stmt in &self.parsed.module.body {
            v.visit_stmt(stmt);
        }
        v.found
    }
}
