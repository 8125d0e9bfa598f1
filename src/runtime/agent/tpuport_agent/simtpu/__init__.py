"""``torch.tpu`` on the sim target: every public name of torch_tpu 0.2.0, emulated on the host.

Mirrors ``torch_tpu/_internal/public_api.py`` (see torch_tpu_api.md §2): the experimental names
work against the sim's state (eager mode, precision, the simulated chip, the host RNG); the
device helpers that are internal on torch >= 2.11 raise TorchTPU's exact RuntimeError when user
code calls them (or warn once with TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS=1), so scripts meet that
break before the TPU does. Anything a host cannot emulate raises an error that names the limit.
"""

import contextlib
import dataclasses
import enum
import os
import sys
import time
import types
import warnings

from tpuport_agent import sim_precision, state

_torch = None

PUBLIC = [
    "EagerMode", "Event", "Precision", "Stream", "allow_excess_precision", "current_device", "current_stream",
    "default_generators", "default_stream", "device", "device_count", "device_of", "eager_mode",
    "get_amp_supported_dtype", "get_device_name", "get_device_properties", "get_rng_state", "initial_seed",
    "is_available", "is_initialized", "manual_seed", "manual_seed_all", "precision", "set_device",
    "set_eager_mode", "set_rng_state", "set_stream", "stream", "synchronize", "topology_aware_mesh",
]
SUBMODULES = ["compiler", "distributed", "ops", "optimizers", "pallas", "profiler"]
__all__ = PUBLIC + SUBMODULES


class EagerMode(enum.Enum):
    DEFER_AND_FUSE = 0
    DEFER_NEVER = 1
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 2


class Precision(enum.IntEnum):
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


# ---- the internal helpers (torch >= 2.11) -------------------------------------------------------

_INTERNAL_TEXT = ("{name} is internal to TorchTPU and can only be called by the PyTorch framework (torch and "
                  "torch_tpu). Use {prefer} instead.")
_warned = set()


def _framework_caller(depth):
    try:
        f = sys._getframe(depth)
    except ValueError:
        return False
    mod = f.f_globals.get("__name__", "")
    return mod == "torch" or mod.startswith("torch.") or mod.startswith("torch_tpu")


def _internal(name, prefer):
    if _torch is not None and _torch.compiler.is_compiling():
        return
    if _framework_caller(3):
        return
    if os.environ.get("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS", "").lower() in ("1", "true", "yes"):
        if name not in _warned:
            _warned.add(name)
            warnings.warn("<TorchTpu/ApiStage/InternalApi/> %s is internal to TorchTPU and may change or be removed "
                          "without notice. Use %s instead." % (name, prefer), UserWarning, stacklevel=3)
        return
    raise RuntimeError(_INTERNAL_TEXT.format(name=name, prefer=prefer))


def is_available():
    _internal("is_available", "torch.accelerator.is_available")
    return True


def device_count():
    _internal("device_count", "torch.accelerator.device_count")
    return 1


def current_device():
    _internal("current_device", "torch.accelerator.current_device_index")
    return 0


def set_device(device):
    _internal("set_device", "torch.accelerator.set_device_index")
    _torch.accelerator.set_device_index(device)


def synchronize(device=None):
    _internal("synchronize", "torch.accelerator.synchronize")
    _torch.accelerator.synchronize()


def set_stream(stream):
    _internal("set_stream", "torch.accelerator.set_stream")


def current_stream(device=None):
    _internal("current_stream", "torch.accelerator.current_stream")
    return default_stream(device)


class _DeviceContext:
    def __init__(self, idx):
        _internal("_DeviceContext", "torch.accelerator.device_index")
        self.idx = idx

    def __enter__(self):
        _torch.accelerator.set_device_index(self.idx if isinstance(self.idx, int) else 0)
        return self

    def __exit__(self, *exc):
        return False


device = _DeviceContext


