"""``torch.tpu.optimizers`` on the sim target: TorchTPU's fused optimizers, as the host's
``torch.optim`` ones with the same update rule (the TPU versions differ in speed, not maths)."""

import torch

Optimizer = torch.optim.Optimizer


class AdamW(torch.optim.AdamW):
    pass


class Sgd(torch.optim.SGD):
    pass


if hasattr(torch.optim, "Muon"):

    class Muon(torch.optim.Muon):
        pass

else:

    class Muon:
        def __init__(self, *args, **kwargs):
            raise NotImplementedError("torch.tpu.optimizers.Muon: this torch has no torch.optim.Muon to emulate it with")


class SingleTraceTrainer:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "torch.tpu.optimizers.SingleTraceTrainer traces a whole training step into one TPU program; the tpuport "
            "sim target cannot emulate it. Use torch.compile on the step function to check it compiles")
