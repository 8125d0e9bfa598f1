//! What a device count is used for. On a CUDA machine `torch.cuda.device_count()` is the number
//! of GPUs a process drives (all of them, under `nn.DataParallel`); on a TPU VM
//! `torch.accelerator.device_count()` is the host's chip count until the runtime starts and 1
//! after, while a TorchTPU process drives one device. So the rename is right only where the
//! count's value does not size or select work per device:
//!
//! - shown (an argument of `print`, a logger's call, `str`, `.format`, an f-string or
//!   `%`-formatting),
//! - a test for any device (`if n:`, `not n`, `n > 0`, `n == 0`, an `assert`),
//! - a modulus (`rank % n`, a process's device index),
//! - a statement of its own, or a name bound once whose every read is one of these.
//!
//! Anything else (a batch multiplied by it, `loss.view(n)`, `torch.ones(n)`, a value kept in an
//! attribute or returned, a flag that picks DataParallel) gets an unsafe fix with the reason
//! (set AA: `LOAD_BATCH_SIZE = BATCH_SIZE * torch.cuda.device_count()` and `loss.view(n)` broke a
//! trainer on a multi-chip TPU VM; `opt.n_gpu` picked `model.module`). Where the count sits in
//! a branch that a TPU never takes (an earlier branch of its `if` chain tests for the TPU:
//! `elif is_torch_tpu_available(): ... else: n = torch.cuda.device_count()`), nothing on a TPU
//! reads it, and the rename only keeps CUDA as it was.

use ruff_python_ast::{self as ast, AnyNodeRef, CmpOp, Expr, Operator, UnaryOp};
use ruff_text_size::{Ranged, TextRange};

use crate::port::rewrite::Checker;

/// Why a count used for per-device work keeps an unsafe fix.
pub(super) const PER_DEVICE_WORK: &str = "not proven safe: the device count sizes or selects \
work per device here (a batch, a tensor's shape, DataParallel, a value kept for later), and a \
TorchTPU process drives one device where torch.accelerator.device_count() counts the host's chips \
(or 1 once the runtime has started): check what it is for (a number of processes is \
`dist.get_world_size()`)";

/// Callees whose arguments are only shown.
const SHOWN: &[&str] = &[
    "print",
    "str",
    "repr",
    "format",
    "info",
    "debug",
    "warning",
    "warn",
    "error",
    "critical",
    "log",
    "write",
    "set_description",
    "set_postfix",
];

impl<'a> Checker<'a> {
    /// Is the count at `at` (its reference; ancestors: the checker's stack) used only where the
    /// rename cannot change per-device work (see the module doc)?
    pub(super) fn count_use_is_neutral(&self, at: TextRange) -> bool {
        self.after_a_tpu_branch(at) || self.neutral_in(&self.stack, at, 2)
    }

