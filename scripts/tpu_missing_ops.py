"""Generate what tpuport knows about the ATen ops TorchTPU lacks, from TorchTPU's operator table.

Reads the table (`ops-<torch_tpu>-torch-<torch>.tsv`, see its README in
../shared/reference/torch_tpu_ops/) and writes:

- data/tpu_missing_ops.txt: the ATen operators (default overload) that have a CUDA kernel but
  that TorchTPU does not run (effective status "missing"); `tpuport migrate` treats a call of one
  as code a TPU cannot run when it decides whether a device test guards such code;
- src/runtime/agent/tpuport_agent/tpu_missing_ops.py: every such overload with a CPU or CUDA
  kernel (also `out=` forms), which the sim target makes fail with TorchTPU's message;
- rules/OPS.toml: rule OPS001, the public Python functions that call one of them directly
  (`torch.median`, `torch.nn.functional.huber_loss`, `torch.linalg.cholesky_ex`, ...), found by
  importing torch (so run it with the project's venv: scripts/tpu-missing-ops does), and those
  that reach one through another op (CALL_PROBES, run under a dispatch recorder); rule OPS002,
  the distributions whose sampler reaches one (SAMPLER_PROBES).

Re-run it for a new TorchTPU release with the new table.
"""

import csv
import importlib
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent


def missing_ops(table):
    rows = list(csv.reader(open(table), delimiter="\t"))
    ix = {h: i for i, h in enumerate(rows[0])}
    for r in rows[1:]:
        op = r[0]
        if not op.startswith("aten::") or "." in op[6:]:
            continue
        if r[ix["cuda_kernel"]] == "yes" and "missing" in r[ix["effective_status"]]:
            yield op[6:]


# Host kernels a composite op picks by backend (SDPA's CPU/CUDA flash and memory-efficient
# kernels, cuDNN, MKL-DNN, ...): on a TPU the composite picks TorchTPU's own kernel and never
# reaches these, so the sim must not fail on them.
HOST_ONLY = ("_for_cpu", "_scaled_dot_product_", "_flash_attention", "_efficient_attention",
             "_fused_sdp_choice", "cudnn", "miopen", "mkldnn", "_nnpack", "_cslt", "_cufft", "fbgemm",
             "_thnn_fused", "slow_conv", "_conv_depthwise2d", "_masked_scale",
             "_fill_mem_eff_dropout_mask", "_transform_bias_rescale_qkv", "_triton_")


def missing_overloads(table):
    """Every overload (`median`, `median.dim_values`) a TPU would not run (status "missing", or a
    structured op whose `out=` overload is missing) that has a CPU or CUDA kernel, so the sim
    target can make it fail as a TPU would; host-only kernels (HOST_ONLY) excepted."""
    rows = list(csv.reader(open(table), delimiter="\t"))
    ix = {h: i for i, h in enumerate(rows[0])}
    for r in rows[1:]:
        op = r[0]
        if not op.startswith("aten::"):
            continue
        kernel = r[ix["cpu_kernel"]] == "yes" or r[ix["cuda_kernel"]] == "yes"
        if kernel and "missing" in r[ix["effective_status"]] and not any(h in op for h in HOST_ONLY):
            yield op[6:]


def python_names(op):
    """Public Python functions named for the op (they call it directly)."""
    if op.startswith("_"):
        return
    cands = [("torch", torch, op), ("torch.nn.functional", F, op)]
    for pre, mod in (("linalg_", "torch.linalg"), ("special_", "torch.special"), ("fft_", "torch.fft")):
        if op.startswith(pre):
            cands.append((mod, importlib.import_module(mod), op[len(pre):]))
    for mname, m, name in cands:
        # In-place twins (`erfc_`) and CUDA/ROCm library entry points are left to other rules.
        if name.endswith("_") or name.startswith(("cudnn_", "miopen_")):
            continue
        if hasattr(m, name) and callable(getattr(m, name)):
            yield f"{mname}.{name}"


