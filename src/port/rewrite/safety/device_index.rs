//! `torch.cuda.set_device(local_rank)` under the portable port. TorchTPU binds each process to
//! one device (from `LOCAL_RANK`) and cannot switch it: `torch.accelerator.set_device_index(i)`
//! starts the runtime and raises for any index but the process's own, 0 ("Device index 1 is out
//! of bounds of the number of addressable devices 1"). `i % torch.accelerator.device_count()`
//! does not help where the call comes first, as it does in a torchrun script: before the runtime
//! starts, `device_count()` answers the host's chip count (4 on a v5e-4 VM; 0 where there is no
//! TPU), so rank 1 still asks for device 1 (tried on TorchTPU 0.2.0 over XLA:CPU).
//!
//! So a variable index is set only where the accelerator is not a TPU:
//!
//! ```python
//! if torch.accelerator.current_accelerator().type != "tpu":
//!     torch.accelerator.set_device_index(local_rank)
//! ```
//!
//! On CUDA it selects the same GPU as before; on a TPU the process keeps its own device.
//! A literal 0 needs no guard. A call that is not its own statement gets an unsafe fix.
//!
//! The device count is the other half: once the runtime has started (the first tensor, or
//! `init_process_group("tpu_dist")`, which starts it), a torchrun process on a TPU VM counts its
//! one device. So `torch.cuda.device_count()` compared with a rank, a world size or a GPU index
//! (`assert local_rank < torch.cuda.device_count()`, or a name assigned from it and compared so
//! in the same file) would fail on every rank but 0: that fix is unsafe, with the reason. So is a
//! count compared with a number to ask whether there are several devices (`> 1`, `>= 2`, `== 1`):
//! what it decides (DistributedDataParallel or not, DataParallel, a per-device batch) is decided
//! on a TPU VM by a count that is the host's chips before the runtime starts and 1 after, where a
//! CUDA process counts every GPU (set Z: `use_ddp = ... torch.cuda.device_count() > 1`, so a
//! torchrun launch on a TPU trained unsynchronised replicas). A test for any device (`> 0`) is
//! the same on both.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use crate::port::diagnostic::Diagnostic;
use crate::port::edit::{Edit, indent_of};
use crate::port::rewrite::{Checker, Match};
use crate::port::rules::{FixClass, Rule};
use crate::port::template;

static RANK_LIKE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)rank|world|nproc|num_proc|gpu_?(id|idx|index)\b|\bgpu\b|\bdevice_?(id|idx|index)\b",
    )
    .unwrap()
});

const COUNT_AGAINST_RANKS: &str = "not proven safe: the device count is compared with a rank, \
a world size or a device index, and a torchrun process on a TPU VM counts its one device once \
the runtime has started (init_process_group(\"tpu_dist\") starts it), where a CUDA process \
counts every GPU: check what the comparison needs";

const SEVERAL_DEVICES: &str = "not proven safe: the test asks whether there are several \
devices, and a torchrun process on a TPU VM counts the host's chips before the runtime starts and \
its one device after (a CUDA process counts every GPU), so what it decides (DistributedDataParallel, \
DataParallel) goes another way on a TPU: decide by the world size (`dist.get_world_size()`)";

/// Does `op k` (the count on the left) ask whether there are several devices (`> 1`, `>= 2`,
/// `== 1`), not whether there is any (`> 0`, `>= 1`, `== 0`)?
fn several(op: &str, k: u64) -> bool {
    match op {
        ">" | "<=" | "==" | "!=" => k >= 1,
        ">=" | "<" => k >= 2,
        _ => false,
    }
}

/// The same comparison with the count on the right (`1 < n` is `n > 1`).
fn flipped(op: &str) -> &str {
    match op {
        "<" => ">",
        ">" => "<",
        "<=" => ">=",
        ">=" => "<=",
        other => other,
    }
}

const NOT_ITS_OWN_STATEMENT: &str = "not proven safe: TorchTPU binds each process to one device \
and raises for any other index, so the call must run only where the accelerator is not a TPU, \
and it is not a statement of its own that an `if` could hold";

