"""What the script sees of CUDA and of the "tpu" device type on the sim target.

A TPU VM runs the CUDA build of torch with no NVIDIA driver: ``torch.cuda.is_available()`` is
False, ``device_count()`` 0, and a call that needs the driver (``synchronize``, ``set_device``,
``get_device_properties``, ``x.cuda()``, ``.to("cuda")``) raises "Found no NVIDIA driver on your
system...". On a CPU-only host torch already answers so. On a CUDA host the sim keeps CUDA for
itself (the "tpu" device lives there), so ``hide_cuda`` shows the script a TPU VM's CUDA: calls
from the script's code get those answers; torch's own callers (Dynamo, DDP, autocast) and the
agent keep the host as it is.

``tpu_methods`` adds what TorchTPU generates for its backend (``generate_methods_for_privateuse1_
backend``): ``Tensor.is_tpu``, ``Tensor.tpu()``, ``Module.tpu()``. ``is_tpu`` is True for a tensor
on the host device the sim maps "tpu" onto: on a CUDA host that is exact (the script cannot
place tensors on CUDA); on a CPU host every CPU tensor answers True (the sim cannot tell a tensor
the script moved to "tpu" from one it kept on the CPU). ``x.device.type`` stays the host's.
"""

import sys

NO_DRIVER = ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
             "installed a driver from http://www.nvidia.com/Download/index.aspx")

# torch.cuda on a CUDA build without a driver: fixed answers, and the calls that initialise CUDA.
ANSWERS = {"is_available": False, "device_count": 0, "is_initialized": False,
           "memory_allocated": 0, "max_memory_allocated": 0, "memory_reserved": 0,
           "max_memory_reserved": 0}
RAISING = ("init", "synchronize", "set_device", "current_device", "get_device_name",
           "get_device_properties", "get_device_capability", "mem_get_info", "current_stream",
           "default_stream", "set_stream", "reset_peak_memory_stats", "ipc_collect",
           "is_bf16_supported", "get_arch_list", "utilization")


def is_user_frame(depth=2):
    """Whether the caller `depth` frames up is the script's code (not torch's, not the agent's)."""
    f = sys._getframe(depth)
    while f is not None:
        mod = f.f_globals.get("__name__", "") or ""
        if mod in ("torch.overrides", "torch._tensor", "torch.utils._device"):
            f = f.f_back  # torch's dispatch plumbing: the caller above it decides
            continue
        return not (mod == "torch" or mod.startswith(("torch.", "tpuport_agent")))
    return True


def no_driver(*args, **kwargs):
    raise RuntimeError(NO_DRIVER)


def is_cuda_string(d):
    return isinstance(d, str) and (d == "cuda" or d.startswith("cuda:"))


def hide_cuda(cuda, tensor_cls, module_cls, user=is_user_frame):
    """Show the script's code a TPU VM's ``torch.cuda`` (``cuda``: the module to patch)."""

    def for_user(name, sim_fn, host_fn):
        def fn(*args, **kwargs):
            if user():
                return sim_fn(*args, **kwargs)
            return host_fn(*args, **kwargs)

        fn.__name__ = name
        fn.__doc__ = getattr(host_fn, "__doc__", None)
        fn._tpuport_sim = True
        return fn

    def answer(value):
        return lambda *args, **kwargs: value

    for name, value in ANSWERS.items():
        if hasattr(cuda, name):
            setattr(cuda, name, for_user(name, answer(value), getattr(cuda, name)))
    for name in RAISING:
        if hasattr(cuda, name):
            setattr(cuda, name, for_user(name, no_driver, getattr(cuda, name)))
    if hasattr(cuda, "memory_stats"):
        setattr(cuda, "memory_stats", for_user("memory_stats", lambda *a, **k: {}, cuda.memory_stats))
    tensor_cls.cuda = for_user("cuda", no_driver, tensor_cls.cuda)
    module_cls.cuda = for_user("cuda", no_driver, module_cls.cuda)


def tpu_methods(torch, host):
    """``Tensor.is_tpu``, ``Tensor.tpu()`` and ``Module.tpu()``, as TorchTPU generates them."""

    def is_tpu(self):
        return self.device.type == host

    def tensor_tpu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        target = "tpu" if device is None else ("tpu:%d" % device if isinstance(device, int) else device)
        return self.to(target, non_blocking=non_blocking, memory_format=memory_format)

    def module_tpu(self, device=None):
        return self.to("tpu" if device is None else ("tpu:%d" % device if isinstance(device, int) else device))

    torch.Tensor.is_tpu = property(is_tpu)
    torch.Tensor.tpu = tensor_tpu
    torch.nn.Module.tpu = module_tpu