# Public functions that reach a missing op only through another op (`torch.linalg.det` runs
# `_linalg_det`, `torch.linalg.eigh` runs `_linalg_eigh`): each is run once, on CPU tensors, under
# a dispatch mode that records the ATen ops it reaches, and listed in OPS001 where one of them is
# missing. Probed, not assumed: a torch release that computes one another way drops it.
CALL_PROBES = {
    "torch.det": "torch.det(torch.eye(3))",
    "torch.linalg.det": "torch.linalg.det(torch.eye(3))",
    "torch.logdet": "torch.logdet(torch.eye(3))",
    "torch.slogdet": "torch.slogdet(torch.eye(3))",
    "torch.linalg.slogdet": "torch.linalg.slogdet(torch.eye(3))",
    "torch.linalg.eigh": "torch.linalg.eigh(torch.eye(3))",
    "torch.linalg.eigvalsh": "torch.linalg.eigvalsh(torch.eye(3))",
    "torch.linalg.eigvals": "torch.linalg.eigvals(torch.eye(3))",
    "torch.unique": "torch.unique(torch.tensor([3, 1, 3]))",
    "torch.unique_consecutive": "torch.unique_consecutive(torch.tensor([3, 3, 1]))",
}

# Distributions whose sampler runs a missing op (`Poisson(rate).sample()` runs `poisson`,
# `Gamma` `_standard_gamma`, `Dirichlet` `_sample_dirichlet`): reported where they are built
# (OPS002), probed the same way. Their log_prob, mean and entropy run on a TPU.
SAMPLER_PROBES = {
    "Poisson": "D.Poisson(torch.ones(3)).sample()",
    "Gamma": "D.Gamma(torch.ones(3), torch.ones(3)).rsample()",
    "Chi2": "D.Chi2(torch.ones(3)).rsample()",
    "Beta": "D.Beta(torch.ones(3), torch.ones(3)).rsample()",
    "Dirichlet": "D.Dirichlet(torch.ones(3)).rsample()",
    "StudentT": "D.StudentT(torch.ones(3)).rsample()",
    "FisherSnedecor": "D.FisherSnedecor(torch.ones(3), torch.ones(3)).rsample()",
    "InverseGamma": "D.InverseGamma(torch.ones(3), torch.ones(3)).rsample()",
    "Binomial": "D.Binomial(5, torch.full((3,), 0.5)).sample()",
    "Multinomial": "D.Multinomial(5, torch.ones(3)).sample()",
    "Normal": "D.Normal(torch.zeros(3), torch.ones(3)).rsample()",
}


def reached_ops(expr):
    """The ATen ops (without overload) that evaluating `expr` dispatches to, on CPU tensors."""
    from torch.utils._python_dispatch import TorchDispatchMode
    import torch.distributions as D  # noqa: F401 (used by the probes)

    seen = set()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.add(func._schema.name.split("::")[-1])
            return func(*args, **(kwargs or {}))

    with Record():
        eval(expr, {"torch": torch, "D": D})
    return seen


def probed(probes, missing):
    """Name → the missing ops its probe reaches, for the probes that reach one."""
    out = {}
    for name, expr in probes.items():
        hit = sorted(reached_ops(expr) & missing)
        if hit:
            out[name] = hit
    return out


