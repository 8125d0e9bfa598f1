//! Code named or worded for CUDA. Inside a function or class named for CUDA
//! (`class CUDA_Accelerator`, `def cuda(self)`, `def _check_device_cuda`,
//! `def get_torch_cuda_device_capability`) the code implements or asks about CUDA itself: a
//! library's CUDA backend, a module's own `.cuda()` method, a capability probe. A test whose
//! failure says CUDA is required (`assert x.is_cuda, "Input tensor must be CUDA"`,
//! `if d.type != "cuda": raise RuntimeError("only on CUDA")`) guards code that needs CUDA.
//! Rewriting their device strings, `.cuda()` calls or `is_cuda` tests to the TPU would make the
//! CUDA code claim the TPU. A device finding (DEV) there keeps no fix; its note says why.
//! A CUDA check (CUD) whose failing branch raises an error naming CUDA or a GPU is such a
//! requirement too. A file that declares at module level that it runs only on CUDA
//! ([`FileFacts::cuda_only`](crate::port::facts::FileFacts::cuda_only)) keeps all its DEV, CUD
//! and DST (NCCL, a "cuda" device mesh) findings without fix: its device strings feed CUDA-only kernels the call sites don't show.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use crate::port::rewrite::Checker;

/// A program's own switch for its GPU device in a test (`opt.cuda`, `args.use_gpu`,
/// `use_cuda`): the test checks that the device the user chose exists.
static DEVICE_FLAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^.\w])(?:use_cuda|use_gpu|(?:args|opt|opts|options|cfg|config|flags|hparams)\.(?:use_)?(?:cuda|gpu))\b(?:[^.(\w]|$)").unwrap()
});

impl<'a> Checker<'a> {
    /// Take the fixes off the device findings made since `diags` that sit in code named or
    /// worded for CUDA, with a note saying why.
    pub(in crate::port::rewrite) fn keep_cuda_scopes(&mut self, diags: usize) {
        for i in diags..self.diags.len() {
            if self.diags[i].fix.is_none() {
                continue;
            }
            if self.rule(self.diags[i].rule).id.starts_with("CUD") {
                if let Some(kw) = self.gpu_switch(self.diags[i].range) {
                    self.diags[i].keep(format!(
                        "not rewritten: the answer is passed as `{kw}=`, a library's own GPU \
                         switch (faiss, a CUDA-only backend), not this program's device choice; \
                         leave it, or pass False on a TPU"
                    ));
                    continue;
                }
                if self.triton_paired(self.diags[i].range) {
                    self.diags[i].keep(super::triton_guard::NOTE);
                    continue;
                }
                if let Some(raise) = self.cuda_raise(self.diags[i].range) {
                    if super::requirement::names_only_a_gpu(raise) {
                        // Judged with the whole program at the end (requirement.rs).
                        self.gpu_requirements.push(self.diags[i].range);
                    } else {
                        self.diags[i].keep(super::requirement::KEPT);
                    }
                }
                continue;
            }
            if !self.rule(self.diags[i].rule).id.starts_with("DEV") {
                continue;
            }
            let note = match self.cuda_scope() {
                Some(scope) => format!(
                    "not rewritten: inside `{scope}`, which is named for CUDA: code that \
                     implements or asks about CUDA itself (a CUDA backend, a `.cuda()` method, a \
                     CUDA capability check) must keep naming CUDA; give the TPU its own code path \
                     by hand if it needs one"
                ),
                None => match (
                    self.cuda_requirement(self.diags[i].range),
                    self.cuda_target(),
                ) {
                    (Some(()), _) => "not rewritten: the test's failure says CUDA is required (an \
                                 assertion or raise that names CUDA): it guards code that needs \
                                 CUDA; check that code runs on a TPU before changing the test"
                        .to_string(),
                    (None, Some(target)) => format!(
                        "not rewritten: the value is assigned to `{target}`, a name that says \
                         CUDA: the code that reads it means CUDA (a `torch.cuda` stream, a CUDA \
                         kernel); port that code and the name together"
                    ),
                    (None, None) => continue,
                },
            };
            self.diags[i].keep(note);
        }
    }

