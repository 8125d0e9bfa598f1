"""XLA:CPU gaps on the xla-cpu target: ops TorchTPU lowers and a TPU runs, that XLA:CPU cannot.

TorchTPU lowers every op to StableHLO and lets the PJRT plugin compile it. A few of its lowerings
use what only a TPU's compiler has:
  - HLO ``scan`` (cumsum, cumprod, logcumsumexp, and ops built on them: embedding_bag,
    repeat_interleave with a tensor of repeats): XLA:CPU *aborts the process*
    (``computation_partitioner.cc ... Check failed``);
  - the ``LuDecomposition`` custom call (linalg.inv, linalg.solve, lu_factor): XLA:CPU has no
    handler for it;
  - Mosaic ``tpu_custom_call`` kernels (scaled_dot_product_attention): TPU machine code;
  - the PJRT host allocator (``Tensor.pin_memory()``, ``DataLoader(pin_memory=True)``): the CPU
    plugin has none ("host memory allocator is not implemented for this client").
These are not TPU gaps, so here they must run: the ops above run on the host CPU (their tensors
go there and back: same results, host speed), scaled_dot_product_attention runs in its math
form (matmuls and softmax, which XLA:CPU compiles), and ``pin_memory()`` returns the tensor as it
is (pinned memory only speeds up copies). Each is reported once as an emulation note
(a warning event with category ``XlaCpuGap``), never as a TPU gap. A compiled graph that holds
one of them runs op by op (on a TPU it compiles whole), also noted.

Ops TorchTPU itself lacks (median, ...) are not touched: they keep TorchTPU's own error, or its
CPU fallback with ``--cpu-fallback``.
"""

# aten op (overload names) -> what XLA:CPU lacks. Functional and out= overloads: the in-place
# and method forms reach one of them.
HOST_OPS = {
    "cumsum": ("default", "out"),
    "cumprod": ("default", "out"),
    "logcumsumexp": ("default", "out"),
    "_embedding_bag": ("default",),
    "_embedding_bag_forward_only": ("default",),
    "_embedding_bag_backward": ("default",),
    "_embedding_bag_dense_backward": ("default",),
    "repeat_interleave": ("Tensor",),
    "linalg_inv_ex": ("default", "inverse"),
    "linalg_solve_ex": ("default", "result"),
    "linalg_lu_factor_ex": ("default", "out"),
    "linalg_lu": ("default", "out"),
}
WHY = {
    "cumsum": "HLO scan", "cumprod": "HLO scan", "logcumsumexp": "HLO scan",
    "_embedding_bag": "HLO scan", "_embedding_bag_forward_only": "HLO scan",
    "_embedding_bag_backward": "HLO scan", "_embedding_bag_dense_backward": "HLO scan",
    "repeat_interleave": "HLO scan",
    "linalg_inv_ex": "the LuDecomposition custom call", "linalg_solve_ex": "the LuDecomposition custom call",
    "linalg_lu_factor_ex": "the LuDecomposition custom call", "linalg_lu": "the LuDecomposition custom call",
}
# Names (torch functions, Tensor methods, modules' functional calls) that put one of the ops
# above into a Dynamo graph.
GRAPH_NAMES = {"cumsum", "cumsum_", "cumprod", "cumprod_", "logcumsumexp", "embedding_bag", "_embedding_bag",
               "repeat_interleave", "inv", "inverse", "inv_ex", "solve", "solve_ex", "lu_factor", "lu_factor_ex",
               "lu", "linalg_inv", "linalg_solve"}

_LIB = None
_NOTED = set()
_EMIT = None
_TORCH = None
SDPA_NOTE = ("scaled_dot_product_attention runs in its math form here (matmul, softmax, matmul): TorchTPU's TPU "
             "kernel is a Mosaic tpu_custom_call, which XLA:CPU cannot run; a TPU runs the kernel")


def note(key, message, traced=True):
    """One warning event per gap (category XlaCpuGap), and one line on stderr. Never from code
    Dynamo traces (``traced``): a side effect there would break the graph (and a graph break
    changes what TorchTPU compiles); the compile guard, which Dynamo calls and does not trace,
    notes what a compiled graph uses instead."""
    if traced and _TORCH is not None and _TORCH.compiler.is_compiling():
        return
    if key in _NOTED:
        return
    _NOTED.add(key)
    import sys

    sys.stderr.write("[tpuport xla-cpu] %s\n" % message)
    if _EMIT is not None:
        _EMIT("warning", category="XlaCpuGap", message=message, file="", line=0, op=key)


