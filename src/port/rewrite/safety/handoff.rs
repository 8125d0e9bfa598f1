//! Tensors handed to another library through DLPack: `cp.fromDlpack(to_dlpack(x.cuda()))`,
//! `numba.cuda.as_cuda_array(x.cuda())`, `x.cuda().__dlpack__()`. The receiving library decides
//! which device memory it takes (CuPy and Numba's CUDA arrays take CUDA memory only), so moving
//! the tensor to the TPU hands TPU memory to CUDA code. A device fix there is unsafe.

use ruff_python_ast::AnyNodeRef;

use crate::port::rewrite::Checker;
use crate::port::rules::Rule;

/// The calls (last name) that hand a tensor's memory to another library.
const HANDOFFS: &[&str] = &[
    "to_dlpack",
    "from_dlpack",
    "fromDlpack",
    "__dlpack__",
    "as_cuda_array",
];

impl Checker<'_> {
    /// Why a device (DEV) fix in the current expression is unsafe: its tensor is handed over
    /// through DLPack in the same statement.
    pub(in crate::port::rewrite) fn handed_over(&self, rule: &Rule) -> Option<String> {
        if rule.family != "DEV" {
            return None;
        }
        for node in self.stack.iter().rev() {
            if node.as_stmt_ref().is_some() {
                break;
            }
            if let AnyNodeRef::ExprCall(c) = node {
                let callee = self.callee_name(c);
                let last = callee.rsplit('.').next().unwrap_or("");
                if HANDOFFS.contains(&last) {
                    return Some(format!(
                        "the tensor is handed to another library through DLPack (`{last}`): that \
                         library decides which device memory it takes (CuPy and Numba take CUDA \
                         memory only); port the two together"
                    ));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::migrate;

    /// A tensor moved to CUDA for CuPy keeps CUDA; one moved for the model alone is ported.
    #[test]
    fn tensors_handed_over_through_dlpack_keep_their_device() {
        // `cp` is not imported here (the import commented out, as in real code): the call's
        // name is what shows the handoff.
        let src = "import torch\nfrom torch.utils.dlpack import to_dlpack\n\n\ndef torch2cupy(t):\n    return cp.fromDlpack(to_dlpack(t.cuda()))\n\n\ndef export(t):\n    return t.cuda().__dlpack__()\n\n\ndef run(model, x):\n    return model(x.cuda())\n";
        let out = migrate("DEV006", src, None).output.unwrap_or_default();
        assert!(out.contains("to_dlpack(t.cuda())"), "{out}");
        assert!(out.contains("t.cuda().__dlpack__()"), "{out}");
        assert!(
            out.contains("model(x.to(torch.accelerator.current_accelerator()))"),
            "{out}"
        );
    }
}