def get_rng_state(device="tpu"):
    _internal("get_rng_state", "torch.accelerator.random.get_rng_state")
    return _generator().get_state()


def initial_seed():
    _internal("initial_seed", "torch.accelerator.random.initial_seed")
    return _generator().initial_seed()


# ---- experimental names -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _TpuDeviceProperties:
    name: str
    total_memory: int
    multi_processor_count: int = 1
    # Not in TorchTPU's dataclass: what the sim knows of the chip it simulates.
    bf16_flops: float = 0.0
    devices_per_chip: int = 1


def get_device_properties(device=None):
    chip = state.CHIP
    return _TpuDeviceProperties(name=chip["device_name"], total_memory=int(state.HBM), multi_processor_count=1,
                                bf16_flops=chip["bf16_flops_per_chip"] / chip["devices_per_chip"],
                                devices_per_chip=chip["devices_per_chip"])


def get_device_name(device=None):
    return state.CHIP["device_name"]


def get_amp_supported_dtype():
    t = _torch
    names = ["bfloat16", "bool", "complex64", "complex128", "float16", "float32", "float64", "float8_e4m3fn",
             "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int8", "int16", "int32", "int64",
             "uint8", "uint16", "uint32", "uint64"]
    return [getattr(t, n) for n in names if hasattr(t, n)]


def is_initialized():
    return True


def _generator():
    if state.HOST == "cuda":
        # current_device() first: it initialises CUDA, which is what fills default_generators
        # (indexing the tuple read before the call would index the empty one).
        i = _torch.cuda.current_device()
        return _torch.cuda.default_generators[i]
    return _torch.default_generator


def manual_seed(seed):
    _generator().manual_seed(int(seed))


def manual_seed_all(seed):
    manual_seed(seed)


def set_rng_state(new_state, device="tpu"):
    _generator().set_state(new_state)


class Stream:
    """TorchTPU's streams are placeholders (ops run in order); so are the sim's."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority
        self.stream_id = kwargs.get("stream_id", 1)

    def synchronize(self):
        _torch.accelerator.synchronize()

    def query(self):
        return True

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __repr__(self):
        return "<torch.tpu.Stream device=tpu:0 stream_id=%d>" % self.stream_id


class Event:
    """Host-measured timing: ``elapsed_time`` is milliseconds between the two records, after the
    work before each has finished."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False, device=None):
        if interprocess:
            raise NotImplementedError("torch.tpu.Event(interprocess=True) is not supported by TorchTPU")
        self.enable_timing = enable_timing
        self.time = None

    def record(self, stream=None):
        _torch.accelerator.synchronize()
        self.time = time.perf_counter()

    def synchronize(self):
        return None

    def query(self):
        return self.time is not None

    def wait(self, stream=None):
        return None

    def elapsed_time(self, end_event):
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.time is None or end_event.time is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event.time - self.time) * 1000.0


def default_stream(device=None):
    return Stream(device, stream_id=0)


@contextlib.contextmanager
def stream(s):
    """Currently non-functional in TorchTPU: the block runs as usual."""
    yield


@contextlib.contextmanager
def device_of(obj):
    yield


@contextlib.contextmanager
def set_eager_mode(mode):
    if _torch.compiler.is_compiling():
        raise RuntimeError("Attempt to trace forbidden callable torch.tpu.set_eager_mode")
    old = state.EAGER_MODE
    state.EAGER_MODE = _mode_value(mode)
    try:
        yield
    finally:
        state.EAGER_MODE = old


def _mode_value(mode):
    if isinstance(mode, EagerMode):
        return mode.value
    if isinstance(mode, int) and mode in (0, 1, 2):
        return mode
    raise TypeError("expected a torch.tpu.EagerMode, got %r" % (mode,))


@contextlib.contextmanager
def precision(mode):
    if not isinstance(mode, Precision):
        raise ValueError("expected to be one of 'PrecisionConfig.DEFAULT', 'PrecisionConfig.HIGH', or "
                         "'PrecisionConfig.HIGHEST', got %r" % (mode,))
    sim_precision.push(int(mode))
    try:
        yield
    finally:
        sim_precision.pop()