def _on_host(torch, op, overload_name, name):
    """A PrivateUse1 kernel for ``op.overload_name`` that computes on the host: tpu tensors go to
    the CPU, the CPU kernel runs, the results come back (out= forms are filled in place)."""
    overload = getattr(op, overload_name)
    outs = [a.name for a in overload._schema.arguments if a.is_out]

    def to_host(x):
        if isinstance(x, torch.Tensor) and x.device.type == "tpu":
            return x.cpu()
        if isinstance(x, (list, tuple)):
            return type(x)(to_host(v) for v in x)
        return x

    def kernel(*args, **kwargs):
        note(name, "aten::%s runs on the host CPU here: XLA:CPU cannot compile TorchTPU's lowering (%s); "
                   "a TPU runs it on the device" % (name, WHY[name]))
        device = _first_device(torch, args, kwargs)
        targets = [kwargs.pop(n) for n in outs if n in kwargs]
        host_args = to_host(args)
        host_kwargs = {k: to_host(v) for k, v in kwargs.items()}
        if targets:
            result = op.default(*host_args, **host_kwargs)
            results = result if isinstance(result, tuple) else (result,)
            for dst, src in zip(targets, results):
                dst.resize_(src.shape)
                dst.copy_(src)
            return targets[0] if len(targets) == 1 else tuple(targets)
        return _to(torch, overload(*host_args, **host_kwargs), device)

    return kernel


def _first_device(torch, args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor) and a.device.type == "tpu":
            return a.device
        if isinstance(a, (list, tuple)):
            for v in a:
                if isinstance(v, torch.Tensor) and v.device.type == "tpu":
                    return v.device
    return None


def _to(torch, value, device):
    if device is None:
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(_to(torch, v, device) for v in value)
    if isinstance(value, list):
        return [_to(torch, v, device) for v in value]
    return value


def _sdpa(torch, original):
    """scaled_dot_product_attention in its math form for tpu tensors."""
    math = torch.ops.aten._scaled_dot_product_attention_math

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if getattr(query, "device", None) is None or query.device.type != "tpu":
            return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                            scale=scale, enable_gqa=enable_gqa)
        note("scaled_dot_product_attention", SDPA_NOTE)
        return math(query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)[0]

    sdpa.__doc__ = original.__doc__
    return sdpa


PIN_NOTE = ("pin_memory() returns the tensor unpinned here: the CPU PJRT plugin has no host allocator "
            "(on a TPU VM TorchTPU pins it)")


def _pin_memory(torch, original):
    """Tensor.pin_memory: TorchTPU's, until the CPU plugin says it has no host allocator; then the
    tensor itself (what pinning gives a copy is speed, not a different result)."""
    state = {"unsupported": False}

    def pin_memory(self, *args, **kwargs):
        if not state["unsupported"]:
            try:
                return original(self, *args, **kwargs)
            except RuntimeError as e:
                if "host memory allocator is not implemented" not in str(e):
                    raise
                state["unsupported"] = True
        note("pin_memory", PIN_NOTE)
        return self

    pin_memory.__doc__ = original.__doc__
    pin_memory.__name__ = original.__name__
    return pin_memory


def _graph_gaps(gm):
    """The XLA:CPU-gap names a Dynamo graph calls, and where the first one is in the script."""
    import re

    found, where = set(), None
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        target = node.target
        name = target if isinstance(target, str) else getattr(target, "__name__", "")
        name = str(name).split(".")[-1]
        if name in GRAPH_NAMES:
            found.add(name)
            if where is None:
                sites = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
                if sites:
                    where = "%s:%s" % sites[-1]
    return found, where


def _guard_compile_backend(torch):
    """Wrap TorchTPU's Dynamo backend "tpu": a graph with an XLA:CPU gap runs op by op."""
    from torch._dynamo.backends import registry

    real = registry.lookup_backend("tpu")
    if getattr(real, "_tpuport_guard", False):
        return

    def tpu(gm, example_inputs, **kwargs):
        if any(getattr(n.target, "__name__", "") == "_scaled_dot_product_attention_math" or
               "_scaled_dot_product_attention_math" in str(n.target) for n in gm.graph.nodes):
            note("scaled_dot_product_attention", SDPA_NOTE, traced=False)
        gaps, where = _graph_gaps(gm)
        if gaps:
            note("compiled:" + ",".join(sorted(gaps)),
                 "a compiled graph (at %s) uses %s, which XLA:CPU cannot compile under TorchTPU: it runs op by op here "
                 "(a TPU compiles it whole)" % (where or "?", ", ".join(sorted(gaps))), traced=False)
            return gm.forward
        return real(gm, example_inputs, **kwargs)

    tpu._tpuport_guard = True
    registry._COMPILER_FNS["tpu"] = tpu


def install(torch, emit):
    """Host kernels for the XLA:CPU gaps, SDPA's math form, and the compile guard."""
    global _LIB, _EMIT, _TORCH
    _EMIT = emit
    _TORCH = torch
    _LIB = torch.library.Library("aten", "IMPL")
    aten = torch.ops.aten
    for name, overloads in HOST_OPS.items():
        op = getattr(aten, name, None)
        if op is None:
            continue
        for o in overloads:
            if o in op.overloads():
                _LIB.impl(getattr(op, o), _on_host(torch, op, o, name), "PrivateUse1")
    import torch.nn.functional as F

    F.scaled_dot_product_attention = _sdpa(torch, F.scaled_dot_product_attention)
    torch.Tensor.pin_memory = _pin_memory(torch, torch.Tensor.pin_memory)


def on_dynamo(torch):
    """Once Dynamo is imported (TorchTPU imports it at load)."""
    _guard_compile_backend(torch)
