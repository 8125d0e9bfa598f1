//! Calls made only to see whether they raise: `try: _ = xm.xla_device()` / `except RuntimeError:
//! return False` probes for a device. The rewrite (`torch.device("tpu")`) never raises, so the
//! probe would always succeed: such a fix is at most unsafe.

use ruff_python_ast::{AnyNodeRef, Expr, Stmt};
use ruff_text_size::Ranged;

use crate::port::rewrite::Checker;

impl Checker<'_> {
    /// Is the node being checked a call statement (or `_ = call`) directly in the body of a `try`
    /// that catches exceptions?
    pub(in crate::port::rewrite) fn is_probe_in_try(&self) -> bool {
        let [.., outer, stmt] = self.stack.as_slice() else {
            return false;
        };
        let discarded = match stmt {
            AnyNodeRef::StmtExpr(_) => true,
            AnyNodeRef::StmtAssign(a) => {
                matches!(a.targets.as_slice(), [Expr::Name(n)] if n.id.as_str() == "_")
            }
            _ => false,
        };
        let AnyNodeRef::StmtTry(t) = outer else {
            return false;
        };
        discarded
            && !t.handlers.is_empty()
            && t.body.iter().any(|s: &Stmt| s.range() == stmt.range())
    }
}
