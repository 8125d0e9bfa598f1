//! A requirement worded for a GPU, not for CUDA: `if not torch.cuda.is_available(): raise
//! NotImplementedError("... only work with single-device GPU modules")`. `scope.rs` keeps a CUDA
//! check without fix where its failing branch raises an error naming CUDA or a GPU: the code it
//! guards may need CUDA. Where the error names a GPU only (no CUDA, NVIDIA, cuDNN, NCCL, Triton,
//! Apex, CuPy, TensorRT, ROCm, compute capability) the requirement is an accelerator's, and a
//! TPU meets it when nothing CUDA-only is left in the program: no CUDA left in the module after
//! its safe fixes (a finding without a safe fix that names CUDA, or a CUDA name no fix
//! rewrites), no CUDA-only library imported at its top level, and no project module the
//! program imports that mentions CUDA at all. Then the check keeps its fix (portable port
//! only: `--to tpu` keeps the finding for hand porting); otherwise it keeps none, as before.

use std::sync::LazyLock;

use regex::Regex;
use ruff_text_size::{TextRange, TextSize};

use super::together;
use crate::port::rewrite::Checker;
use crate::port::rules::Target;

/// Words of an error message that name CUDA-only machinery rather than an accelerator.
static CUDA_ONLY_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)cuda|nvidia|cudnn|nccl|triton|apex|cupy|tensorrt|rocm|capabilit|\bsm_?\d")
        .unwrap()
});

/// Does the text of a `raise` name a GPU and nothing CUDA-only?
pub(in crate::port::rewrite) fn names_only_a_gpu(raise: &str) -> bool {
    raise.to_ascii_lowercase().contains("gpu") && !CUDA_ONLY_WORDS.is_match(raise)
}

pub(in crate::port::rewrite) const KEPT: &str = "not rewritten: the test's failure says CUDA is \
    required (it raises an error that names CUDA or a GPU): it guards code that needs CUDA; check \
    that code runs on a TPU before changing the test";

const KEPT_GPU: &str = "not rewritten: the test's failure says a GPU is required, and CUDA is \
    left in this program (code its safe fixes do not port, a CUDA-only library, or a project \
    module that uses CUDA): port that code, then ask `torch.accelerator.is_available()` here";

const LIFTED: &str = "the test's failure names a GPU, not CUDA, and nothing CUDA-only is left in \
    this program after the port: a TPU meets the requirement (on a CUDA machine the answer is \
    the same)";

impl Checker<'_> {
    /// Keep or lift the CUDA checks at `held` (see the module doc), once the other module
    /// passes are done.
    pub(in crate::port::rewrite) fn judge_gpu_requirements(&mut self, held: &[TextRange]) {
        if held.is_empty() {
            return;
        }
        let lift = self.target == Target::Portable && self.program_keeps_no_cuda(held);
        for d in self.diags.iter_mut().filter(|d| held.contains(&d.range)) {
            if d.fix.is_none() {
                continue;
            }
            if lift {
                d.note = Some(LIFTED.into());
            } else if self.target == Target::Portable {
                d.keep(KEPT_GPU);
            } else {
                // `--to tpu` keeps every requirement, with the note it always had.
                d.keep(KEPT);
            }
        }
    }

    /// Is nothing CUDA-only left in the program, the checks at `held` aside?
    fn program_keeps_no_cuda(&self, held: &[TextRange]) -> bool {
        let guards = self.module_guards();
        let whole = TextRange::up_to(TextSize::of(self.src));
        if together::cuda_left_in(self.src, &self.diags, &guards, whole, held).is_some() {
            return false;
        }
        if self.cuda_only_import().is_some() {
            return false;
        }
        let Some(path) = self.facts.path.as_deref() else {
            return false;
        };
        crate::port::program::imports::modules_of(path, self.src)
            .iter()
            .all(|m| {
                crate::port::texts::text(&m.file)
                    .is_some_and(|t| !t.to_ascii_lowercase().contains("cuda"))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::names_only_a_gpu;
    use crate::port::test_support::{migrate, write};

    const GUARD: &str = "import torch\n\n\ndef setup():\n    if not torch.cuda.is_available():\n        raise NotImplementedError(\"DDP device_ids only work with single-device GPU modules\")\n    return 0\n\n\nif __name__ == \"__main__\":\n    device = setup()\n    model = torch.nn.Linear(2, 2).to(device)\n";

    #[test]
    fn a_gpu_requirement_is_an_accelerators_where_no_cuda_is_left() {
        let d = tempfile::tempdir().unwrap();
        let path = write(d.path(), "train.py", GUARD);
        write(d.path(), "requirements.txt", "torch>=2.11\n");
        let out = migrate("CUD001", GUARD, Some(&path))
            .output
            .unwrap_or_default();
        assert!(
            out.contains("if not torch.accelerator.is_available():"),
            "{out}"
        );
        // The same program with a project module that still uses CUDA keeps the check.
        let with_kernel = format!("from kernels import fused\n{GUARD}");
        write(
            d.path(),
            "kernels.py",
            "import torch\n\nfused = torch.cuda.Stream()\n",
        );
        let path = write(d.path(), "train2.py", &with_kernel);
        let out = migrate("CUD001", &with_kernel, Some(&path));
        assert!(
            out.output
                .is_none_or(|o| o.contains("torch.cuda.is_available()"))
        );
        // An error naming CUDA keeps it too, whatever is left.
        let cuda = GUARD.replace("single-device GPU", "CUDA");
        let path = write(d.path(), "train3.py", &cuda);
        let out = migrate("CUD001", &cuda, Some(&path));
        assert!(
            out.output
                .is_none_or(|o| o.contains("torch.cuda.is_available()"))
        );
    }

    #[test]
    fn a_gpu_requirement_is_told_from_a_cuda_one() {
        assert!(names_only_a_gpu(
            "raise NotImplementedError(\"DDP device_ids only work with single-device GPU modules\")"
        ));
        assert!(names_only_a_gpu(
            "raise RuntimeError('This example needs a GPU')"
        ));
        for cuda in [
            "raise RuntimeError('CUDA GPU required')",
            "raise RuntimeError('needs an NVIDIA GPU')",
            "raise RuntimeError('GPU with compute capability >= 8.0 required')",
            "raise RuntimeError('Apex needs a GPU')",
            "raise RuntimeError('no GPU: Triton kernels')",
            "raise ValueError('GPU sm80 only')",
        ] {
            assert!(!names_only_a_gpu(cuda), "{cuda}");
        }
        assert!(!names_only_a_gpu("raise RuntimeError('no accelerator')"));
    }
}