    /// In a file that declares at module level that it runs only on CUDA, take the fixes off the
    /// device (DEV) and CUDA (CUD) findings made since `diags`/`fallbacks`: its device strings
    /// and CUDA checks feed CUDA-only kernels the call sites do not show. The declaration itself
    /// is the guard and is left alone too.
    pub(in crate::port::rewrite) fn keep_cuda_only_file(&mut self, diags: usize, fallbacks: usize) {
        let Some((guard, text)) = &self.facts.cuda_only else {
            return;
        };
        let rules = self.rules;
        let note = |r: TextRange| {
            if guard.contains_range(r) {
                format!(
                    "not rewritten: this is the file's module-level CUDA requirement (`{text}`): \
                     it guards tests of CUDA-only code; port that code before changing it"
                )
            } else {
                format!(
                    "not rewritten: this file runs only on CUDA (module-level `{text}`); port its \
                     CUDA-only kernels first"
                )
            }
        };
        let fix_off = |d: &mut crate::port::diagnostic::Diagnostic| {
            let family = rules.rules[d.rule].family.as_str();
            if d.fix.is_some() && matches!(family, "DEV" | "CUD" | "DST") {
                d.keep(note(d.range));
            }
        };
        self.diags[diags..].iter_mut().for_each(fix_off);
        self.fallbacks[fallbacks..].iter_mut().for_each(fix_off);
    }

    /// The keyword the current expression is the value of, when it names a GPU or CUDA switch
    /// (`faiss.Kmeans(..., gpu=torch.cuda.is_available())`, `use_gpu=`).
    fn gpu_switch(&self, range: TextRange) -> Option<&'a str> {
        for n in self.stack.iter().rev() {
            match n {
                AnyNodeRef::Keyword(k) => {
                    let arg = k.arg.as_ref()?.as_str();
                    let lower = arg.to_ascii_lowercase();
                    return (lower.contains("gpu") || lower.contains("cuda")).then_some(arg);
                }
                n if n.as_stmt_ref().is_some() => return None,
                // The finding's own call (`torch.cuda.is_available()`), else another call.
                AnyNodeRef::ExprCall(c) if !c.func.range().contains_range(range) => return None,
                _ => {}
            }
        }
        None
    }

    /// The target of the innermost statement when it is an assignment to a name that says CUDA
    /// (`self.is_cuda = device.type == "cuda" and ...`).
    fn cuda_target(&self) -> Option<&'a str> {
        let stmt = self.stack.iter().rev().find_map(|n| n.as_stmt_ref())?;
        let ruff_python_ast::StmtRef::Assign(a) = stmt else {
            return None;
        };
        let t = a.targets.iter().find(|t| target_says_cuda(t))?;
        Some(self.text(t.range()))
    }

    /// The innermost enclosing function or class whose name mentions CUDA.
    pub(in crate::port::rewrite) fn cuda_scope(&self) -> Option<&'a str> {
        self.stack.iter().rev().find_map(|n| {
            let name = match n {
                AnyNodeRef::StmtFunctionDef(f) => f.name.as_str(),
                AnyNodeRef::StmtClassDef(c) => c.name.as_str(),
                _ => return None,
            };
            says_cuda(name).then_some(name)
        })
    }

    /// Is the finding at `range` (a CUDA check) in the test of an `if` whose body starts by
    /// raising an error that names CUDA or a GPU? Not when the test asks about the user's own
    /// device choice (`if args.device == "cuda" and not torch.cuda.is_available(): raise ...`,
    /// `if opt.cuda and not torch.cuda.is_available(): raise ...`): that check follows the device
    /// the port moves to the TPU.
    fn cuda_raise(&self, range: TextRange) -> Option<&'a str> {
        let Some(ruff_python_ast::StmtRef::If(i)) =
            self.stack.iter().rev().find_map(|n| n.as_stmt_ref())
        else {
            return None;
        };
        let test = self.text(i.test.range());
        if !i.test.range().contains_range(range)
            || test.contains("device")
            || test.contains("\"cuda\"")
            || test.contains("'cuda'")
            || DEVICE_FLAG.is_match(test)
        {
            return None;
        }
        let Some(Stmt::Raise(r)) = i.body.first() else {
            return None;
        };
        let t = self.text(r.range);
        let lower = t.to_ascii_lowercase();
        (lower.contains("cuda") || lower.contains("gpu")).then_some(t)
    }

    /// Is the finding at `range` in the test of an `assert` whose message names CUDA, or of an
    /// `if` whose body starts by raising an error that names CUDA (not an availability check)?
    fn cuda_requirement(&self, range: TextRange) -> Option<()> {
        let names_cuda = |r: TextRange| self.text(r).to_ascii_lowercase().contains("cuda");
        let stmt = self.stack.iter().rev().find_map(|n| n.as_stmt_ref())?;
        // `if args.device == "cuda" and not torch.cuda.is_available(): raise ...`: an
        // availability check, whose test migrates as a whole (CUD001), not a requirement.
        let availability = |r: TextRange| self.text(r).contains("is_available");
        let hit = match stmt {
            ruff_python_ast::StmtRef::Assert(a) => {
                a.test.range().contains_range(range)
                    && !availability(a.test.range())
                    && a.msg.as_ref().is_some_and(|m| names_cuda(m.range()))
            }
            ruff_python_ast::StmtRef::If(i) => {
                i.test.range().contains_range(range)
                    && !availability(i.test.range())
                    && matches!(i.body.first(), Some(Stmt::Raise(r)) if names_cuda(r.range))
            }
            _ => false,
        };
        hit.then_some(())
    }
}