    fn neutral_in(&self, ancestors: &[AnyNodeRef<'a>], at: TextRange, depth: u8) -> bool {
        let mut child = at;
        for anc in ancestors.iter().rev() {
            if anc.range() == child || !anc.range().contains_range(child) {
                continue;
            }
            match anc {
                AnyNodeRef::ExprCall(c) if c.func.range() == child => child = c.range(),
                // The argument list (and a keyword) between a call and its argument.
                AnyNodeRef::Arguments(_) | AnyNodeRef::Keyword(_) => {}
                AnyNodeRef::ExprCall(c) => return self.shown_by(c),
                AnyNodeRef::ExprFString(_) | AnyNodeRef::InterpolatedElement(_) => return true,
                AnyNodeRef::ExprBinOp(b) => {
                    return b.op == Operator::Mod
                        && (b.right.range() == child || matches!(*b.left, Expr::StringLiteral(_)));
                }
                AnyNodeRef::ExprCompare(c) => return self.any_device_test(c),
                AnyNodeRef::ExprUnaryOp(u) => return u.op == UnaryOp::Not,
                AnyNodeRef::ExprBoolOp(b) => child = b.range,
                AnyNodeRef::ExprIf(e) if e.test.range() == child => return true,
                AnyNodeRef::StmtIf(s) => return s.test.range() == child,
                AnyNodeRef::StmtWhile(s) => return s.test.range() == child,
                AnyNodeRef::StmtAssert(_) | AnyNodeRef::StmtExpr(_) => return true,
                AnyNodeRef::StmtAssign(a) => {
                    let [Expr::Name(name)] = a.targets.as_slice() else {
                        return false;
                    };
                    return depth > 0 && self.reads_neutral(name, depth - 1);
                }
                _ => return false,
            }
        }
        false
    }

    /// Every read of `name`, wherever its scope binds it (a name read nowhere is neutral).
    fn reads_neutral(&self, name: &ast::ExprName, depth: u8) -> bool {
        let sem = &self.sem;
        let Some(b) = sem.bindings.iter().position(|b| b.range == name.range) else {
            return false;
        };
        let scope = sem.bindings[b].scope;
        let same: Vec<usize> = (0..sem.bindings.len())
            .filter(|i| {
                sem.bindings[*i].scope == scope && sem.bindings[*i].name == name.id.as_str()
            })
            .collect();
        let targets: Vec<TextRange> = sem
            .loads
            .iter()
            .filter(|(_, to)| to.is_some_and(|t| same.contains(&t)))
            .map(|(r, _)| *r)
            .collect();
        let count = targets.len();
        let reads = self.uses_at(targets);
        reads.len() == count && reads.iter().all(|(anc, r)| self.neutral_in(anc, *r, depth))
    }

    /// `print(n)`, `logger.info("%d", n)`, `"{}".format(n)`.
    fn shown_by(&self, c: &ast::ExprCall) -> bool {
        let last = match c.func.as_ref() {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.as_str(),
            _ => return false,
        };
        SHOWN.contains(&last)
    }

    /// A comparison with 0 or 1 that asks whether there is any device (`n > 0`, `n >= 1`,
    /// `n == 0`, `0 < n`); one asking for several was judged before this.
    fn any_device_test(&self, c: &ast::ExprCompare) -> bool {
        let sides: Vec<&Expr> = std::iter::once(&*c.left)
            .chain(c.comparators.iter())
            .collect();
        c.ops.iter().enumerate().all(|(i, op)| {
            let k = self
                .int_literal(sides[i])
                .or_else(|| self.int_literal(sides[i + 1]));
            matches!(
                (op, k),
                (CmpOp::Gt | CmpOp::Lt | CmpOp::Eq | CmpOp::NotEq, Some(0))
                    | (CmpOp::GtE | CmpOp::LtE, Some(1))
            )
        })
    }

    /// Does the code at `at` sit in an `elif`/`else` of a chain whose earlier test names the TPU?
    fn after_a_tpu_branch(&self, at: TextRange) -> bool {
        self.stack.iter().any(|n| {
            let AnyNodeRef::StmtIf(s) = n else {
                return false;
            };
            let Some(i) = s
                .elif_else_clauses
                .iter()
                .position(|c| c.range().contains_range(at))
            else {
                return false;
            };
            std::iter::once(Some(&*s.test))
                .chain(s.elif_else_clauses[..i].iter().map(|c| c.test.as_ref()))
                .flatten()
                .any(|t| self.text(t.range()).to_ascii_lowercase().contains("tpu"))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::migrate;

    #[test]
    fn a_count_sizing_work_per_device_keeps_cuda() {
        let src = "import torch\n\nBATCH = 4\nLOAD = BATCH * torch.cuda.device_count()\nn = torch.cuda.device_count()\nprint(f\"{n} GPUs\")\nk = torch.cuda.device_count()\nloss = torch.ones(k)\nif torch.cuda.device_count():\n    pass\nassert torch.cuda.device_count() > 0\nidx = rank % torch.cuda.device_count()\nlogger.info(\"gpus: %d\", torch.cuda.device_count())\n\n\nclass A:\n    def __init__(self, opt):\n        opt.n_gpu = torch.cuda.device_count()\n\n\ndef setup(tpu):\n    if tpu.is_tpu_available():\n        d = 1\n    else:\n        d = torch.cuda.device_count()\n    return d\n";
        let out = migrate("CUD002", src, None).output.unwrap_or_default();
        for kept in [
            "LOAD = BATCH * torch.cuda.device_count()",
            "k = torch.cuda.device_count()",
            "opt.n_gpu = torch.cuda.device_count()",
        ] {
            assert!(out.contains(kept), "{kept}\n{out}");
        }
        for ported in [
            "n = torch.accelerator.device_count()",
            "if torch.accelerator.device_count():",
            "assert torch.accelerator.device_count() > 0",
            "idx = rank % torch.accelerator.device_count()",
            "logger.info(\"gpus: %d\", torch.accelerator.device_count())",
            "        d = torch.accelerator.device_count()",
        ] {
            assert!(out.contains(ported), "{ported}\n{out}");
        }
    }
}
