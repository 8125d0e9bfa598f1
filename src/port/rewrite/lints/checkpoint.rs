//! DEV019: `model.load_state_dict(torch.load(path))`, a checkpoint loaded with no
//! `map_location`. torch restores each tensor onto the device it was saved from, so a checkpoint
//! saved on CUDA holds `cuda:0` storages, and on a TPU VM (no CUDA) `torch.load` raises
//! "Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False"
//! before the state reaches the model: the program ports, and its first resume or evaluation
//! fails (set E's LeNet5 `test()`, whose shipped checkpoints are all `cuda:0`).
//!
//! Where the loaded object goes straight into `load_state_dict` (no `assign=`), the fix writes
//! `map_location="cpu"`: `load_state_dict` copies each value into the parameter or buffer that
//! already exists, on that one's device, so on CUDA the module ends with the same values on the
//! same device as before (an optimizer's `load_state_dict` casts its state to its parameters'
//! devices too), and on a TPU the load no longer needs CUDA. A checkpoint kept in a variable is
//! not rewritten: its other entries may be used as they were loaded. Where the program defines
//! its own `load_state_dict` (this module, or a project module it imports: an EMA helper may
//! keep the loaded tensors as they are), the fix is unsafe.
//!
//! LIB015: `safetensors.torch.load_file(path, device=...)` and `safe_open(path, framework,
//! device=...)` with a device that is not the literal "cpu". safetensors checks the device
//! string against its own list (cpu, cuda, mps, npu, xpu, xla, ...), so the device a port
//! chooses on a TPU VM raises `device tpu is invalid` (set F's review). Reported, for the program
//! to be named blocked: loading onto the CPU is the fix, by hand where the tensors are used as
//! loaded.

use ruff_python_ast::{AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextSize};

use super::super::Checker;
use super::{Found, walk};
use crate::port::edit::{Edit, Fix};
use crate::port::rules::FixClass;

impl Checker<'_> {
    /// DEV019's findings (see the module doc).
    pub(super) fn state_loads_without_map_location(&self) -> Vec<Found> {
        let mut out = vec![];
        let mut own_loader: Option<bool> = None;
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(outer) = node else {
                return;
            };
            let Expr::Attribute(a) = outer.func.as_ref() else {
                return;
            };
            if a.attr.as_str() != "load_state_dict"
                || outer.arguments.find_keyword("assign").is_some()
                || outer.arguments.keywords.iter().any(|k| k.arg.is_none())
            {
                return;
            }
            let Some(Expr::Call(load)) = outer.arguments.args.first() else {
                return;
            };
            let args = &load.arguments;
            let plain = args.args.len() == 1
                && !args.args.iter().any(|e| e.is_starred_expr())
                && args.keywords.iter().all(|k| {
                    k.arg
                        .as_ref()
                        .is_some_and(|n| !matches!(n.as_str(), "map_location" | "f"))
                });
            if !plain || self.callee(load).is_none_or(|q| q != "torch.load") {
                return;
            }
            // Before the closing parenthesis, after a trailing comma if there is one.
            let close = args.end() - TextSize::from(1);
            let inner = self.text(ruff_text_size::TextRange::new(args.start(), close));
            let insert = if inner.trim_end().ends_with(',') {
                " map_location=\"cpu\""
            } else {
                ", map_location=\"cpu\""
            };
            let at = args.start() + TextSize::of(inner.trim_end());
            let own = *own_loader.get_or_insert_with(|| self.defines_load_state_dict());
            out.push(Found {
                range: load.range(),
                detail: String::new(),
                fix: Some(Fix {
                    edits: vec![Edit::insert(at, insert)],
                    applicability: if own {
                        FixClass::Unsafe
                    } else {
                        FixClass::Safe
                    },
                    imports: vec![],
                    exclusive: None,
                    why_unsafe: own.then(|| {
                        "this program defines its own load_state_dict, which may keep the loaded \
                         tensors where they were loaded (on the CPU) instead of copying them"
                            .to_string()
                    }),
                }),
            });
        });
        out
    }

    /// Does this module, or a project module it imports, define a `load_state_dict`?
    fn defines_load_state_dict(&self) -> bool {
        const DEF: &str = "def load_state_dict(";
        if self.src.contains(DEF) {
            return true;
        }
        let Some(path) = self.facts.path.as_deref() else {
            return false;
        };
        crate::port::program::imports::module_within_that(path, self.src, usize::MAX, &|t| {
            t.contains(DEF)
        })
        .is_some()
    }

    /// LIB015's findings (see the module doc).
    pub(super) fn safetensors_devices(&self) -> Vec<Found> {
        const LOADERS: [&str; 3] = [
            "safetensors.torch.load_file",
            "safetensors.safe_open",
            "safetensors.torch.safe_open",
        ];
        let mut out = vec![];
        walk(&self.parsed.module.body, true, &mut |node, _| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            let Some(q) = self.callee(call) else { return };
            let Some(at) = LOADERS.iter().position(|l| *l == q) else {
                return;
            };
            // load_file(filename, device); safe_open(filename, framework, device).
            let device = call
                .arguments
                .find_keyword("device")
                .map(|k| &k.value)
                .or_else(|| call.arguments.args.get(if at == 0 { 1 } else { 2 }));
            let Some(device) = device else { return };
            let cpu = matches!(device, Expr::StringLiteral(s) if s.value.to_str() == "cpu");
            if !cpu {
                out.push(Found::at(call.range()));
            }
        });
        out
    }
}
