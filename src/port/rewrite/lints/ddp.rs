//! DST101: the device index given to `DistributedDataParallel(module, device_ids=[i])`.
//!
//! An integer device means the current accelerator's device under torch 2.15: `torch.device(1)`
//! is `cuda:1` on a CUDA build and `tpu:1` with TorchTPU loaded, and TorchTPU maps `tpu:1` to the
//! process's one device (found by running both, `tpuport run --target xla-cpu`). So
//! `torch.device(i)`, `.to(i)` and `device=i` already port themselves. DDP's `device_ids` does
//! not: torch looks the index up in a per-device stream table with one entry per device, and a
//! TorchTPU process has one device, so `device_ids=[1]` raises `IndexError` at the first forward
//! on every rank but 0 (once the inputs are on the device). `output_device` is not used for a
//! single-device module.
//!
//! The fix writes `device_ids=[i % torch.accelerator.device_count()]`: the same GPU on a CUDA
//! machine, where a local rank is below the device count, and 0 on a TPU, where the module is
//! on its device by then, so the runtime has started and a torchrun process counts its one
//! device. (Before the runtime starts `device_count()` answers the host's chip count, which is
//! why CUD004 guards `set_device_index` instead: `safety/device_index.rs`.) A `torch.device` (or a name that says it is one) is reported, not rewritten:
//! `%` does not apply to it.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::Ranged;

use super::super::Checker;
use super::{Found, walk};
use crate::port::edit::{Edit, Fix};
use crate::port::rules::FixClass;

/// DistributedDataParallel's qualified names.
const DDP: [&str; 2] = [
    "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel",
];

/// A name that says its value is a device (`device`, `dev`, `local_device`).
static DEVICE_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)dev").unwrap());

/// The one element of each one-element list or tuple `ids` can be: itself, or either branch of
/// a conditional expression.
fn single_elements(ids: &Expr) -> Vec<&Expr> {
    match ids {
        Expr::List(l) if l.elts.len() == 1 => vec![&l.elts[0]],
        Expr::Tuple(t) if t.elts.len() == 1 => vec![&t.elts[0]],
        Expr::If(e) => {
            let mut out = single_elements(&e.body);
            out.extend(single_elements(&e.orelse));
            out
        }
        _ => vec![],
    }
}

/// What to do with one `device_ids` element.
enum Index {
    /// Right on every machine: 0, None, an index already taken modulo the device count, the
    /// current device's index (CUD003 ports `torch.cuda.current_device()`).
    Fine,
    /// An int: `i % torch.accelerator.device_count()`.
    Int,
    /// A device object (certainly, or by its name): reported.
    Device(bool),
}