/// In a module that imports Triton (or another CUDA-only library or PyTorch name)
/// unconditionally at top level (an autotuner, a kernel library, an FA3 test), itself or
/// through a module of its project (`via`), a device (or a stream or event) is most likely
/// CUDA-only code's: its DEV and STM fixes become unsafe, with a note.
pub(in crate::port::rewrite) fn keep_triton_module_devices(
    rules: &crate::port::rules::RuleSet,
    via: &str,
    diags: &mut [crate::port::diagnostic::Diagnostic],
) {
    keep_module_devices(
        rules,
        &format!(
            "unsafe: this module imports {via} at top level, so its devices most likely feed \
             CUDA-only code (kernels, libraries); check that this one is the program's"
        ),
        diags,
    );
}

/// Make the DEV and STM fixes of a module whose devices most likely feed CUDA-only code
/// unsafe, with `note` saying why.
pub(in crate::port::rewrite) fn keep_module_devices(
    rules: &crate::port::rules::RuleSet,
    note: &str,
    diags: &mut [crate::port::diagnostic::Diagnostic],
) {
    for d in diags
        .iter_mut()
        .filter(|d| matches!(rules.rules[d.rule].family.as_str(), "DEV" | "STM"))
    {
        d.make_unsafe(note);
    }
}

/// Is an assignment target a name that says CUDA (`cuda_available`, `self.is_cuda`)?
pub(in crate::port::rewrite) fn target_says_cuda(t: &Expr) -> bool {
    match t {
        Expr::Name(n) => says_cuda(n.id.as_str()),
        Expr::Attribute(a) => says_cuda(a.attr.as_str()),
        Expr::Tuple(t) => t.elts.iter().any(target_says_cuda),
        _ => false,
    }
}

/// Does a name (of a function, class or variable) mention CUDA?
pub(in crate::port::rewrite) fn says_cuda(name: &str) -> bool {
    name.to_ascii_lowercase().contains("cuda")
}

#[cfg(test)]
mod tests {
    use crate::port::rewrite::migrated as migrate;