def main():
    table = Path(sys.argv[1])
    ops = sorted(set(missing_ops(table)))
    data = ROOT / "data" / "tpu_missing_ops.txt"
    data.write_text(
        f"# ATen ops with a CUDA kernel that TorchTPU does not run (from {table.name}).\n"
        "# Regenerate: scripts/tpu-missing-ops [TABLE]\n" + "".join(f"{op}\n" for op in ops)
    )
    found = set(missing_overloads(table))
    # An `out=`-style overload counts only with its op: a host kernel may call it internally
    # (CPU's mse_loss_backward calls mse_loss_backward.grad_input) where a TPU runs the op itself.
    overloads = sorted(o for o in found if "." not in o or o.split(".")[0] in found)
    agent = ROOT / "src" / "runtime" / "agent" / "tpuport_agent" / "tpu_missing_ops.py"
    agent.write_text(
        '"""ATen operator overloads TorchTPU does not run (generated by scripts/tpu-missing-ops from\n'
        f'{table.name}; do not edit: re-run it). The sim target makes each fail as on a TPU."""\n\n'
        f'TABLE = "{table.name}"\n\nMISSING = (\n' + "".join(f'    "{o}",\n' for o in overloads) + ")\n"
    )
    calls = probed(CALL_PROBES, set(ops))
    names = sorted({n for op in ops for n in python_names(op)} | set(calls))
    samplers = probed(SAMPLER_PROBES, set(ops))
    sampler_names = sorted(
        f"torch.distributions.{pre}{n}"
        for n in samplers
        for pre in ("", n.lower() + ".")
    )
    sampler_needles = "|".join(sorted(f"{n}(" for n in samplers))
    sampler_calls = "".join(f'    "{n}",\n' for n in sampler_names)
    sampler_ops = ", ".join(f"{n} `{'`/`'.join(o)}`" for n, o in sorted(samplers.items()))
    needles = "|".join(sorted({n.rsplit(".", 1)[1] + "(" for n in names}))
    calls = "".join(f'    "{n}",\n' for n in names)
    (ROOT / "rules" / "OPS.toml").write_text(f'''# OPS: calls of ATen operators that TorchTPU does not implement.
#
# Generated by scripts/tpu-missing-ops from {table.name} (do not edit by hand: re-run it). A
# function listed here calls an ATen op with a CUDA kernel and no TorchTPU kernel; on a TPU the
# call raises "operator 'aten::...' is not implemented for TPU" (TorchTPU has no CPU fallback by
# default). Functions that reach one only through another op (`torch.linalg.eigh`) and
# distributions whose sampler does (OPS002) are found by running them under a dispatch recorder.

family = "OPS"
title = "ATen operators TorchTPU does not implement"

[[rule]]
id = "OPS001"
name = "op-missing-on-tpu"
message = "`{{qualified}}` runs an ATen operator that TorchTPU 0.2.0 does not implement"
advice = \'\'\'On a TPU the call raises `operator 'aten::...' is not implemented for TPU`. Compute it from ops TorchTPU runs (for example `torch.quantile(x, 0.5, interpolation="lower")` for `torch.median(x)`, `torch.nan_to_num(x).sum()` for `nansum`, `x * torch.tanh(F.softplus(x))` for `mish`, `torch.where` on the absolute error for `huber_loss`/`smooth_l1_loss`), or move that tensor to the CPU for this call. The list comes from TorchTPU's operator table (data/tpu_missing_ops.txt, regenerated by scripts/tpu-missing-ops).\'\'\'
fix = "manual"
needles = ["{needles}"]
match.call = [
{calls}]

[[rule]]
id = "OPS002"
name = "sampler-missing-on-tpu"
message = "sampling from `{{qualified}}` runs an ATen operator that TorchTPU 0.2.0 does not implement"
advice = \'\'\'On a TPU, `.sample()`/`.rsample()` of this distribution raises `operator 'aten::...' is not implemented for TPU` ({sampler_ops}); its `log_prob`, `mean` and `entropy` run. Sample on the CPU and move the draw (`dist_on_cpu.sample().to(device)`, the distribution built from CPU copies of its parameters), or draw from one TorchTPU samples (Normal, Uniform, Bernoulli, Categorical, Multinomial: their ops are in its table). Found by running each sampler under a dispatch recorder (scripts/tpu-missing-ops).\'\'\'
fix = "manual"
needles = ["{sampler_needles}"]
match.call = [
{sampler_calls}]
''')
    print(f"{len(ops)} ops → {data}; {len(names)} functions, {len(samplers)} samplers → rules/OPS.toml")


if __name__ == "__main__":
    main()
