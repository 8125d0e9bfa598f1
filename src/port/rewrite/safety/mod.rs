//! The safety stage: is a fix *safe* (applied by default), *unsafe* (applied with
//! `--unsafe-fixes`, with the reason as the finding's note), or kept off? A safe fix leaves the
//! program doing exactly what it did on the machine it was written for and makes it right on a
//! TPU; where that cannot be shown from the program, the fix is unsafe and says why.
//!
//! Every judgement about a fix's safety lives under this folder. The rest of `rewrite/` finds
//! matches and builds edits; it asks this stage three questions, in this order:
//!
//! 1. [`Checker::unsafe_reason`], while the fix is built (`fix.rs`'s `make_fix`): does the place
//!    make it unsafe? A reason the rewrite itself found (an argument evaluated twice, a value
//!    the conversion cannot see), a comment the edit would delete, the code's context
//!    (`named.rs`: code about CUDA itself; `scope.rs`: code named for CUDA), a probe in a `try`
//!    (`probe.rs`), a class implementing an XLA backend;
//! 2. [`Checker::judge_in_context`], once the finding exists: what the program around it says.
//!    A dropped keyword whose value is not written here, and a fix that is right only after a
//!    call the program makes first on every path (`group.rs`: a barrier's process group);
//!    at the end of the module passes, a rewrite that is right only with the file's
//!    PyTorch/XLA device ported too (`safe_if_ported`, also `group.rs`);
//! 3. [`Checker::finalize`], last: fixes touching a syntax error are dropped, an unsafe fix's
//!    reason becomes the note, and under `--to portable` a fix that only replaces CUDA is unsafe.
//!
//! Passes that keep fixes off or downgrade them for the whole module run at the end of the walk
//! (`mod.rs`'s `finish`): `guard.rs` (tests that guard CUDA-only code keep their meaning;
//! `cuda_only.rs` says what is CUDA-only), `together/` (a CUDA test and the code it selects are
//! ported together or not at all), `foreign.rs` (device-like strings that are not this program's
//! devices), `library.rs` (CUDA settings, backend comparisons and CUDA checks in library
//! modules), `runtimes.rs` (devices of modules that drive ONNX Runtime, ExecuTorch and the
//! like), `lightning.rs` (CUDA tests that choose a Lightning accelerator),
//! `params.rs` (test parameters fed by values computed elsewhere), `comments.rs` (code a
//! comment ties to CUDA or NCCL) and `own.rs` (attributes the program defines itself, such as a
//! class's own `self.is_cuda`, are not PyTorch's), `torch_pin.rs` (forms newer than the torch a
//! project supports) with `old_torch.rs` (forms that keep a torch before 2.6 beside the portable
//! one). Whole programs (an entry script and the
//! modules it imports) are judged after every file: `crate::port::program`.

pub(in crate::port::rewrite) mod callers;
pub(in crate::port::rewrite) mod comments;
pub(in crate::port::rewrite) mod cuda_methods;
pub(in crate::port::rewrite) mod cuda_only;
mod device_count_uses;
pub(in crate::port::rewrite) mod device_index;
pub(in crate::port::rewrite) mod device_libraries;
pub(in crate::port::rewrite) mod fallback;
pub(in crate::port::rewrite) mod foreign;
pub(in crate::port::rewrite) mod group;
pub(in crate::port::rewrite) mod guard;
pub(in crate::port::rewrite) mod handoff;
pub(in crate::port::rewrite) mod library;
pub(in crate::port::rewrite) mod lightning;
pub(in crate::port::rewrite) mod local_torch;
pub(in crate::port::rewrite) mod named;
pub(in crate::port::rewrite) mod no_accelerator;
mod old_torch;
mod other_accelerators;
pub(in crate::port::rewrite) mod own;
pub(in crate::port::rewrite) mod params;
pub(in crate::port::rewrite) mod probe;
pub(in crate::port::rewrite) mod requirement;
pub(in crate::port::rewrite) mod runtimes;
pub(in crate::port::rewrite) mod scope;
pub(in crate::port::rewrite) mod together;
mod torch_pin;
pub(in crate::port::rewrite) mod triton_guard;