impl<'a> Checker<'a> {
    /// Keep a variable device index off the TPU (see the module doc).
    pub(in crate::port::rewrite) fn set_device_index_off_the_tpu(
        &self,
        rule: &Rule,
        m: &Match<'a>,
        d: &mut Diagnostic,
    ) {
        if rule.name != "cuda-set-device" {
            return;
        }
        let Some(call) = m.call else { return };
        let Some(fix) = d.fix.as_mut() else { return };
        if fix.applicability != FixClass::Safe {
            return;
        }
        let arg = call
            .arguments
            .args
            .first()
            .or_else(|| call.arguments.find_keyword("device").map(|k| &k.value));
        // Index 0 is every TorchTPU process's own.
        let zero = match arg {
            Some(Expr::NumberLiteral(n)) => self.text(n.range()) == "0",
            Some(Expr::StringLiteral(s)) => matches!(s.value.to_str(), "cuda:0" | "0"),
            _ => false,
        };
        if zero
            || !fix
                .edits
                .iter()
                .all(|e| call.range().contains_range(e.range))
        {
            return;
        }
        let statement = self
            .statement_of_call(call.range())
            .filter(|s| self.alone_on_its_lines(*s));
        let indent = statement.and_then(|s| indent_of(self.src, s.start()));
        let (Some(statement), Some(indent)) = (statement, indent) else {
            d.make_unsafe(NOT_ITS_OWN_STATEMENT);
            return;
        };
        let (current, import) = template::qualify(
            "torch.accelerator.current_accelerator",
            &self.ctx_at(TextRange::empty(call.start())),
        );
        let body = self.edited_text(statement, &fix.edits);
        fix.edits = vec![Edit::replace(
            statement,
            format!("if {current}().type != \"tpu\":\n{indent}    {body}"),
        )];
        fix.imports.extend(import);
    }
}

impl<'a> Checker<'a> {
    /// A device count compared with ranks is unsafe (see the module doc).
    pub(in crate::port::rewrite) fn device_count_against_ranks(
        &self,
        rule: &Rule,
        m: &Match<'a>,
        d: &mut Diagnostic,
    ) {
        if rule.name != "cuda-device-count"
            || d.fix
                .as_ref()
                .is_none_or(|f| f.applicability != FixClass::Safe)
        {
            return;
        }
        let mut compared = false;
        let mut counted = false;
        let mut assigned: Option<&str> = None;
        for n in self.stack.iter().rev() {
            match n {
                AnyNodeRef::ExprCompare(c) => {
                    compared = std::iter::once(&*c.left)
                        .chain(c.comparators.iter())
                        .filter(|e| !e.range().contains_range(m.range))
                        .any(|e| RANK_LIKE.is_match(self.text(e.range())));
                    counted = self.asks_for_several(c, m.range);
                    break;
                }
                AnyNodeRef::StmtAssign(a) => {
                    if let [Expr::Name(t)] = a.targets.as_slice() {
                        assigned = Some(t.id.as_str());
                    }
                    break;
                }
                n if n.is_statement() => break,
                _ => {}
            }
        }
        // `n = torch.cuda.device_count()`, then `assert local_rank < n` in this file.
        if let Some(name) = assigned {
            let name = regex::escape(name);
            let side = r"[\w.\[\]'\x22]*";
            let pattern = format!(
                r"(?i)\b{name}\b\s*(<=?|>=?|==|!=)\s*{side}(rank|world|nproc|gpu){side}|(rank|world|nproc|gpu){side}\s*(<=?|>=?|==|!=)\s*\b{name}\b"
            );
            compared = Regex::new(&pattern).is_ok_and(|re| re.is_match(self.src));
            let number = format!(
                r"\b{name}\b\s*(<=?|>=?|==|!=)\s*(\d+)\b|\b(\d+)\s*(<=?|>=?|==|!=)\s*\b{name}\b"
            );
            counted = Regex::new(&number).is_ok_and(|re| {
                re.captures_iter(self.src)
                    .any(|c| match (c.get(1), c.get(2)) {
                        (Some(op), Some(k)) => {
                            k.as_str().parse().is_ok_and(|k| several(op.as_str(), k))
                        }
                        _ => c[3].parse().is_ok_and(|k| several(flipped(&c[4]), k)),
                    })
            });
        }
        if compared {
            d.make_unsafe(COUNT_AGAINST_RANKS);
        } else if counted {
            d.make_unsafe(SEVERAL_DEVICES);
        } else if !self.count_use_is_neutral(m.range) {
            d.make_unsafe(super::device_count_uses::PER_DEVICE_WORK);
        }
    }