impl Checker<'_> {
    /// DST101's findings (see the module doc).
    pub(super) fn ddp_device_indices(&self) -> Vec<Found> {
        let mut out = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            // Through any alias (`DistributedDataParallel as DDP`).
            let is_ddp = self.callee(call).is_some_and(|q| DDP.contains(&q.as_str()));
            if !is_ddp {
                return;
            }
            let ids = call
                .arguments
                .find_keyword("device_ids")
                .map(|k| &k.value)
                .or_else(|| call.arguments.args.get(1));
            let Some(ids) = ids else { return };
            // `[local_rank] if torch.cuda.is_available() else None`: each branch (CUD001 ports
            // the test, so on a TPU the list is taken there too).
            for element in single_elements(ids) {
                if let Some(found) = self.device_index(element) {
                    out.push(found);
                }
            }
        });
        out
    }

    /// The finding for one `device_ids` element, with its fix where it is an int.
    fn device_index(&self, e: &Expr) -> Option<Found> {
        let text = self.text(e.range());
        let what = match e {
            Expr::NumberLiteral(n) => match n.value.as_int().and_then(|i| i.as_u64()) {
                Some(0) => Index::Fine,
                Some(_) => Index::Int,
                None => Index::Fine,
            },
            Expr::NoneLiteral(_) | Expr::StringLiteral(_) | Expr::FString(_) => Index::Fine,
            _ if text.contains("device_count") || text.contains("current_device") => Index::Fine,
            Expr::Call(c) if self.callee(c).is_some_and(|q| q == "torch.device") => {
                Index::Device(true)
            }
            // A device's index is an int (`device.index`).
            Expr::Attribute(a) if a.attr.as_str() == "index" => Index::Int,
            _ if DEVICE_NAME.is_match(text) => Index::Device(false),
            _ => Index::Int,
        };
        match what {
            Index::Fine => None,
            Index::Device(true) => Some(Found::with(
                e.range(),
                " (a torch.device: write its `.index % torch.accelerator.device_count()`, or leave device_ids out)".into(),
            )),
            Index::Device(false) => Some(Found::with(
                e.range(),
                " (by its name a device, which `%` does not apply to: for a torch.device `d` write `d.index % torch.accelerator.device_count()`, for an int `i % torch.accelerator.device_count()`, or leave device_ids out)".into(),
            )),
            Index::Int => {
                let atom = matches!(
                    e,
                    Expr::Name(_)
                        | Expr::Attribute(_)
                        | Expr::Subscript(_)
                        | Expr::Call(_)
                        | Expr::NumberLiteral(_)
                );
                let index = if atom {
                    text.to_string()
                } else {
                    format!("({text})")
                };
                Some(Found {
                    range: e.range(),
                    detail: String::new(),
                    fix: Some(Fix {
                        edits: vec![Edit::replace(
                            e.range(),
                            format!("{index} % torch.accelerator.device_count()"),
                        )],
                        applicability: FixClass::Safe,
                        imports: vec!["torch".into()],
                        exclusive: None,
                        why_unsafe: None,
                    }),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The file after a default migration with DST101 alone, and the findings' messages.
    fn port(src: &str) -> (Option<String>, Vec<String>) {
        let out = crate::port::test_support::migrate("DST101", src, None);
        (
            out.output,
            out.diagnostics.iter().map(|d| d.message.clone()).collect(),
        )
    }

    #[test]
    fn an_int_device_index_is_taken_modulo_the_device_count() {
        let src = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\nm = DDP(model, device_ids=[local_rank], output_device=local_rank)\nn = torch.nn.parallel.DistributedDataParallel(model, [args.gpu + 1])\no = DDP(model, device_ids=[device.index])\n";
        let (out, found) = port(src);
        let out = out.expect("fixed");
        assert!(
            out.contains("DDP(model, device_ids=[local_rank % torch.accelerator.device_count()], output_device=local_rank)"),
            "{out}"
        );
        assert!(
            out.contains("(model, [(args.gpu + 1) % torch.accelerator.device_count()])"),
            "{out}"
        );
        assert!(
            out.contains("device_ids=[device.index % torch.accelerator.device_count()]"),
            "{out}"
        );
        assert_eq!(found.len(), 3);
        // A second run changes nothing.
        assert_eq!(port(&out), (None, vec![]));
    }

    #[test]
    fn devices_are_reported_and_fine_indices_left_alone() {
        let src = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\na = DDP(model, device_ids=[device])\nb = DDP(model, device_ids=[torch.device(\"cuda\", rank)])\n";
        let (out, found) = port(src);
        assert_eq!(out, None);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("a torch.device"), "{found:?}");
        for fine in [
            "[0]",
            "None",
            "[torch.cuda.current_device()]",
            "[rank % torch.accelerator.device_count()]",
            "[0, 1]",
        ] {
            let src = format!(
                "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\na = DDP(model, device_ids={fine})\n"
            );
            assert_eq!(port(&src), (None, vec![]), "{fine}");
        }
        // Another class of the same name is not torch's.
        let other = "from mylib import DistributedDataParallel\n\na = DistributedDataParallel(model, device_ids=[rank])\n";
        assert_eq!(port(other), (None, vec![]));
    }
}