/// Forget what the safety passes learnt about other files (the start of a run: `--watch` runs
/// again over files that may have changed): the libraries a module reaches, the torch pins of
/// folders, the packages that select MPS or XPU.
pub fn forget() {
    device_libraries::forget();
    torch_pin::forget();
}

use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

use super::{Checker, Match};
use crate::port::diagnostic::Diagnostic;
use crate::port::edit::Edit;
use crate::port::rules::{Action, FixClass, Portable, REPLACES_CUDA, RemoveKind, Rule, Target};

/// Manual rules whose finding says the module's model runs on kernels a TPU lacks, and what
/// it does (the note of its device fixes, made unsafe).
const MODEL_KERNELS: &[(&str, &str)] = &[
    (
        "flash-attention-implementation",
        "loads a model with FlashAttention kernels",
    ),
    (
        "xformers-attention-method",
        "switches a model to xFormers' attention kernels",
    ),
    ("load-quantized", "quantizes a model with bitsandbytes"),
    ("bitsandbytes-quantization", "quantizes with bitsandbytes"),
    (
        "compiled-detection-op",
        "runs compiled detection operators (torchvision's nms, roi_align)",
    ),
];

impl<'a> Checker<'a> {
    /// Question 1: why the place makes a fix of a safe rule unsafe, if it does. `downgrade` is
    /// a reason the rewrite found itself.
    pub(in crate::port::rewrite) fn unsafe_reason(
        &self,
        rule: &Rule,
        edits: &[Edit],
        downgrade: Option<String>,
    ) -> Option<String> {
        let loses_comment = || {
            edits
                .iter()
                .any(|e| self.parsed.has_comment_in(e.range))
                .then(|| "the edit would delete a comment: keep what it says by hand".to_string())
        };
        downgrade
            .or_else(loses_comment)
            .or_else(|| self.unsafe_by_context(rule))
            .or_else(|| self.handed_over(rule))
            .or_else(|| {
                self.is_probe_in_try().then(|| {
                    "a call inside `try` whose only job is to see whether it raises: the rewritten call may not raise where the original did".to_string()
                })
            })
            .or_else(|| {
                self.in_cuda_named_code(rule).then(|| {
                    "in code about CUDA itself (named for CUDA, or reading the CUDA toolkit or hardware): check it is not asking about CUDA on purpose".to_string()
                })
            })
            .or_else(|| {
                self.in_xla_backend_class(rule).then(|| {
                    "in a class implementing an XLA backend or accelerator: giving it TorchTPU is that framework's port".to_string()
                })
            })
    }

    /// Question 2: what the program around a safe fix says about it.
    pub(in crate::port::rewrite) fn judge_in_context(
        &self,
        rule: &Rule,
        m: &Match<'a>,
        d: &mut Diagnostic,
    ) {
        let safe = |d: &Diagnostic| {
            d.fix
                .as_ref()
                .is_some_and(|f| f.applicability == FixClass::Safe)
        };
        // A fix that drops a keyword must see its value: `mode=args.mode` may be what the
        // program asks for on every machine (or None, which would make the removal harmless).
        if let (Some(Action::Remove(RemoveKind::Keyword)), Some(kw)) =
            (&self.v(rule).action, m.keyword)
            && safe(d)
            && !is_literal(&kw.value)
        {
            let name = kw.arg.as_ref().map(|a| a.as_str()).unwrap_or("**");
            d.make_unsafe(&format!(
                "not proven safe: the fix drops `{name}=`, whose value `{}` is not written here: it may be None (nothing lost) or what the program asks for on every machine; check it, then apply with --unsafe-fixes",
                self.text(kw.value.range())
            ));
        }
        // `safe_after`: the fix is right only after a call the program makes first (group.rs).
        if !rule.safe_after.is_empty()
            && safe(d)
            && let Some(why) = self.not_after(rule, m.range.start())
        {
            d.make_unsafe(&why);
        }
        // `.cuda()` where the file's own class (not a module) defines `cuda()` and no `.to()`.
        if rule.name == "tensor-cuda"
            && safe(d)
            && let Some(receiver) = m.receiver
            && let Some(class) = self.own_cuda_method(receiver)
        {
            d.make_unsafe(&format!(
                "not proven safe: this is an object of class `{class}` of this file, which defines \
                 its own cuda() and no to(): `.to(...)` would raise AttributeError"
            ));
        }
        // `.cuda()` on an object of a program class with its own `cuda()` that `.to()` skips.
        if matches!(rule.name.as_str(), "tensor-cuda" | "module-cuda")
            && safe(d)
            && let Some(receiver) = m.receiver
            && let Some(why) = self.program_cuda_method(&rule.name, receiver)
        {
            d.make_unsafe(&why);
        }
        // Allocator calls that do nothing without CUDA stay quiet without an accelerator.
        if self.target == Target::Portable {
            self.keep_quiet_without_accelerator(rule, m, d);
            // A variable device index is set only where the accelerator is not a TPU.
            self.set_device_index_off_the_tpu(rule, m, d);
            // A device count compared with ranks counts one device per process on a TPU.
            self.device_count_against_ranks(rule, m, d);
        }
    }

