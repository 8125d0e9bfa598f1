"""xla-cpu end to end (tests/integration/xla_cpu.rs): TorchTPU itself runs the script.

Checks, in one process: the device is TorchTPU's; torch.accelerator answers as a one-device TPU
VM process does; ops TorchTPU lacks raise TorchTPU's own error; the XLA:CPU gaps run (eager and
compiled) and match CPU torch; the TPU's default matmul precision is emulated on TorchTPU's
kernels; the live tpu tensors are counted as HBM. Prints one "ok <what>" line per check.
"""
import torch
import torch.nn.functional as F

# TorchTPU's device, not a mapped host.
x = torch.randn(2, device="tpu")
assert x.device.type == "tpu", x.device
assert torch._C._get_privateuse1_backend_name() == "tpu"
assert str(x.device) == "tpu:0" and not x.is_cpu
print("ok device", x.device)

acc = torch.accelerator
assert acc.is_available() and acc.device_count() == 1, (acc.is_available(), acc.device_count())
cur = acc.current_accelerator()
assert cur.type == "tpu" and cur.index is None, repr(cur)  # torch documents the index as None
assert acc.current_device_index() == 0
print("ok accelerator", cur, acc.device_count())

# An op TorchTPU lacks: its own error.
try:
    torch.arange(5.0, device="tpu").median()
    raise SystemExit("median did not raise")
except RuntimeError as e:
    assert "operator 'aten::median' is not implemented for TPU" in str(e), e
    print("ok median raises TorchTPU's error")

# XLA:CPU gaps run, in eager and compiled code, and match CPU torch.
v = torch.arange(1.0, 7.0)
assert torch.equal(v.to("tpu").cumsum(0).cpu(), v.cumsum(0))
assert torch.equal(v.to("tpu").cumprod(0).cpu(), v.cumprod(0))
u = torch.tensor([3, 1, 3, 2])
assert torch.equal(torch.unique(u.to("tpu")).cpu(), torch.unique(u))
g = torch.Generator().manual_seed(0)
m = torch.randn(4, 4, generator=g) + 4 * torch.eye(4)
assert torch.allclose(torch.linalg.inv(m.to("tpu")).cpu(), torch.linalg.inv(m), atol=1e-5)
q = torch.randn(2, 2, 16, 8, generator=g)
ref = F.scaled_dot_product_attention(q, q, q, is_causal=True)
got = F.scaled_dot_product_attention(q.to("tpu"), q.to("tpu"), q.to("tpu"), is_causal=True).cpu()
assert (got - ref).abs().max() < 2e-2, (got - ref).abs().max()  # bf16 1-pass matmuls (TPU default)
w = torch.arange(4.0, requires_grad=True)
wt = w.detach().to("tpu").requires_grad_()
wt.cumsum(0).sum().backward()
assert torch.equal(wt.grad.cpu(), torch.tensor([4.0, 3.0, 2.0, 1.0]))


@torch.compile(backend="tpu")
def scan(t):
    return t.cumsum(0) * 2


assert torch.equal(scan(v.to("tpu")).cpu(), v.cumsum(0) * 2)
print("ok gaps")

# Precision: TorchTPU's default ("medium") is one bf16 pass; "highest" is float32-exact here.
a = torch.randn(64, 64, generator=g)
b = torch.randn(64, 64, generator=g)
exact = (a.double() @ b.double())
err = lambda t: float((t.cpu().double() - exact).norm() / exact.norm())
assert torch.get_float32_matmul_precision() == "medium"
e_default = err(a.to("tpu") @ b.to("tpu"))
torch.set_float32_matmul_precision("highest")
e_highest = err(a.to("tpu") @ b.to("tpu"))
torch.set_float32_matmul_precision("medium")
assert 1e-3 < e_default < 1e-2 and e_highest < 1e-5, (e_default, e_highest)
print("ok precision default %.2e highest %.2e" % (e_default, e_highest))

# HBM: the live tpu tensors, counted.
before = acc.memory_allocated()
big = torch.zeros(1 << 20, device="tpu")  # 4 MiB
after = acc.memory_allocated()
assert after - before >= 4 << 20, (before, after)
print("ok memory %d" % (after - before))
