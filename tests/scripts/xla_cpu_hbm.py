"""xla-cpu's HBM (tests/integration/xla_cpu.rs): run with --strict-hbm --hbm 8MiB. Live tpu tensors
are counted (CPU tensors are not), and an allocation past the capacity raises
torch.OutOfMemoryError with TorchTPU's text."""
import torch

host = torch.zeros(4 << 20)  # 16 MiB on the CPU: not HBM
a = torch.zeros(1 << 20, device="tpu")  # 4 MiB
print("live", torch.accelerator.memory_allocated())
try:
    b = torch.zeros(2 << 20, device="tpu")  # 8 MiB more: past 8 MiB
    raise SystemExit("no OutOfMemoryError")
except torch.OutOfMemoryError as e:
    print("oom raised:", str(e).splitlines()[0][:120])