    /// The passes over the whole module, once the walk has found every match: each keeps
    /// fixes off (or makes them unsafe) where the module shows they would change what the
    /// program does on its own machine. What makes single fixes unsafe runs first, so that
    /// `together` carries it to the test or the code that goes with them.
    pub(in crate::port::rewrite) fn module_passes(&mut self) {
        // Every pass judges the findings there are (none adds one): a module with none (most
        // of a library's modules that the prefilter let through) needs none of them.
        if self.diags.is_empty() {
            return;
        }
        // A comparison extended to the TPU is kept CUDA's where the code it selects is not
        // right on a TPU.
        let mut diags = std::mem::take(&mut self.diags);
        self.keep_unported_extensions(&mut diags);
        self.diags = diags;
        // A fallback from a requested CUDA device is right as written (fallback.rs).
        if self.target == Target::Portable {
            let fallbacks = self.cuda_request_fallbacks();
            if !fallbacks.is_empty() {
                let rules = self.rules;
                self.diags.retain(|d| {
                    !matches!(rules.rules[d.rule].family.as_str(), "CUD" | "DEV")
                        || !fallbacks.iter().any(|f| f.contains_range(d.range))
                });
            }
        }
        if let Some(via) = self.triton_import() {
            scope::keep_triton_module_devices(self.rules, &via, &mut self.diags);
        }
        // A module that loads or runs a model on kernels a TPU lacks (FlashAttention through
        // transformers, xFormers through diffusers, bitsandbytes, torchvision's detection ops):
        // its devices most likely feed that model (set G's scorer).
        if self.target == Target::Portable
            && let Some(why) = self.diags.iter().find_map(|d| {
                // `load_in_8bit=False` asks for no quantization.
                if self.src[d.range].replace(' ', "").ends_with("=False") {
                    return None;
                }
                MODEL_KERNELS
                    .iter()
                    .find(|(name, _)| self.rule(d.rule).name == *name)
                    .map(|(_, why)| format!("{why} ({})", self.rule(d.rule).id))
            })
        {
            scope::keep_module_devices(
                self.rules,
                &format!(
                    "unsafe: this module {why}, which a TPU cannot run, so its devices most \
                     likely feed that model"
                ),
                &mut self.diags,
            );
        }
        if !self.facts.program {
            let path = self.facts.path.as_deref();
            library::keep_library_settings(
                self.rules,
                path,
                &self.parsed.module.body,
                &mut self.diags,
                self.target,
            );
        }
        runtimes::keep_runtime_devices(self.src, self.rules, &mut self.diags);
        local_torch::keep_before_local_torch(&self.parsed.module, &mut self.diags);
        local_torch::keep_optional_torch(
            &self.parsed.module,
            self.facts.path.as_deref(),
            self.src,
            &mut self.diags,
        );
        // The portable port keeps the original machine: its torch too.
        if self.target == Target::Portable {
            // The module's expressions, walked once for both where either needs them.
            let exprs = std::cell::OnceCell::new();
            old_torch::drop_old_branch_findings(
                self.src,
                &self.parsed.module.body,
                &exprs,
                &mut self.diags,
            );
            torch_pin::keep_within_pinned_torch(
                self.facts.path.as_deref(),
                self.facts.min_torch,
                self.src,
                &self.parsed.module.body,
                &exprs,
                &mut self.diags,
            );
            other_accelerators::keep_other_accelerators(
                self.facts.path.as_deref(),
                self.src,
                &mut self.diags,
            );
        }
        if self.target == Target::Portable {
            device_libraries::keep_library_devices(
                self.facts.path.as_deref(),
                self.src,
                self.rules,
                &mut self.diags,
            );
        }
        lightning::keep_lightning_choices(
            self.sem,
            self.rules,
            &self.parsed.module.body,
            &mut self.diags,
        );
        params::keep_fed_comparisons(
            self.src,
            self.rules,
            &self.parsed.module.body,
            &mut self.diags,
        );
        comments::keep_commented(self.src, self.rules, &mut self.diags);
        // A device handed to safetensors stays one it knows (LIB015 ports the load itself).
        if self.target == Target::Portable {
            let args = self.safetensors_device_arguments();
            for d in self.diags.iter_mut().filter(|d| {
                args.iter().any(|a| a.contains_range(d.range))
                    && matches!(self.rules.rules[d.rule].family.as_str(), "DEV" | "CUD")
            }) {
                d.make_unsafe(
                    "not proven safe: this device goes to safetensors, which knows no \"tpu\" \
                     device: load onto the CPU on a TPU and move the tensors (LIB015)",
                );
            }
        }
        let ported = |d: &Diagnostic| {
            d.fix.is_some() && together::FAMILIES.contains(&self.rule(d.rule).family.as_str())
        };
        if self.diags.iter().any(ported) {
            let guards = self.module_guards();
            let portable = self.target == Target::Portable;
            let path = self.facts.path.as_deref();
            let old_torch = || torch_pin::old_torch_note(path, self.src, self.facts.min_torch);
            let done = together::keep_together(
                self.src,
                self.rules,
                &guards,
                &mut self.diags,
                portable,
                &old_torch,
            );
            self.diags
                .retain(|d| d.fix.is_some() || !done.contains(&d.range));
        }
        // A step or sync rewrite goes with the file's PyTorch/XLA device (group.rs).
        let mut diags = std::mem::take(&mut self.diags);
        group::keep_unported_devices(
            self.src,
            self.sem,
            self.rules,
            &self.parsed.module.body,
            &mut diags,
            &|d| self.suppressed(d),
        );
        self.diags = diags;
        let held = std::mem::take(&mut self.gpu_requirements);
        self.judge_gpu_requirements(&held);
    }

