import unittest

import lightning.pytorch as pl
import torch

try:
    import helion

    HAS_HELION = True
except ImportError:
    HAS_HELION = False


if HAS_HELION:

    @helion.kernel(static_shapes=True)
    def _rope_fwd(x):
        return x

    def _rope_op(x):
        return _rope_fwd(x)

    def _apply_rope(x):
        if not _eligible(x):
            return None
        return _rope_op(x)


def _eligible(x):
    # Every tensor must be CUDA for the kernel: otherwise fall back to PyTorch.
    return x.is_cuda and x.ndim == 4


def rotate(x):
    if x.device.type == "cuda":
        return _rope_op(x)
    return x.flip(-1)


def pin(x):
    # Pinned memory is right on a TPU too: extended.
    return x.pin_memory() if x.device.type == "cuda" else x


class TestKernels(unittest.TestCase):
    @unittest.skipUnless(torch.cuda.is_available(), "CUDA required")
    def test_vllm_decode(self):
        from vllm import LLM

        LLM("tiny").generate(["a"])

    def test_compiled(self):
        if not torch.cuda.is_available():
            self.skipTest("needs a GPU")
        torch._inductor.standalone_compile(lambda x: x, [torch.ones(2)])

    @unittest.skipUnless(torch.cuda.is_available(), "needs a GPU")
    def test_memory(self):
        t = torch.ones(2).pin_memory()
        self.assertTrue(t.is_pinned())


def train(model, data):
    gpus = torch.cuda.device_count()
    if gpus > 0:
        accelerator = "gpu"
    else:
        accelerator = "cpu"
    finder = "gpu" if torch.cuda.is_available() else "cpu"
    finder_devices = 1 if torch.cuda.is_available() else "auto"
    pl.Trainer(accelerator=finder, devices=finder_devices).fit(model, data)
    pl.Trainer(accelerator=accelerator, devices=max(gpus, 1)).fit(model, data)
    # Not given to Lightning: ported.
    pin_memory = torch.cuda.is_available()
    return pin_memory