    /// The DEV rules' `unsafe_if_uses`: in a file that uses a CUDA-only library, a device string
    /// may be what sends tensors into it, so its fix is unsafe.
    #[test]
    fn device_fixes_are_unsafe_in_files_using_cuda_only_libraries() {
        let src = "import bitsandbytes as bnb\nimport torch\n\nx = torch.zeros(3).to(\"cuda\")\ny = bnb.functional.quantize_4bit(x)\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains(".to(\"tpu\")"));
        let plain = "import torch\n\nx = torch.zeros(3).to(\"cuda\")\n";
        assert!(migrate(plain, false).contains(".to(\"tpu\")"));
    }

    #[test]
    fn code_named_for_cuda_keeps_its_device() {
        let src = "import torch\n\n\nclass CUDABackend:\n    def device(self, i):\n        return torch.device(\"cuda\", i)\n";
        assert_eq!(migrate(src, true), src);
    }

    /// A file that declares at module level that it runs only on CUDA keeps its device strings
    /// and CUDA checks, the declaration included.
    #[test]
    fn files_that_run_only_on_cuda_keep_their_devices() {
        for head in [
            "triton = pytest.importorskip(\"triton\")\n",
            "if not torch.cuda.is_available():\n    pytest.skip(\"CUDA required\", allow_module_level=True)\n",
            "pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason=\"needs CUDA\")\n",
            "if True:\n    if not (torch.cuda.is_available() and HAS):\n        raise unittest.SkipTest(\"no CUDA\")\n",
        ] {
            let src = format!(
                "import pytest\nimport unittest\nimport torch\n{head}\n\ndef test_k():\n    x = torch.zeros(3, device=\"cuda\")\n    if torch.cuda.is_available():\n        pass\n"
            );
            assert_eq!(migrate(&src, true), src, "{head}");
        }
        let plain = "import pytest\nimport torch\n\n\ndef test_k():\n    x = torch.zeros(3, device=\"cuda\")\n";
        assert!(migrate(plain, false).contains("device=\"tpu\""));
    }

    /// A CUDA check whose failure raises an error naming CUDA or a GPU keeps its fix off; a
    /// check of the user's own device choice is rewritten.
    #[test]
    fn cuda_checks_that_raise_a_cuda_requirement_are_kept() {
        let src = "import torch\n\n\ndef validate():\n    if not torch.cuda.is_available():\n        raise RuntimeError(\"Quantization requires a GPU\")\n";
        assert_eq!(migrate(src, true), src);
        let user = "import torch\n\n\ndef main(args):\n    if args.device == \"cuda\" and not torch.cuda.is_available():\n        raise RuntimeError(\"CUDA not available\")\n\n\nif __name__ == \"__main__\":\n    main(None)\n";
        assert_ne!(migrate(user, false), user);
    }

    #[test]
    fn devices_in_modules_that_import_triton_are_unsafe() {
        let src = "import torch\nimport triton\n\nbuf = torch.empty(256, device=\"cuda\")\n";
        assert_eq!(migrate(src, false), src);
        assert!(migrate(src, true).contains("device=\"tpu\""));
        let optional = src.replace(
            "import triton\n",
            "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
        );
        assert!(migrate(&optional, false).contains("device=\"tpu\""));
        // The portable port reads it too: an optional Triton import is taken wherever Triton
        // is installed (beside every CUDA build of PyTorch), unless the module asks for a CUDA
        // tensor before its kernels.
        let portable = |src: &str| crate::port::test_support::ported(src);
        assert_eq!(portable(&optional), optional);
        let tested =
            format!("{optional}\n\ndef add(x):\n    return x.is_cuda and triton is not None\n");
        assert!(portable(&tested).contains("torch.accelerator"));
        // Other CUDA-only libraries and PyTorch names imported at top level count too; a
        // project's helper named for CUDA does not.
        let flash = src.replace("import triton\n", "import flash_attn\n");
        assert_eq!(migrate(&flash, false), flash);
        let fa3 = format!(
            "{}\n\ndef test_fa3():\n    pass\n",
            src.replace(
                "import triton\n",
                "from torch.nn.attention import activate_flash_attention_impl\n"
            )
        );
        assert_eq!(migrate(&fa3, false), fa3);
        let extension = src.replace(
            "import triton\n",
            "from torch.utils.cpp_extension import load\n",
        );
        assert!(migrate(&extension, false).contains("device=\"tpu\""));
        let helper = src.replace(
            "import triton\n",
            "from pkg.testing import skip_if_no_cuda\n",
        );
        assert!(migrate(&helper, false).contains("device=\"tpu\""));
    }

    /// A module that loads a FlashAttention model keeps its devices (unsafe, with the reason).
    #[test]
    fn devices_beside_a_flash_attention_model_are_unsafe() {
        let src = "import torch\nfrom transformers import AutoModel\n\n\nclass Scorer:\n    def __init__(self, device=\"cuda\"):\n        self.model = AutoModel.from_pretrained(\"m\", attn_implementation=\"flash_attention_2\").to(device)\n";
        let out = crate::port::test_support::migrate_all(src);
        assert!(out.output.is_none(), "{:?}", out.output);
        assert!(
            out.diagnostics.iter().any(|d| d
                .note
                .as_deref()
                .is_some_and(|n| n.contains("FlashAttention kernels"))),
            "{:?}",
            out.diagnostics
        );
    }

    /// So does a module whose model runs on other kernels a TPU lacks: xFormers through
    /// diffusers, bitsandbytes through transformers, torchvision's detection ops. The device
    /// of a module with only a safe box helper (`box_iou`, PyTorch ops) is ported.
    #[test]
    fn devices_beside_other_tpu_less_models_are_unsafe() {
        let cases = [
            (
                "from diffusers import UNet2DModel
",
                "UNet2DModel()",
                "\nnet.enable_xformers_memory_efficient_attention()",
                "xFormers",
            ),
            (
                "from transformers import AutoModel
",
                "AutoModel.from_pretrained(\"m\", load_in_4bit=True)",
                "",
                "bitsandbytes",
            ),
            (
                "from torchvision.models.detection import fasterrcnn_resnet50_fpn
",
                "fasterrcnn_resnet50_fpn()",
                "",
                "torchvision",
            ),
            (
                "from torchvision.ops import nms
",
                "Net()",
                "\nkeep = nms(b, s, 0.5)",
                "torchvision",
            ),
        ];
        for (import, build, after, why) in cases {
            let src = format!(
                "import torch\n{import}\ndevice = torch.device(\"cuda\")\nnet = {build}.to(device){after}\n"
            );
            let out = crate::port::test_support::migrate_all(&src);
            assert!(out.output.is_none(), "{src}\n{:?}", out.output);
            assert!(
                out.diagnostics
                    .iter()
                    .any(|d| d.note.as_deref().is_some_and(|n| n.contains(why))),
                "{src}\n{:?}",
                out.diagnostics
            );
        }
        let plain = "import torch\nfrom torchvision.ops import box_iou\n\ndevice = torch.device(\"cuda\")\niou = box_iou(a, b).to(device)\n";
        let out = crate::port::test_support::migrate_all(plain);
        assert!(
            out.output
                .as_deref()
                .is_some_and(|o| o.contains("current_accelerator()")),
            "{:?}",
            out.output
        );
    }
}
