"""TPU float32 matmul precision where the device computes float32 matmuls in full float32: the
sim target's host, and XLA:CPU under TorchTPU (the xla-cpu target, where XLA:CPU ignores the
dot's precision config).

On a TPU a float32 matmul-class op runs on bf16 inputs: DEFAULT (TorchTPU's default, "medium")
is one bf16 pass with f32 accumulation, HIGH three passes, HIGHEST six (each input split into
bf16 pieces p0 + p1 + p2; the passes are the piece products with i + j below 1, 2, 3). The sim
replaces the host kernels of mm, bmm, addmm, baddbmm, mv, addmv and convolution
(``torch.library``, so eager code, compiled graphs and the matmuls of backward all go through
it). Two stay at host precision because their host ``out=`` kernels call the functional op
again: 1-D ``dot`` and ``convolution_backward`` (so a conv's gradients are float32). scaled_dot_product_attention runs in its matmul form.
A product of two bf16 values is exact in f32, so an f32 kernel on bf16-rounded pieces is "bf16 x bf16, f32 accumulate".

Only float32 inputs are touched; bf16 (autocast) and other dtypes run as they are.

On xla-cpu the kernels are registered for TorchTPU's device (PrivateUse1), and the precision in
effect is TorchTPU's own (``torch.set_float32_matmul_precision``, ``torch.tpu.precision``). There
``convolution`` keeps TorchTPU's kernel (float32 on XLA:CPU: replacing it would lose the only
kernel that runs it), and so do compiled graphs, which TorchTPU lowers to XLA whole.
"""

import threading

# 0 = DEFAULT (1 pass), 1 = HIGH (3 passes), 2 = HIGHEST (6 passes); None = host float32 (off).
_GLOBAL = [0]
_LOCAL = threading.local()
PASSES = {
    0: [(0, 0)],
    1: [(0, 1), (1, 0), (0, 0)],
    2: [(1, 1), (0, 2), (2, 0), (0, 1), (1, 0), (0, 0)],
}
NAMES = {"default": 0, "medium": 0, "high": 1, "highest": 2, "off": None}
_LIB = None
_TORCH = None
_HOST = "cpu"  # the device type "tpu" tensors live on, where the emulating kernels are
# xla-cpu: reads the level in effect from TorchTPU (None: the sim's own global and stack).
_LEVEL = None


def current():
    if _LEVEL is not None:
        return _LEVEL()
    stack = getattr(_LOCAL, "stack", None)
    if stack:
        return stack[-1]
    return _GLOBAL[0]


def set_global(level):
    _GLOBAL[0] = level


def push(level):
    if not hasattr(_LOCAL, "stack"):
        _LOCAL.stack = []
    _LOCAL.stack.append(level)


def pop():
    _LOCAL.stack.pop()


def emulating(t):
    torch = _TORCH
    return torch is not None and current() is not None and isinstance(t, torch.Tensor) and t.dtype == torch.float32


def split(x, n):
    """x = p0 + p1 + ... (n pieces, each exactly representable in bf16)."""
    torch = _TORCH
    pieces, rest = [], x
    for i in range(n):
        p = rest.to(torch.bfloat16).to(torch.float32)
        pieces.append(p)
        if i + 1 < n:
            rest = rest - p
    return pieces


def _passes(a, b, product):
    level = current()
    pairs = PASSES[level]
    n = 1 + max(max(i, j) for i, j in pairs)
    pa, pb = split(a, n), split(b, n)
    out = None
    for i, j in pairs:  # smallest terms first
        term = product(pa[i], pb[j])
        out = term if out is None else out.add_(term)
    return out


