"""``torch.tpu.pallas`` on the sim target: Pallas kernels need JAX and a TPU. As in TorchTPU
without JAX, reaching any of its names raises ImportError (its module fails to import)."""

_TEXT = "JAX/Pallas is not available. Please install JAX to use this API."
__all__ = ["get_pallas_mesh", "jax_op"]


def __getattr__(name):
    if name in __all__:
        raise ImportError(_TEXT)
    raise AttributeError("module 'torch.tpu.pallas' has no attribute %r" % name)