    /// The module's guards and CUDA names (`together`), a flag imported from a project module
    /// counting where it still asks about CUDA there.
    pub(in crate::port::rewrite) fn module_guards(&self) -> together::Guards {
        let path = self.facts.path.as_deref();
        let imported_flag = |i: &ast::StmtImportFrom, name: &str| {
            path.is_some_and(|p| crate::port::neighbours::imported_cuda_flag(p, i, name))
        };
        let mut g =
            together::Guards::of(&self.parsed.module.body, self.cuda_defs(), &imported_flag);
        g.ask_once = self.target == Target::Portable && self.facts.program;
        g
    }

    /// Question 3, last: drop fixes that touch a region with a syntax error; an unsafe fix keeps its reason as
    /// the finding's note; under `--to portable`, a fix that only replaces CUDA is unsafe.
    pub(in crate::port::rewrite) fn finalize(&self, mut d: Diagnostic) -> Diagnostic {
        if let Some(fix) = &d.fix
            && fix
                .edits
                .iter()
                .any(|e| self.parsed.in_broken_region(e.range))
        {
            d.fix = None;
            d.note = Some("inside a region with a syntax error: fix the syntax error first".into());
        }
        if let Some(fix) = d.fix.as_mut() {
            let why = fix.why_unsafe.take();
            if fix.applicability == FixClass::Unsafe && d.note.is_none() {
                d.note = why;
            }
        }
        let rule = self.rule(d.rule);
        if self.target == Target::Portable && matches!(rule.portable, Portable::Replaces) {
            d.make_unsafe(REPLACES_CUDA);
        }
        d
    }
}

/// A value written as a literal (a string, f-string, number, `True`/`False`, `None`): what a
/// dropped argument was is visible in the source.
fn is_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::StringLiteral(_)
            | Expr::BytesLiteral(_)
            | Expr::FString(_)
            | Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::EllipsisLiteral(_)
    )
}
