//! Code named for CUDA: a `torch.cuda` query inside a function or class whose name says CUDA
//! (`class CUDA_Accelerator`, `class CUDAOpBuilder`, `def is_torch_cuda_available`), or whose
//! value goes to a name that says CUDA (`cuda_available = ...`, `self.is_cuda = ...`), implements
//! or reports CUDA itself. Asking about the TPU there changes what the name promises (DeepSpeed's
//! CUDA accelerator would claim a TPU host), so a CUD fix there is only unsafe.

use ruff_python_ast::{AnyNodeRef, Expr};

use super::Checker;
use crate::port::rules::Rule;

impl Checker<'_> {
    /// Is this CUD finding in a scope, or assigned to a name, that says CUDA?
    pub(super) fn in_cuda_named_code(&self, rule: &Rule) -> bool {
        if rule.family != "CUD" {
            return false;
        }
        let mut innermost_stmt = true;
        for node in self.stack.iter().rev() {
            let named = match node {
                AnyNodeRef::StmtFunctionDef(f) => says_cuda(f.name.as_str()),
                AnyNodeRef::StmtClassDef(c) => says_cuda(c.name.as_str()),
                AnyNodeRef::StmtAssign(a) if innermost_stmt => a.targets.iter().any(target_says_cuda),
                AnyNodeRef::StmtAnnAssign(a) if innermost_stmt => target_says_cuda(&a.target),
                _ => false,
            };
            if named {
                return true;
            }
            if node.as_stmt_ref().is_some() {
                innermost_stmt = false;
            }
        }
        false
    }
}

fn says_cuda(name: &str) -> bool {
    name.to_ascii_lowercase().contains("cuda")
}

fn target_says_cuda(t: &Expr) -> bool {
    match t {
        Expr::Name(n) => says_cuda(n.id.as_str()),
        Expr::Attribute(a) => says_cuda(a.attr.as_str()),
        Expr::Tuple(t) => t.elts.iter().any(target_says_cuda),
        _ => false,
    }
}
