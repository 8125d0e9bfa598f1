//! Device-like strings that are not this program's devices, though they sit in a place that
//! looks like one: an argument of a `torch.cuda.*` API (a CUDA API must not get a TPU string),
//! the device type a custom op registers a kernel for (`device_types="cuda"`), another library's
//! own names (Lightning's `accelerator="cuda"`: "tpu" there means torch_xla; vLLM, DeepSpeed,
//! accelerate), the values of an argparse flag that is not a device flag (`--gpu_arch_type`
//! with `choices=["cuda", "rocm"]`), a list that also holds names which are not devices or that
//! names several device types, a test's device parametrization. A finding there keeps no fix;
//! its note says why.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{self as ast, AnyNodeRef, Expr};
use ruff_text_size::{Ranged, TextRange};

use crate::port::rewrite::Checker;
use crate::port::rewrite::roles::argparse_dest;

/// A string that names a device type of PyTorch (or Lightning's "gpu"/"auto").
static DEVICE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(cpu|cuda|mps|xpu|xla|tpu|meta|hpu|npu|mtia|ipu|privateuseone|lazy|vulkan|hip|maia|gpu|auto)(:\d+)?$").unwrap()
});

/// Libraries with device names of their own.
const OWN_NAMES: &[&str] = &[
    "lightning",
    "pytorch_lightning",
    "lightning_fabric",
    "vllm",
    "deepspeed",
    "accelerate",
    "sglang",
    "ray",
];

/// Test parametrization: a list of device names for tests, not the program's device.
const TEST_PARAMS: &[&str] = &[
    "parametrize",
    "parameterize",
    "parameterized",
    "expand",
    "instantiate_device_type_tests",
    "instantiate_parametrized_tests",
    "onlyOn",
    "skipIfDevice",
    "deviceCountAtLeast",
];

/// Device types other than TorchTPU's, as keys of per-device tables.
const DEVICE_TYPES: &[&str] = &[
    "cuda", "cpu", "xpu", "hpu", "npu", "mps", "mlu", "musa", "xla", "meta", "mtia", "neuron",
];

const LIBRARY_NOTE: &str = "not rewritten: this is the device type a custom op or kernel is \
    registered for, and the registered code is CUDA code, which does not run on a TPU; register \
    a TPU (or composite) implementation by hand";

const LIGHTNING_NOTE: &str = "not rewritten: Lightning's `accelerator` names a Lightning \
    Accelerator, and \"tpu\" there means torch_xla's XLAAccelerator, not TorchTPU; choose the \
    device by hand (see Lightning's notes on TorchTPU)";

const TEST_NOTE: &str = "not rewritten: a device name of a test's parametrization, not the \
    program's device; add a TPU case by hand if the test should run there";

impl<'a> Checker<'a> {
    /// In a file that imports Lightning, a setting named `accelerator` is Lightning's.
    fn lightning_setting(&self, name: &str) -> Option<String> {
        let lightning = self.sem.module_imports().any(|(_, q)| {
            let root = q.split('.').next().unwrap_or("");
            matches!(root, "lightning" | "pytorch_lightning" | "lightning_fabric")
        });
        (lightning && name.ends_with("accelerator")).then(|| LIGHTNING_NOTE.into())
    }

