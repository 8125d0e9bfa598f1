//! Predicates of CUDA-only code: a function that only answers a test (`def _eligible(x):
//! return x.is_cuda and x.ndim == 4`) guards what its callers run when it says yes (`if not
//! _eligible(q): return None` before a Helion or Triton kernel). Its test is judged at the
//! guards that call it.

use ruff_python_ast::visitor::source_order::{SourceOrderVisitor, TraversalSignal};
use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use crate::port::rewrite::Checker;

/// Collects the calls of a function (`name(...)`, or `self.name(...)` for a method), with
/// their ancestors.
struct Calls<'a> {
    name: &'a str,
    method: bool,
    stack: Vec<AnyNodeRef<'a>>,
    found: Vec<(Vec<AnyNodeRef<'a>>, TextRange)>,
}

impl<'a> SourceOrderVisitor<'a> for Calls<'a> {
    fn enter_node(&mut self, node: AnyNodeRef<'a>) -> TraversalSignal {
        if let AnyNodeRef::ExprCall(c) = node {
            let hit = match c.func.as_ref() {
                Expr::Name(n) => !self.method && n.id.as_str() == self.name,
                Expr::Attribute(a) => {
                    self.method
                        && a.attr.as_str() == self.name
                        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")
                }
                _ => false,
            };
            if hit {
                self.found.push((self.stack.clone(), c.range()));
            }
        }
        self.stack.push(node);
        TraversalSignal::Traverse
    }

    fn leave_node(&mut self, _node: AnyNodeRef<'a>) {
        self.stack.pop();
    }
}

impl<'a> Checker<'a> {
    /// For a test returned by the function around it (`ancestors` end inside that function):
    /// the note of the first guard of CUDA-only code among the function's callers in this
    /// module, if there is one.
    pub(in crate::port::rewrite) fn predicate_guard(
        &self,
        ancestors: &[AnyNodeRef<'a>],
    ) -> Option<String> {
        let pos = ancestors
            .iter()
            .rposition(|n| matches!(n, AnyNodeRef::StmtFunctionDef(_)))?;
        let AnyNodeRef::StmtFunctionDef(f) = ancestors[pos] else {
            return None;
        };
        let method = pos
            .checked_sub(1)
            .is_some_and(|p| matches!(ancestors[p], AnyNodeRef::StmtClassDef(_)));
        let mut calls = Calls {
            name: f.name.as_str(),
            method,
            stack: vec![],
            found: vec![],
        };
        for stmt in &self.parsed.module.body {
            calls.visit_stmt(stmt);
        }
        calls.found.into_iter().find_map(|(anc, at)| {
            self.guard_of_call(&anc, at).map(|note| {
                format!(
                    "{note}; `{}` answers that test for its callers",
                    f.name.as_str()
                )
            })
        })
    }
}
