//! A flag named for CUDA whose only job is to pick the training device (PyTorch's MNIST
//! example: `use_cuda = not args.no_cuda and torch.cuda.is_available()`, then `if use_cuda:
//! device = torch.device("cuda")` and DataLoader keywords such as `pin_memory`). Its name says
//! CUDA, but it does not ask about CUDA on purpose: every read selects a device, or a
//! DataLoader setting that is right on any accelerator. Its availability check is ported with
//! the code it selects (the rest of `together/`): the flag keeps its name, asks
//! `torch.accelerator.is_available()`, and a TPU VM trains on the TPU, where it took the CPU.

use ruff_python_ast::{self as ast, AnyNodeRef, Expr, Stmt};
use ruff_text_size::Ranged;

use crate::port::rewrite::Checker;

/// DataLoader keywords that only say how batches reach the device.
const LOADER_KEYWORDS: &[&str] = &[
    "num_workers",
    "pin_memory",
    "shuffle",
    "persistent_workers",
    "prefetch_factor",
];

impl Checker<'_> {
    /// `a` assigns a flag (one name, bound once in its scope, read at least once) whose every
    /// read is the test of an `if` (or a conditional expression) that selects only devices and
    /// DataLoader settings, or a DataLoader keyword's value (`pin_memory=use_cuda`).
    pub(in crate::port::rewrite) fn flag_selects_device_only(&self, a: &ast::StmtAssign) -> bool {
        let [Expr::Name(name)] = a.targets.as_slice() else {
            return false;
        };
        let reads = self.reads_of(name);
        !reads.is_empty()
            && reads.iter().all(|(anc, at)| {
                let Some(parent) = anc.last() else {
                    return false;
                };
                match parent {
                    AnyNodeRef::StmtIf(i) if i.test.range() == *at => {
                        i.body.iter().all(|s| self.selects_device(s))
                            && i.elif_else_clauses.iter().all(|c| {
                                c.body.iter().all(|s| self.selects_device(s))
                            })
                    }
                    AnyNodeRef::ExprIf(e) if e.test.range() == *at => {
                        let in_keyword = matches!(anc.iter().rev().nth(1), Some(AnyNodeRef::Keyword(k)) if loader_keyword(k));
                        in_keyword || (self.device_value(&e.body) && self.device_value(&e.orelse))
                    }
                    AnyNodeRef::Keyword(k) => loader_keyword(k),
                    _ => false,
                }
            })
    }

    /// A statement that only picks a device or DataLoader settings: `device =
    /// torch.device("cuda")`, `kwargs = {"num_workers": 1, "pin_memory": True}`,
    /// `train_kwargs.update(cuda_kwargs)`, `pass`.
    fn selects_device(&self, s: &Stmt) -> bool {
        match s {
            Stmt::Pass(_) => true,
            Stmt::Assign(a) => {
                a.targets.iter().all(|t| matches!(t, Expr::Name(_))) && self.device_value(&a.value)
            }
            Stmt::Expr(e) => match e.value.as_ref() {
                Expr::Call(c) => {
                    matches!(c.func.as_ref(), Expr::Attribute(at) if at.attr.as_str() == "update" && matches!(at.value.as_ref(), Expr::Name(_)))
                        && c.arguments.keywords.is_empty()
                        && matches!(c.arguments.args.as_ref(), [v] if matches!(v, Expr::Name(_)) || loader_settings(v))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// A device string, `torch.device(<string>)` or a dict of DataLoader settings.
    fn device_value(&self, e: &Expr) -> bool {
        match e {
            Expr::StringLiteral(_) => true,
            Expr::Call(c) => {
                self.qualified(&c.func).as_deref() == Some("torch.device")
                    && c.arguments.keywords.is_empty()
                    && matches!(c.arguments.args.as_ref(), [Expr::StringLiteral(_)])
            }
            Expr::If(i) => self.device_value(&i.body) && self.device_value(&i.orelse),
            _ => loader_settings(e),
        }
    }
}

/// `{"num_workers": 1, "pin_memory": True}` (literal values), or `{}`.
fn loader_settings(e: &Expr) -> bool {
    let Expr::Dict(d) = e else { return false };
    d.items.iter().all(|item| {
        matches!(&item.key, Some(Expr::StringLiteral(k)) if LOADER_KEYWORDS.contains(&k.value.to_str()))
            && matches!(
                item.value,
                Expr::NumberLiteral(_) | Expr::BooleanLiteral(_) | Expr::NoneLiteral(_)
            )
    })
}

/// `pin_memory=use_cuda`.
fn loader_keyword(k: &ast::Keyword) -> bool {
    k.arg
        .as_ref()
        .is_some_and(|a| LOADER_KEYWORDS.contains(&a.as_str()))
}
