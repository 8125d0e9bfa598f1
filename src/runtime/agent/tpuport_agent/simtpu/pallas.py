"""``torch.tpu.pallas`` on the sim target: Pallas kernels need JAX and a TPU."""

_TEXT = "JAX/Pallas is not available. Please install JAX to use this functionality (the tpuport sim target does not run Pallas kernels)."


def get_pallas_mesh(*args, **kwargs):
    raise ImportError(_TEXT)


def jax_op(*args, **kwargs):
    raise ImportError(_TEXT)