def install(torch, precision, host, key=None, level=None):
    """Replace the matmul-class kernels of dispatch key ``key`` (the host's by default) with
    precision-emulating ones. ``level``: a function giving the level in effect (xla-cpu reads
    TorchTPU's); ``precision="off"`` turns emulation off whatever it says."""
    global _LIB, _TORCH, _HOST, _LEVEL
    _TORCH = torch
    _HOST = host
    set_global(NAMES.get(precision, 0))
    if level is not None and NAMES.get(precision, 0) is not None:
        _LEVEL = level
    aten = torch.ops.aten
    _LIB = torch.library.Library("aten", "IMPL")
    if key is None:
        key = "CUDA" if host == "cuda" else "CPU"

    def f32(*ts):
        return current() is not None and all(t.dtype == torch.float32 for t in ts)

    def product(out_op, shape):
        """The host kernel, through its out= form (the functional one is replaced)."""
        return lambda x, y: out_op(x, y, out=x.new_empty(shape))

    def emulated(a, b, out_op, shape):
        p = product(out_op, shape)
        return _passes(a, b, p) if f32(a, b) else p(a, b)

    def mm(a, b):
        return emulated(a, b, aten.mm.out, (a.shape[0], b.shape[1]))

    def bmm(a, b):
        return emulated(a, b, aten.bmm.out, (a.shape[0], a.shape[1], b.shape[2]))

    def mv(a, v):
        return emulated(a, v, aten.mv.out, (a.shape[0],))

    def combine(bias, prod, beta, alpha):
        if alpha != 1:
            prod = prod.mul_(alpha)
        if beta == 0:
            return prod
        return prod.add_(bias, alpha=beta) if beta != 1 else prod.add_(bias)

    def addmm(bias, a, b, *, beta=1, alpha=1):
        shape = (a.shape[0], b.shape[1])
        if not f32(a, b):
            return aten.addmm.out(bias, a, b, beta=beta, alpha=alpha, out=a.new_empty(shape))
        return combine(bias, _passes(a, b, product(aten.mm.out, shape)), beta, alpha)

    def addmv(bias, a, v, *, beta=1, alpha=1):
        if not f32(a, v):
            return aten.addmv.out(bias, a, v, beta=beta, alpha=alpha, out=a.new_empty((a.shape[0],)))
        return combine(bias, _passes(a, v, product(aten.mv.out, (a.shape[0],))), beta, alpha)

    def baddbmm(bias, a, b, *, beta=1, alpha=1):
        shape = (a.shape[0], a.shape[1], b.shape[2])
        if not f32(a, b):
            return aten.baddbmm.out(bias, a, b, beta=beta, alpha=alpha, out=a.new_empty(shape))
        return combine(bias, _passes(a, b, product(aten.bmm.out, shape)), beta, alpha)

    def convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
        def conv(xi, wi, b=None):
            return aten._convolution(xi, wi, b, stride, padding, dilation, transposed, output_padding, groups,
                                     False, False, True, True)

        if not f32(x, w):
            return conv(x, w, bias)
        out = _passes(x, w, conv)
        return out if bias is None else out.add_(bias.reshape((1, -1) + (1,) * (out.dim() - 2)))

    kernels = [("mm", mm), ("bmm", bmm), ("mv", mv), ("addmm", addmm), ("addmv", addmv), ("baddbmm", baddbmm)]
    if key in ("CPU", "CUDA"):
        kernels.append(("convolution", convolution))  # the host's _convolution does the work
    for name, fn in kernels:
        _LIB.impl(name, fn, key)


def sdpa_math(torch, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    """scaled_dot_product_attention in its matmul form, so both matmuls (and their backward)
    run at the emulated precision. The host's fused attention kernel has no matmul to replace."""
    out = torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, dropout_p, is_causal, None, scale=scale, enable_gqa=enable_gqa)
    return out[0]


def relative_error(torch, level, n=256, seed=0):
    """Relative Frobenius error of an n x n float32 matmul at `level` against float64 (docs/sim.md, precision table),
    on the device "tpu" tensors live on (the emulating kernels are registered for it alone)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=g, dtype=torch.float64).to(_HOST)
    b = torch.randn(n, n, generator=g, dtype=torch.float64).to(_HOST)
    ref = a @ b
    with scoped(level):
        got = (a.float() @ b.float()).double()
    return float((got - ref).norm() / ref.norm())


def scoped(level):
    """A block at ``level``: TorchTPU's own ``torch.tpu.precision`` where the level is read from
    TorchTPU (xla-cpu), else the sim's stack."""
    import contextlib

    if _LEVEL is not None:
        P = _TORCH.tpu.Precision
        return _TORCH.tpu.precision((P.DEFAULT, P.HIGH, P.HIGHEST)[level])

    @contextlib.contextmanager
    def sim_scope():
        push(level)
        try:
            yield
        finally:
            pop()

    return sim_scope()