def topology_aware_mesh(mesh_shape, *, dcn_mesh_shape=None, allow_split_physical_axes=False,
                        contiguous_submeshes=False):
    warnings.warn("Use torch.tpu.distributed.topology_aware_mesh instead.", DeprecationWarning, stacklevel=2)
    from tpuport_agent.simtpu import distributed

    return distributed.topology_aware_mesh(mesh_shape, dcn_mesh_shape=dcn_mesh_shape,
                                           allow_split_physical_axes=allow_split_physical_axes,
                                           contiguous_submeshes=contiguous_submeshes)


# ---- private helpers the agent and users read ------------------------------------------------------


class _CacheStats:
    def __init__(self, reqs, hits, comps):
        self.num_cache_reqs, self.num_cache_hits, self.num_compilations = reqs, hits, comps


def _get_cache_stats():
    n = len(state.GRAPH_INFO)
    return _CacheStats(n, 0, n)


def _clear_cache():
    return None


def _latch_excess(value):
    """torch.tpu.allow_excess_precision = value: as on a TPU, compiled graphs keep the value they
    were compiled with; the sim warns when a change comes after the first compile."""
    if state.COMPILED and value != state.EXCESS_LATCHED:
        warnings.warn(
            "[tpuport sim] torch.tpu.allow_excess_precision changed to %r after the first compilation: graphs "
            "compiled so far keep %r (XLA option latching). Set it before the first torch.compile call, or clear "
            "the caches (torch.compiler.reset()) first." % (value, state.EXCESS_LATCHED), UserWarning, stacklevel=3)
    state.EXCESS_PRECISION = bool(value)


# ---- the module object: properties and lazy submodules --------------------------------------------


class _TpuModule(types.ModuleType):
    @property
    def eager_mode(self):
        return EagerMode(state.EAGER_MODE)

    @eager_mode.setter
    def eager_mode(self, mode):
        state.EAGER_MODE = _mode_value(mode)

    @property
    def allow_excess_precision(self):
        return state.EXCESS_PRECISION

    @allow_excess_precision.setter
    def allow_excess_precision(self, value):
        _latch_excess(bool(value))

    @property
    def default_generators(self):
        return (_generator(),)

    def __getattr__(self, name):
        if name in SUBMODULES:
            import importlib

            return importlib.import_module("tpuport_agent.simtpu." + name)
        if name.startswith("_"):
            raise AttributeError("module 'torch.tpu' has no attribute '%s' (a private TorchTPU helper the tpuport "
                                 "sim target does not emulate)" % name)
        raise AttributeError("module 'torch.tpu' has no attribute '%s'" % name)

    def __dir__(self):
        return sorted(set(__all__) | set(self.__dict__))


def install(torch):
    """Make this module ``torch.tpu`` (and its submodules ``torch.tpu.*``)."""
    global _torch
    _torch = torch
    me = sys.modules[__name__]
    me.__class__ = _TpuModule
    sys.modules["torch.tpu"] = me
    torch.tpu = me
    import importlib

    for name in SUBMODULES:
        sys.modules["torch.tpu." + name] = importlib.import_module("tpuport_agent.simtpu." + name)
    # TorchTPU maps torch's float32 matmul precision onto its own global (and reads it back).
    names = {"medium": 0, "high": 1, "highest": 2}

    def set_float32_matmul_precision(p):
        if p not in names:
            raise ValueError("expected to be one of 'highest', 'high', or 'medium', got '%s'" % (p,))
        sim_precision.set_global(names[p])

    def get_float32_matmul_precision():
        return {v: k for k, v in names.items()}.get(sim_precision._GLOBAL[0], "highest")

    torch.set_float32_matmul_precision = set_float32_matmul_precision
    torch.get_float32_matmul_precision = get_float32_matmul_precision
