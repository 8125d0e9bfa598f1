//! What is CUDA-only: `torch.cuda` machinery without a TPU counterpart, libraries that run on
//! NVIDIA GPUs only, compiled extensions, non-portable `torch.ops` namespaces, and the ATen ops
//! TorchTPU 0.2.0 does not implement. `guard.rs` and `together.rs` ask it about names.

use std::collections::HashMap;
use std::sync::LazyLock;

use ruff_python_ast::{self as ast, Expr, Stmt};

use crate::port::semantic::Semantic;

/// `torch.cuda.*` names that are CUDA-only machinery (no TPU counterpart a guard could select).
/// Streams and events are not: the STM rules map them to `torch.Stream`/`torch.Event`.
const CUDA_ONLY_TORCH: &[&str] = &[
    "CUDAGraph",
    "graph",
    "graphs",
    "make_graphed_callables",
    "cudart",
    "jiterator",
    "nvtx",
    "nccl",
    "comm",
    "tunable",
    "ExternalStream",
    "_sleep",
];

/// `torch.cuda.*` / `torch.cuda.memory.*` memory-history tools with no TorchTPU counterpart
/// (mapping.md, MEM013).
const CUDA_ONLY_MEMORY: &[&str] = &[
    "_record_memory_history",
    "_dump_snapshot",
    "_snapshot",
    "memory_snapshot",
];

/// Libraries whose code runs on NVIDIA GPUs only.
pub(in crate::port::rewrite) const CUDA_ONLY_ROOTS: &[&str] = &[
    "triton",
    "helion",
    "flash_attn",
    "flash_attn_2_cuda",
    "xformers",
    "apex",
    "amp_C",
    "mamba_ssm",
    "causal_conv1d",
    "deep_gemm",
    "flashinfer",
    "cupy",
    "pycuda",
    "cutlass",
    "transformer_engine",
    "sgl_kernel",
    "bitsandbytes",
    "nvfuser",
    "liger_kernel",
    "numba.cuda",
    "torch_tensorrt",
    "tensorrt",
    "gemlite",
    "mslk",
    "fbgemm_gpu",
    "lpmm",
    "flash_attn_interface",
    "flash_mla",
    // vLLM's engine and layers (its CUDA and Triton kernels); DeepSpeed's compiled ops;
    // MoE and attention kernel libraries built on CUDA or Triton.
    "vllm",
    // SGLang's engine and its serializers (CUDA IPC handles for GPU tensors: set G).
    "sglang",
    "deepspeed.ops",
    "deep_ep",
    "megablocks",
    "grouped_gemm",
    "tilelang",
    "quack",
    // SageMaker's model and data parallel libraries (NVIDIA instances only).
    "smdistributed",
    // Libraries of compiled CUDA kernels (some with CPU ones too) and no TPU kernel: sparse
    // and point-cloud convolutions, neural-graphics renderers and encoders, mmcv's ops.
    "spconv",
    "torchsparse",
    "MinkowskiEngine",
    "pointnet2_ops",
    "knn_cuda",
    "tinycudann",
    "nerfacc",
    "gsplat",
    "diff_gaussian_rasterization",
    "simple_knn",
    "nvdiffrast",
    "mmcv.ops",
    "torch_scatter",
    "torch_sparse",
    "torch_cluster",
    // Banded and semiring matrix kernels in CUDA (torch-struct's); a profiler of CUDA memory.
    "genbmm",
    "pytorch_memlab",
    // NVIDIA's cuda-python (`import cuda.bindings.driver as cuda`).
    "cuda.bindings",
    "cuda.core",
    "cuda.cuda",
    "cuda.cudart",
    "cuda.nvrtc",
];

/// `torch._inductor.*` entry points that compile with Inductor.
const INDUCTOR_COMPILES: &[&str] = &[
    "compile",
    "standalone_compile",
    "aot_compile",
    "aoti_compile_and_package",
    "compile_fx",
];

/// `torch.ops` namespaces that are PyTorch's own (portable) operators.
const PORTABLE_OPS: &[&str] = &[
    "aten",
    "prims",
    "higher_order",
    "_c10d_functional",
    "c10d_functional",
    "c10d",
    "profiler",
    "quantized",
    "_quantized",
    "tpu",
];

/// ATen operators with a CUDA kernel that TorchTPU 0.2.0 does not run (derived from the
/// operator table by `scripts/tpu-missing-ops`): a TPU tensor sent to one fails.
static TPU_MISSING_OPS: LazyLock<std::collections::HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../../../data/tpu_missing_ops.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
});

