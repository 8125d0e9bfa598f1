"""Run under `tpuport run --target sim --hbm-track full --strict-hbm --hbm 64MiB --mode defer-fuse`.

A known allocation pattern on the "tpu" device: the tracker's peak must be within 10 % of it;
then an allocation past the 64 MiB must raise torch.OutOfMemoryError as a device would; and in
defer-fuse mode the host syncs that end fused regions (bool(), .item(), print) are counted.
"""
import torch

import tpuport

MiB = 1 << 20
acc = torch.accelerator
base = acc.memory_allocated()
acc.reset_peak_memory_stats()
keep = [torch.empty(4 * MiB // 4, device="tpu") for _ in range(6)]  # 24 MiB
tmp = [torch.ones(2 * MiB // 4, device="tpu") * 2 for _ in range(4)]  # +8 MiB (and 8 MiB of ones, freed)
del tmp
more = torch.zeros(8 * MiB // 4, device="tpu")  # +8 MiB
expected_peak = 24 * MiB + 8 * MiB + 2 * MiB  # keep + tmp results + one temporary ones() alive at a time
peak = acc.max_memory_allocated() - base
print("hbm peak %.2f MiB, expected %.2f MiB" % (peak / MiB, expected_peak / MiB), flush=True)
assert abs(peak - expected_peak) <= 0.10 * expected_peak, (peak, expected_peak)
assert acc.memory_allocated() - base == 32 * MiB, acc.memory_allocated() - base
tpuport.step()
x = torch.randn(10, device="tpu")
if (x > 100).any():  # bool(): a materialisation point
    print("never")
print(x.sum().item() is not None)
tpuport.step()
try:
    huge = torch.empty(40 * MiB // 4, device="tpu")  # 72 MiB live > 64 MiB
except torch.OutOfMemoryError as e:
    assert "the TPU ran out of memory" in str(e), str(e)
    print("oom raised:", str(e).splitlines()[0][:160], flush=True)
else:
    raise AssertionError("no OutOfMemoryError past the simulated HBM")
del keep, more
# Without --debug-checks a TPU does not check take() indices; the sim says so when the host does.
# A CUDA host checks them in the kernel (a device-side assert that ends the process's CUDA
# context): not tried there (README, "What still differs").
from tpuport_agent import state  # noqa: E402

if state.HOST == "cuda":
    print("take note ok (not tried on a CUDA host)", flush=True)
    raise SystemExit(0)
try:
    torch.take(torch.arange(4, device="tpu"), torch.tensor([100], device="tpu"))
except (IndexError, RuntimeError) as e:
    assert "TORCH_TPU_ENABLE_DEBUG_CHECKS" in str(e), str(e)
    print("take note ok", flush=True)
else:
    raise AssertionError("out-of-range take() did not raise on the host")