    /// Why the string at `range` (with these ancestors, outermost first) is not to be rewritten
    /// as this program's device, if it is not.
    pub(in crate::port::rewrite) fn not_a_device(
        &self,
        ancestors: &[AnyNodeRef<'a>],
        range: TextRange,
    ) -> Option<String> {
        let mut child = range;
        let mut keyword: Option<&str> = None;
        for anc in ancestors.iter().rev() {
            match anc {
                AnyNodeRef::ExprIf(e) if e.test.range() != child => child = e.range,
                AnyNodeRef::ExprBoolOp(e) => child = e.range,
                AnyNodeRef::ExprList(ast::ExprList { elts, range, .. })
                | AnyNodeRef::ExprTuple(ast::ExprTuple { elts, range, .. })
                | AnyNodeRef::ExprSet(ast::ExprSet { elts, range, .. }) => {
                    if let Some(note) = mixed_list(elts) {
                        return Some(note);
                    }
                    child = *range;
                }
                AnyNodeRef::Keyword(k) => {
                    keyword = k.arg.as_ref().map(|a| a.as_str());
                    if keyword == Some("device_types") {
                        return Some(LIBRARY_NOTE.into());
                    }
                    if let Some(note) = keyword.and_then(device_map) {
                        return Some(note);
                    }
                    child = k.range;
                }
                AnyNodeRef::Arguments(_) => {}
                AnyNodeRef::ExprDict(d) => {
                    let key = d.items.iter().find_map(|i| match &i.key {
                        Some(Expr::StringLiteral(k)) if i.value.range() == child => {
                            Some(k.value.to_str())
                        }
                        _ => None,
                    });
                    return key.and_then(|k| self.lightning_setting(k));
                }
                AnyNodeRef::StmtAssign(a) => {
                    return a.targets.iter().find_map(|t| {
                        let name = match t {
                            Expr::Name(n) => n.id.as_str(),
                            Expr::Attribute(x) => x.attr.as_str(),
                            _ => return None,
                        };
                        device_map(name).or_else(|| self.lightning_setting(name))
                    });
                }
                AnyNodeRef::ParameterWithDefault(_) => {
                    // `def test_add(self, device="xla")`: the test framework's device name.
                    let test = ancestors.iter().rev().find_map(|a| match a {
                        AnyNodeRef::StmtFunctionDef(f) => Some(f.name.starts_with("test")),
                        _ => None,
                    });
                    return test.unwrap_or(false).then(|| TEST_NOTE.into());
                }
                AnyNodeRef::ExprCall(c) => {
                    if c.func.range().contains_range(child) {
                        return None;
                    }
                    // `device = f"cuda:{rank}"; torch.cuda.set_device(device)`: the call's
                    // own fix (CUD004, when selected) takes the index (flow.rs), not the string.
                    let named = c.arguments.args.iter().find_map(|a| match a {
                        Expr::Name(n) if n.range == child => Some(n),
                        _ => None,
                    });
                    if self.sem.qualified_name(&c.func).as_deref() == Some("torch.cuda.set_device")
                        && !self.rules.get("CUD004").is_empty()
                        && named.is_some_and(|n| self.device_index_in(ancestors, n).is_some())
                    {
                        return None;
                    }
                    return self.foreign_call(c, keyword);
                }
                AnyNodeRef::ExprCompare(c) => {
                    let others = std::iter::once(c.left.as_ref()).chain(c.comparators.iter());
                    return others
                        .filter(|e| e.range() != child)
                        .find_map(|e| self.foreign_compared(e));
                }
                AnyNodeRef::StmtReturn(_) => {
                    // Lightning's `def _choose_gpu_accelerator_backend(): return "cuda"`.
                    let name = ancestors.iter().rev().find_map(|a| match a {
                        AnyNodeRef::StmtFunctionDef(f) => Some(f.name.as_str()),
                        _ => None,
                    })?;
                    let at = name.find("accelerator")?;
                    return self.lightning_setting(&name[..at + "accelerator".len()]);
                }
                _ => return None,
            }
        }
        None
    }

    /// A value in a table keyed by device type (`{"cuda": "nccl", "xpu": "ccl"}`) under a key
    /// other than "tpu": it is that device's entry, not this program's device or backend.
    pub(in crate::port::rewrite) fn device_table_entry(
        &self,
        ancestors: &[AnyNodeRef<'a>],
        range: TextRange,
    ) -> Option<String> {
        let Some(AnyNodeRef::ExprDict(d)) = ancestors.last() else {
            return None;
        };
        let key = d.items.iter().find_map(|i| match &i.key {
            Some(Expr::StringLiteral(k)) if i.value.range() == range => Some(k.value.to_str()),
            _ => None,
        })?;
        DEVICE_TYPES.contains(&key).then(|| {
            format!(
                "not rewritten: this is the \"{key}\" entry of a table keyed by device type; \
                 add a \"tpu\" entry (\"tpu_dist\" for a backend) if the table lacks one"
            )
        })
    }

    /// A string in a class whose name says it is the CUDA or NCCL implementation of a
    /// per-backend abstraction (DeepSpeed's `CUDA_Accelerator`), or assigned to a name that says
    /// NCCL (`NCCL_BACKEND = "nccl"`): it names that backend, not this program's.
    pub(in crate::port::rewrite) fn cuda_implementation(
        &self,
        ancestors: &[AnyNodeRef<'a>],
    ) -> Option<String> {
        let says = |name: &str| {
            let n = name.to_ascii_lowercase();
            n.contains("cuda") || n.contains("nccl")
        };
        let class = ancestors.iter().find_map(|a| match a {
            AnyNodeRef::StmtClassDef(c) if says(c.name.as_str()) => Some(c.name.as_str()),
            _ => None,
        });
        if let Some(name) = class {
            return Some(format!(
                "not rewritten: `{name}` implements the CUDA/NCCL backend of a per-device \
                 abstraction; give TorchTPU its own implementation instead"
            ));
        }
        // The assigned value itself (or a branch of it), not an argument inside it.
        let target = ancestors
            .iter()
            .rev()
            .find(|a| !matches!(a, AnyNodeRef::ExprIf(_) | AnyNodeRef::ExprBoolOp(_)))
            .and_then(|a| match a {
                AnyNodeRef::StmtAssign(s) => s.targets.first(),
                _ => None,
            });
        match target {
            Some(Expr::Name(n)) if n.id.to_ascii_lowercase().contains("nccl") => Some(format!(
                "not rewritten: `{}` names the NCCL backend itself; compare with a TorchTPU \
                 name of your own instead",
                n.id
            )),
            _ => None,
        }
    }

    /// The string is compared with `other`: a value of a library with device names of its own
    /// (`get_accelerator().device_name() == "cuda"`: DeepSpeed's accelerator, which has no TPU
    /// one), or Lightning's `accelerator` setting.
    fn foreign_compared(&self, other: &Expr) -> Option<String> {
        let last = match other {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.as_str(),
            _ => "",
        };
        if let Some(note) = device_map(last).or_else(|| self.lightning_setting(last)) {
            return Some(note);
        }
        // `accelerator.device_name()` (DeepSpeed's, imported relatively or held in a name): a
        // library accelerator's name, not a torch device.
        let callee = match other {
            Expr::Call(c) => c.func.as_ref(),
            e => e,
        };
        if let Expr::Attribute(a) = callee
            && a.attr.as_str() == "device_name"
            && self
                .text(a.value.range())
                .to_ascii_lowercase()
                .contains("accelerator")
        {
            return Some(format!(
                "not rewritten: `{}` is a library accelerator's own name (DeepSpeed's says \
                 \"cuda\" on CUDA and has no TorchTPU one): the test asks whether it runs on \
                 CUDA; change it by hand",
                self.text(other.range())
            ));
        }
        let mut e = other;
        loop {
            if let Some(q) = self.sem.qualified_name(e) {
                let root = q.split('.').next().unwrap_or("");
                return OWN_NAMES.contains(&root).then(|| {
                    format!(
                        "not rewritten: compared with a value of `{q}`, which has {root}'s own \
                         device names (on CUDA it says \"cuda\"; it has no TorchTPU one): the \
                         test asks whether {root} runs on CUDA; change it by hand"
                    )
                });
            }
            e = match e {
                Expr::Attribute(a) => &a.value,
                Expr::Call(c) => &c.func,
                Expr::Subscript(s) => &s.value,
                _ => return None,
            };
        }
    }

    /// The string is an argument of this call (as `keyword`, or positional).
    fn foreign_call(&self, c: &ast::ExprCall, keyword: Option<&str>) -> Option<String> {
        let q = self.sem.qualified_name(&c.func);
        let last = match c.func.as_ref() {
            Expr::Attribute(a) => a.attr.as_str(),
            Expr::Name(n) => n.id.as_str(),
            _ => "",
        };
        if let Some(q) = &q {
            if q.starts_with("torch.cuda.") {
                return Some(format!(
                    "not rewritten: an argument of `{q}`, a CUDA API, must not name a TPU device; \
                     migrate the call (its own rule rewrites the argument with it), or by hand"
                ));
            }
            if q.starts_with("torch.library.") {
                return Some(LIBRARY_NOTE.into());
            }
        }
        if matches!(last, "custom_op" | "register_kernel" | "triton_op") {
            return Some(LIBRARY_NOTE.into());
        }
        let root = q.as_deref().map(|q| q.split('.').next().unwrap_or(""));
        let lightning = matches!(
            root,
            Some("lightning" | "pytorch_lightning" | "lightning_fabric")
        ) || matches!(last, "Trainer" | "Fabric");
        if lightning || keyword == Some("accelerator") {
            return Some(LIGHTNING_NOTE.into());
        }
        if let (Some(q), Some(root)) = (&q, root)
            && OWN_NAMES.contains(&root)
        {
            return Some(format!(
                "not rewritten: `{q}` takes {root}'s own device names; check its TPU support and \
                 change the value by hand"
            ));
        }
        if TEST_PARAMS.contains(&last) || matches!(keyword, Some("only_for" | "except_for")) {
            return Some(TEST_NOTE.into());
        }
        if last == "add_argument" && matches!(keyword, Some("default" | "choices" | "const")) {
            if let Some(dest) = argparse_dest(c)
                && !dest.to_ascii_lowercase().contains("device")
            {
                return Some(format!(
                    "not rewritten: the values of the `{dest}` flag are not known to be devices \
                     (a flag's allowed values are its own); if the flag names a device, change \
                     them by hand"
                ));
            }
            if let Some(choices) = c.arguments.find_keyword("choices")
                && let Expr::List(ast::ExprList { elts, .. })
                | Expr::Tuple(ast::ExprTuple { elts, .. }) = &choices.value
                && let Some(note) = mixed_list(elts)
            {
                return Some(note);
            }
        }
        None
    }
}

/// Accelerate's `device_map` (`from_pretrained(..., device_map="cuda")`): a placement plan that
/// Accelerate and Transformers resolve with their own device checks, not a torch device.
fn device_map(name: &str) -> Option<String> {
    (name == "device_map").then(|| {
        "not rewritten: `device_map` is Accelerate's placement plan, resolved by Accelerate/\
         Transformers with their own device checks (\"cuda\" there is not a TorchTPU device); \
         load on \"cpu\" and move the model with `.to(\"tpu\")`, or change it by hand"
            .into()
    })
}

/// A list that also holds a name which is not a device, or that names several device types
/// (a test's devices, backend names): not one device of this program.
fn mixed_list(elts: &[Expr]) -> Option<String> {
    let names: Vec<&str> = elts
        .iter()
        .filter_map(|e| match e {
            Expr::StringLiteral(s) => Some(s.value.to_str()),
            _ => None,
        })
        .collect();
    if let Some(other) = names.iter().find(|n| !DEVICE_NAME.is_match(n)) {
        return Some(format!(
            "not rewritten: the list also holds \"{other}\", which is not a device: these are \
             names of something else (a flag's values, backends); change it by hand if it is a \
             device"
        ));
    }
    let mut accel: Vec<&str> = names
        .iter()
        .map(|n| n.split(':').next().unwrap_or(n))
        .filter(|t| !matches!(*t, "cpu" | "meta" | "auto"))
        .collect();
    accel.sort_unstable();
    accel.dedup();
    (accel.len() > 1).then(|| {
        format!(
            "not rewritten: the list names several device types ({}), as a test's or a \
             backend table's does; add or replace the TPU entry by hand",
            accel.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use ruff_python_ast::Expr;

    use super::mixed_list;
    use crate::port::parse::parse;

    fn list(src: &str) -> Option<String> {
        let parsed = parse(src);
        let ruff_python_ast::Stmt::Expr(e) = &parsed.module.body[0] else {
            panic!()
        };
        let Expr::List(l) = e.value.as_ref() else {
            panic!()
        };
        mixed_list(&l.elts)
    }

    #[test]
    fn lists_of_one_device_type_are_devices() {
        assert!(list(r#"["cuda", "cpu"]"#).is_none());
        assert!(list(r#"["cuda:0", "cuda:1", "cpu"]"#).is_none());
        assert!(list(r#"["cuda", "rocm"]"#).unwrap().contains("rocm"));
        assert!(
            list(r#"["cpu", "cuda", "xla"]"#)
                .unwrap()
                .contains("cuda, xla")
        );
    }
}
