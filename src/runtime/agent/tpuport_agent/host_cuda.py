"""A CUDA script as written, on a machine without CUDA: the host target's ``--cuda-on-cpu``.

``tpuport check`` runs the original script as the reference, and a CUDA script must run on a
CPU-only laptop for that. Installed right after ``import torch`` (only when torch sees no CUDA),
it makes the script's CUDA the CPU:

- ``"cuda"``, ``"cuda:N"``, ``torch.device("cuda")``, a bare index (``.to(local_rank)``) in
  factories, ``.to``, ``Module.to`` and ``torch.load``'s ``map_location`` become the CPU; ``x.cuda()`` and ``model.cuda()`` stay on the CPU; ``x.pin_memory()`` returns ``x``;
- ``torch.cuda`` answers the script's calls for one device: available, count 1, index 0,
  ``synchronize`` and ``empty_cache`` do nothing, memory figures 0, events timed on the host,
  streams in order (torch's own callers keep the host's answers: no CUDA);
- ``torch.autocast("cuda", dtype)`` is the CPU's autocast with that dtype, ``GradScaler("cuda")``
  the CPU's scaler; ``init_process_group("nccl")`` uses gloo; ``DDP(model, device_ids=[i])`` of
  a model on the CPU (its CUDA) drops ``device_ids``/``output_device``, which DDP refuses for a
  CPU module (a CUDA script's DDP passes its GPU's index);
- ``torch.accelerator`` answers as on a one-GPU CUDA machine (the portable port's calls:
  ``current_accelerator()`` is ``cuda`` even with ``check_available=True``, so the port takes
  the path the original takes on CUDA and its tensors go where the original's go, the CPU;
  available, one device, index 0, memory figures 0), and ``torch.Event()``/``torch.Stream()`` without a device are the host's.

Numbers are the CPU's float32 (no TF32), which is what the comparison wants as its reference.
"""

import contextlib
import time

HOST = "cpu"


def _is_cuda(d):
    import torch

    if isinstance(d, int) and not isinstance(d, bool):
        return True  # a bare index names a CUDA device (`x.to(local_rank)`, `device=0`)
    if isinstance(d, str):
        return d == "cuda" or d.startswith("cuda:")
    if isinstance(d, torch.device):
        return d.type == "cuda"
    return False


def install(torch):
    if torch.cuda.is_available():
        return False  # the script's CUDA is real: nothing to map
    _accelerator(torch)  # first: its `cuda` device is made before the device mode maps "cuda"
    _devices(torch)
    _cuda_api(torch)
    _amp(torch)
    _distributed(torch)
    return True


def _devices(torch):
    from torch.overrides import TorchFunctionMode

    original_device = torch.device
    pin_memory = torch.Tensor.pin_memory
    tensor_cuda = torch.Tensor.cuda
    cpu = torch.device(HOST)

    class CudaOnCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func is pin_memory or func is tensor_cuda:
                return args[0]
            kwargs = dict(kwargs or {})
            if func is original_device and (
                (args and isinstance(args[0], str) and _is_cuda(args[0]))
                or _is_cuda(kwargs.get("type"))
            ):
                return cpu  # torch.device("cuda", i): the host has one device
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = cpu
            if args and _is_cuda(args[0]) and (func is original_device or getattr(func, "__name__", "") == "to"):
                args = (cpu,) + tuple(args[1:])
            elif len(args) > 1 and _is_cuda(args[1]) and getattr(func, "__name__", "") == "to":
                args = (args[0], cpu) + tuple(args[2:])
            return func(*args, **kwargs)

    module_to = torch.nn.Module.to

    def to(self, *args, **kwargs):
        if args and _is_cuda(args[0]):
            args = (cpu,) + tuple(args[1:])
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = cpu
        return module_to(self, *args, **kwargs)

    torch.nn.Module.to = to
    torch.nn.Module.cuda = lambda self, device=None: self
    load = torch.load

    def load_on_cpu(f, map_location=None, *args, **kwargs):
        if _is_cuda(map_location):
            map_location = cpu  # a checkpoint mapped to the CUDA device: the host's
        return load(f, map_location, *args, **kwargs)

    torch.load = load_on_cpu
    CudaOnCpu().__enter__()


class Event:
    """``torch.cuda.Event`` timed on the host (the CPU runs ops as they are called)."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, **kwargs):
        self.enable_timing = enable_timing
        self.time = None

    def record(self, stream=None):
        self.time = time.perf_counter()

    def synchronize(self):
        return None

    def wait(self, stream=None):
        return None

    def query(self):
        return self.time is not None

    def elapsed_time(self, end_event):
        if self.time is None or end_event.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.time - self.time) * 1000.0


class Stream:
    """``torch.cuda.Stream``: the CPU runs everything in order."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device

    def synchronize(self):
        return None

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True