/// What makes this qualified name (or module path) CUDA-only, if it is.
pub(in crate::port::rewrite) fn cuda_only_name(q: &str) -> Option<String> {
    let q = q.trim_start_matches('.');
    let segs: Vec<&str> = q.split('.').collect();
    // PyTorch/XLA's C extension works on torch_xla's lazy tensors only: a TPU tensor sent there
    // fails (`torch_xla._XLAC._xla_get_tensor_id(t)` under `t.device.type == "xla"`).
    // Its private `_internal` modules (TPU environment, PJRT plumbing) have no TorchTPU
    // counterpart either.
    let private = ["torch_xla._XLAC", "torch_xla._internal"];
    // `q` is `root` or under it (no string built: this runs for every qualified name).
    let under = |root: &str| {
        q.strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    if private.iter().any(|p| under(p)) {
        return Some(format!("`{q}`"));
    }
    if let Some(rest) = q.strip_prefix("torch.") {
        let cuda_only = match segs.get(1).copied() {
            Some("cuda") => {
                segs.get(2).is_some_and(|s| CUDA_ONLY_TORCH.contains(s))
                    || segs[2..].iter().any(|s| CUDA_ONLY_MEMORY.contains(s))
            }
            Some("ops") => {
                segs.get(2).is_some_and(|ns| !PORTABLE_OPS.contains(ns))
                    || (segs.get(2) == Some(&"aten")
                        && segs.get(3).is_some_and(|op| TPU_MISSING_OPS.contains(op)))
            }
            // `torch._convert_weight_to_int4pack`: an ATen op TorchTPU does not run.
            Some(op) if segs.len() == 2 && TPU_MISSING_OPS.contains(op) => true,
            Some("utils") => rest.starts_with("utils.cpp_extension"),
            // Whether CUDA's flash/efficient/cuDNN SDPA kernels would run; choosing FA3.
            Some("backends") => rest.starts_with("backends.cuda.can_use_"),
            Some("nn") => rest == "nn.attention.activate_flash_attention_impl",
            // Inductor compiles for CUDA (Triton) and the CPU, not a TPU (a TPU tensor sent to
            // it raises): its compile entry points and CUDA graph trees. Its settings, utilities
            // and graph passes (`config`, `utils`, `fx_passes`) run nothing on a device.
            Some("_inductor") => segs
                .get(2)
                .is_some_and(|s| s.starts_with("cudagraph") || INDUCTOR_COMPILES.contains(s)),
            Some("fx") => rest.starts_with("fx.passes.regional_inductor"),
            _ => false,
        };
        let missing = segs.last().is_some_and(|op| {
            (segs.len() == 2 || segs.get(2) == Some(&"aten")) && TPU_MISSING_OPS.contains(op)
        });
        if cuda_only && missing {
            return Some(format!(
                "`{q}`, an ATen op TorchTPU 0.2.0 does not implement"
            ));
        }
        return cuda_only.then(|| format!("`{q}`"));
    }
    let known = CUDA_ONLY_ROOTS.iter().any(|r| under(r));
    // A compiled extension: `fused_adam_cuda`, `mylib._C`, `.triton_ops`, `cuda_kernels`.
    let compiled = segs.iter().any(|s| {
        *s == "_C"
            || s.ends_with("_cuda")
            || s.ends_with("_C")
            || s.starts_with("cuda_")
            || s.contains("triton")
    });
    (known || compiled).then(|| format!("`{q}`"))
}

/// The module's top-level statements, with those of module-level `if`/`try` blocks (kernels
/// defined under `if HAS_TRITON:` or `try: import helion`).
pub(super) fn top_level(module: &[Stmt]) -> Vec<&Stmt> {
    let mut out = vec![];
    for stmt in module {
        match stmt {
            Stmt::If(i) => {
                out.extend(top_level(&i.body));
                for c in &i.elif_else_clauses {
                    out.extend(top_level(&c.body));
                }
            }
            Stmt::Try(t) => {
                out.extend(top_level(&t.body));
                for h in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    out.extend(top_level(&h.body));
                }
                out.extend(top_level(&t.orelse));
            }
            s => out.push(s),
        }
    }
    out
}

/// Module-level functions decorated with `@triton.jit`, `@triton.autotune(...)`,
/// `@helion.kernel(...)` (or any decorator from a CUDA-only library).
pub(super) fn triton_kernels(body: &[Stmt], sem: &Semantic) -> HashMap<String, String> {
    top_level(body)
        .into_iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) => f.decorator_list.iter().find_map(|d| {
                let e = match &d.expression {
                    Expr::Call(c) => c.func.as_ref(),
                    e => e,
                };
                let q = sem.qualified_name(e)?;
                cuda_only_name(&q)?;
                Some((
                    f.name.to_string(),
                    format!("the `@{q}` kernel `{}`", f.name),
                ))
            }),
            _ => None,
        })
        .collect()
}

/// A string that names a GPU as a choice: `"gpu"`, `"GPU"`, `"gpu_hist"`, `"gpus"`.
pub(super) fn gpu_choice(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l == "gpu" || l == "gpus" || l.starts_with("gpu_") || l.starts_with("gpu-")
}

#[cfg(test)]
mod tests {
    use super::cuda_only_name;

    #[test]
    fn cuda_only_names() {
        for q in [
            "triton.jit",
            "helion.kernel",
            "torch.ops.mylib.fused_add",
            "torch.cuda.CUDAGraph",
            "torch.utils.cpp_extension.load_inline",
            "torch.backends.cuda.can_use_flash_attention",
            "torch._inductor.cudagraph_mark_step_begin",
            "mylib._C.fused",
            ".._C",
            "fused_adam_cuda",
            "flash_attn.flash_attn_func",
            "torch.ops.aten._convert_weight_to_int4pack",
            "torch._weight_int4pack_mm",
            "vllm.LLM",
            "torch._inductor.standalone_compile",
            "torch.fx.passes.regional_inductor.regional_inductor",
        ] {
            assert!(cuda_only_name(q).is_some(), "{q}");
        }
        for q in [
            "torch.ops.aten.add",
            "torch.cuda.synchronize",
            "torch._C._get_tracing_state",
            "numpy.zeros",
            "os.environ",
            "torch._inductor.config.coordinate_descent_tuning",
            "torch._inductor.fx_passes.bucketing.is_all_gather_into_tensor",
            "torch._inductor.utils.fresh_inductor_cache",
            "deepspeed.initialize",
        ] {
            assert!(cuda_only_name(q).is_none(), "{q}");
        }
    }

    /// A project module importing one of these at top level exports CUDA-only names
    /// (`neighbours.rs`): each is CUDA-only here too.
    #[test]
    fn kernel_libraries_are_cuda_only() {
        for lib in crate::port::neighbours::KERNEL_LIBRARIES {
            assert!(cuda_only_name(lib).is_some(), "{lib}");
        }
    }
}