    /// Is the comparison `c`, with the count at `count`, a test for several devices?
    fn asks_for_several(&self, c: &ast::ExprCompare, count: TextRange) -> bool {
        let sides: Vec<&Expr> = std::iter::once(&*c.left)
            .chain(c.comparators.iter())
            .collect();
        c.ops.iter().enumerate().any(|(i, op)| {
            let (l, r) = (sides[i], sides[i + 1]);
            if l.range().contains_range(count) {
                self.int_literal(r).is_some_and(|k| several(op.as_str(), k))
            } else if r.range().contains_range(count) {
                self.int_literal(l)
                    .is_some_and(|k| several(flipped(op.as_str()), k))
            } else {
                false
            }
        })
    }

    /// The value of a non-negative integer literal (`1`, `0`).
    pub(super) fn int_literal(&self, e: &Expr) -> Option<u64> {
        match e {
            Expr::NumberLiteral(n) => self.text(n.range()).parse().ok(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::migrate;

    #[test]
    fn a_variable_device_index_is_set_only_off_the_tpu() {
        let src = "import os\nimport torch\n\n\ndef main():\n    local_rank = int(os.environ[\"LOCAL_RANK\"])\n    torch.cuda.set_device(local_rank)  # one GPU per process\n    torch.cuda.set_device(0)\n    ok = torch.cuda.set_device(local_rank) or True\n    return ok\n";
        let r = migrate("CUD004", src, None);
        let out = r.output.unwrap_or_default();
        assert!(
            out.contains("    if torch.accelerator.current_accelerator().type != \"tpu\":\n        torch.accelerator.set_device_index(local_rank)  # one GPU per process\n"),
            "{out}"
        );
        assert!(
            out.contains("\n    torch.accelerator.set_device_index(0)\n"),
            "{out}"
        );
        // Inside an expression no `if` can hold it: unsafe, with the reason.
        assert!(
            out.contains("ok = torch.cuda.set_device(local_rank) or True"),
            "{out}"
        );
        assert!(
            r.diagnostics.iter().any(|d| d
                .note
                .as_deref()
                .is_some_and(|n| n.contains("binds each process"))),
            "{:?}",
            r.diagnostics
        );
    }

    #[test]
    fn a_device_count_compared_with_ranks_is_unsafe() {
        let src = "import os\nimport torch\n\nlocal_rank = int(os.environ[\"LOCAL_RANK\"])\nassert local_rank < torch.cuda.device_count()\nassert torch.cuda.device_count() >= args.world_size\nn = torch.cuda.device_count()\nif args.local_rank >= n:\n    raise SystemExit(1)\nm = torch.cuda.device_count()\nif m > 1:\n    print(m)\nbatch = 64 * torch.cuda.device_count()\n";
        let out = migrate("CUD002", src, None)
            .output
            .unwrap_or_else(|| src.to_string());
        assert!(
            out.contains("assert local_rank < torch.cuda.device_count()\n"),
            "{out}"
        );
        assert!(
            out.contains("assert torch.cuda.device_count() >= args.world_size\n"),
            "{out}"
        );
        assert!(out.contains("n = torch.cuda.device_count()\n"), "{out}");
        // `m > 1` asks for several devices: the count differs on a TPU (see the module doc).
        assert!(out.contains("m = torch.cuda.device_count()\n"), "{out}");
        // A batch sized by the count is per-device work (`safety::device_count_uses`).
        assert!(
            out.contains("batch = 64 * torch.cuda.device_count()\n"),
            "{out}"
        );
        let use_ddp = "import os\nimport torch\n\nuse_ddp = torch.cuda.device_count() > 1 and int(os.environ.get('WORLD_SIZE', 1)) > 1\nany_gpu = torch.cuda.device_count() > 0\nsingle = 1 == torch.cuda.device_count()\nk = torch.cuda.device_count()\nprint(k >= 1)\n";
        let out = migrate("CUD002", use_ddp, None).output.unwrap_or_default();
        assert!(
            out.contains("use_ddp = torch.cuda.device_count() > 1"),
            "{out}"
        );
        assert!(
            out.contains("single = 1 == torch.cuda.device_count()"),
            "{out}"
        );
        assert!(
            out.contains("any_gpu = torch.accelerator.device_count() > 0"),
            "{out}"
        );
        assert!(
            out.contains("k = torch.accelerator.device_count()"),
            "{out}"
        );
    }
}