class _Properties:
    name = "CPU (tpuport: CUDA mapped to the host)"
    major, minor = 8, 0
    multi_processor_count = 1

    @property
    def total_memory(self):
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _cuda_api(torch):
    cuda = torch.cuda
    nothing = lambda *a, **k: None  # noqa: E731
    zero = lambda *a, **k: 0  # noqa: E731
    patches = {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": nothing,
        "synchronize": nothing,
        "empty_cache": nothing,
        "init": nothing,
        "is_initialized": lambda: True,
        "get_device_name": lambda device=None: _Properties.name,
        "get_device_properties": lambda device=None: _Properties(),
        "get_device_capability": lambda device=None: (_Properties.major, _Properties.minor),
        "is_bf16_supported": lambda including_emulation=True: True,
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "memory_reserved": zero,
        "max_memory_reserved": zero,
        "reset_peak_memory_stats": nothing,
        "reset_max_memory_allocated": nothing,
        "memory_stats": lambda *a, **k: {},
        "mem_get_info": lambda device=None: (_Properties().total_memory, _Properties().total_memory),
        "manual_seed": nothing,
        "manual_seed_all": nothing,
        "Event": Event,
        "Stream": Stream,
        "current_stream": lambda device=None: Stream(),
        "default_stream": lambda device=None: Stream(),
        "stream": lambda s=None: contextlib.nullcontext(),
    }
    for name, fn in patches.items():
        host = getattr(cuda, name, None)
        if isinstance(fn, type) or host is None:
            setattr(cuda, name, fn)
        else:
            setattr(cuda, name, _for_script(fn, host, name))


def _accelerator(torch):
    """``torch.accelerator`` as a one-GPU CUDA machine answers the script (torch's own callers
    keep the host's answers), so a portable port takes CUDA's path here as on its machine."""
    acc = torch.accelerator
    cuda = torch.device("cuda")
    nothing = lambda *a, **k: None  # noqa: E731
    zero = lambda *a, **k: 0  # noqa: E731
    patches = {
        "current_accelerator": lambda check_available=False: cuda,
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device_index": lambda: 0,
        "current_device_idx": lambda: 0,
        "set_device_index": nothing,
        "set_device_idx": nothing,
        "device_index": lambda device=None: contextlib.nullcontext(),
        "synchronize": nothing,
        "empty_cache": nothing,
        "memory_allocated": zero,
        "max_memory_allocated": zero,
        "memory_reserved": zero,
        "max_memory_reserved": zero,
        "reset_peak_memory_stats": nothing,
        "reset_accumulated_memory_stats": nothing,
        "memory_stats": lambda *a, **k: {},
        "get_memory_info": lambda *a: (_Properties().total_memory, _Properties().total_memory),
        "current_stream": lambda *a: Stream(),
        "set_stream": nothing,
    }
    for name, fn in patches.items():
        host = getattr(acc, name, None)
        if host is not None:
            setattr(acc, name, _for_script(fn, host, name))
    torch.Event = _for_script_class(torch.Event, Event)
    torch.Stream = _for_script_class(torch.Stream, Stream)


def _for_script_class(original, host):
    """``torch.Event()``/``torch.Stream()`` without a device (or on "cuda") made by the script:
    the host's; torch's own (Dynamo subclasses ``torch.Event``) stay as they are."""
    from tpuport_agent.sim_cuda import is_user_frame

    class ForScript(original):
        def __new__(cls, *args, **kwargs):
            device = args[0] if args else kwargs.get("device")
            if cls is ForScript and (device is None or _is_cuda(device)) and is_user_frame():
                kwargs.pop("device", None)
                return host(**kwargs)
            return original.__new__(cls, *args, **kwargs)

    ForScript.__name__ = ForScript.__qualname__ = original.__name__
    return ForScript


def _for_script(fn, host, name):
    """The script's calls get the CPU's CUDA; torch's own callers (the optimizers' CUDA-graph
    check, Dynamo, DDP) keep the host as it is. A function object of its own per name: Dynamo
    keys its trace rules by function object."""
    from tpuport_agent.sim_cuda import is_user_frame

    def patched(*args, **kwargs):
        if is_user_frame():
            return fn(*args, **kwargs)
        return host(*args, **kwargs)

    patched.__name__ = patched.__qualname__ = name
    patched.__doc__ = getattr(host, "__doc__", None)
    return patched


def _amp(torch):
    autocast_init = torch.amp.autocast_mode.autocast.__init__

    def init(self, device_type, *args, **kwargs):
        return autocast_init(self, HOST if device_type == "cuda" else device_type, *args, **kwargs)

    torch.amp.autocast_mode.autocast.__init__ = init
    scaler_init = torch.amp.GradScaler.__init__

    def scaler(self, device="cuda", *args, **kwargs):
        return scaler_init(self, HOST if device == "cuda" else device, *args, **kwargs)

    torch.amp.GradScaler.__init__ = scaler


def _distributed(torch):
    import torch.distributed as dist

    if not dist.is_available():
        return
    original = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if isinstance(backend, str) and "nccl" in backend:
            backend = "gloo"
        return original(backend, *args, **kwargs)

    dist.init_process_group = init_process_group

    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp_init = DDP.__init__

    def ddp(self, module, device_ids=None, output_device=None, *args, **kwargs):
        # The script's GPU index (`device_ids=[local_rank]`) names the CPU here, and DDP takes a
        # CPU module only without device_ids: what it does for the module on one device.
        if (device_ids and all(_is_cuda(d) for d in device_ids)
                and {p.device.type for p in module.parameters()} == {HOST}):
            device_ids, output_device = None, None
        return ddp_init(self, module, device_ids, output_device, *args, **kwargs)

    ddp.__wrapped__ = ddp_init
    ddp.__doc__ = ddp_init.__doc__
    DDP.__init__ = ddp
