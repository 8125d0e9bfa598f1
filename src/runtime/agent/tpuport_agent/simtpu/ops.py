"""``torch.tpu.ops`` on the sim target: the max-pool ops (Stable) run on the host; the TPU
kernels (SparseCore, ragged, collectives on dims, ...) have no host version and say so."""

import torch
import torch.nn.functional as F


# TorchTPU's signatures: every argument required (no defaults), as in torch_tpu/_internal/ops/ops.py.
def max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode):
    return F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode):
    return F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode):
    return F.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)


def _pool_backward(dims):
    def backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode):
        x = input.detach().requires_grad_(True)
        with torch.enable_grad():
            out = getattr(F, "max_pool%dd" % dims)(x, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode)
        (grad,) = torch.autograd.grad(out, x, grad_output)
        return grad

    return backward


max_pool1d_backward = _pool_backward(1)
max_pool2d_backward = _pool_backward(2)
max_pool3d_backward = _pool_backward(3)


def optimization_barrier(*tensors):
    """An XLA scheduling barrier: on the host, the identity."""
    return tensors[0] if len(tensors) == 1 else tensors


_TPU_ONLY = [
    "align_jagged_to_multiple", "strip_jagged_padding", "all_gather_dim", "reduce_scatter_dim", "ragged_all_to_all",
    "ragged_dot", "ragged_dot_weight_grad", "send", "recv", "sparse_dense_matmul",
    "sparse_dense_matmul_activation_unstack", "sparse_dense_matmul_grad_with_adagrad",
    "sparse_dense_matmul_grad_with_adam", "sparse_dense_matmul_grad_with_sgd", "sparse_dense_matmul_gradient_stack",
    "sparse_gather", "sparse_gather_backward", "sparse_iota", "sparse_map_row", "splash_sdpa",
]


def _unavailable(name):
    def op(*args, **kwargs):
        raise NotImplementedError(
            "torch.tpu.ops.%s is a TPU kernel with no host version, so the tpuport sim target cannot run it; "
            "run this part on a TPU (tpuport run --target tpu) or guard it for the sim" % name)

    op.__name__ = name
    return op


for _name in _TPU_ONLY:
    globals()[_name] = _unavailable(_name)
