"""The sim target's device mapping: a ported script's "tpu" device runs on the host.

A ``TorchFunctionMode`` rewrites device arguments ("tpu", "tpu:N", ``torch.device("tpu")``) in
factory calls, ``Tensor.to``/``Module.to`` and ``torch.device(...)`` itself to the host device
(CUDA if present, else CPU), and ``torch.autocast("tpu")`` to the host's autocast. Tensors then
report the host device (``x.device.type == "cpu"``).

This module holds the device mapping only; TorchTPU's API surface (``torch.tpu``), precision
emulation and the HBM tracker belong to the sim shim proper.
"""

ACTIVE = False
HOST = "cpu"


def _is_tpu(d):
    import torch

    if isinstance(d, str):
        return d == "tpu" or d.startswith("tpu:")
    if isinstance(d, torch.device):
        return d.type == "tpu"
    return False


def _host(d):
    import torch

    if isinstance(d, str) and ":" in d and HOST != "cpu":
        return torch.device(HOST, int(d.split(":", 1)[1]))
    return torch.device(HOST)


def install(config, agent=None):
    global ACTIVE, HOST
    import torch
    from torch.overrides import TorchFunctionMode

    HOST = "cuda" if torch.cuda.is_available() else "cpu"
    original_device = torch.device
    original_autocast_init = torch.amp.autocast_mode.autocast.__init__

    class TpuOnHost(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            d = kwargs.get("device")
            if d is not None and _is_tpu(d):
                kwargs["device"] = _host(d)
            if args and _is_tpu(args[0]) and (func is original_device or getattr(func, "__name__", "") == "to"):
                args = (_host(args[0]),) + tuple(args[1:])
            elif len(args) > 1 and _is_tpu(args[1]) and getattr(func, "__name__", "") == "to":
                args = (args[0], _host(args[1])) + tuple(args[2:])
            return func(*args, **kwargs)

    def autocast_init(self, device_type, *args, **kwargs):
        if device_type == "tpu":
            device_type = HOST
        return original_autocast_init(self, device_type, *args, **kwargs)

    torch.amp.autocast_mode.autocast.__init__ = autocast_init
    _module_to = torch.nn.Module.to

    def module_to(self, *args, **kwargs):
        if args and _is_tpu(args[0]):
            args = (_host(args[0]),) + tuple(args[1:])
        if _is_tpu(kwargs.get("device")):
            kwargs["device"] = _host(kwargs["device"])
        return _module_to(self, *args, **kwargs)

    torch.nn.Module.to = module_to
    TpuOnHost().__enter__()
    ACTIVE = True


def register_compile_backend(torch):
    """`torch.compile(backend="tpu")` on the host: Dynamo's graph capture, run with aot_eager
    (TorchTPU's own backend needs a TPU). Called once Dynamo is imported."""
    from torch._dynamo import list_backends, lookup_backend, register_backend

    if "tpu" in list_backends(exclude_tags=()):
        return
    aot_eager = lookup_backend("aot_eager")

    def tpu(gm, example_inputs, **kwargs):
        return aot_eager(gm, example_inputs)

    register_backend(tpu, name="tpu")


def memory():
    """Device memory as the sim sees it (not tracked in this module)."""
    return None
