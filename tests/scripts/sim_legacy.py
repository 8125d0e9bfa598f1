"""Run with TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1 from the start (tests/integration/sim.rs, on the
sim and on xla-cpu): TorchTPU's internal device helpers then warn once instead of raising."""
import warnings

import torch

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    assert torch.tpu.device_count() == 1
    torch.tpu.device_count()
messages = [str(x.message) for x in w if "InternalApi" in str(x.message)]
assert len(messages) == 1 and "<TorchTpu/ApiStage/InternalApi/> device_count is internal" in messages[0], messages
print("ok legacy device APIs warn once")
