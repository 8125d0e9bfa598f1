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


class _PybindEnum:
    """An enum as TorchTPU's C++ exposes them (pybind11): ``int()`` gives the number, a member
    equals only itself (``Precision.HIGH == 1`` is False), ``Cls(n)`` looks a member up,
    ``__members__`` lists them, and the class cannot be iterated."""

    def __new__(cls, value, name=None):
        if name is None:
            try:
                return cls._by_value[int(value)]
            except (KeyError, TypeError, ValueError):
                raise ValueError("%r is not a valid %s" % (value, cls.__name__)) from None
        self = object.__new__(cls)
        self.name, self.value = name, value
        return self

    @classmethod
    def _define(cls, **members):
        cls._by_value, cls.__members__ = {}, {}
        for name, value in members.items():
            member = cls(value, name)
            cls._by_value[value] = member
            cls.__members__[name] = member
            setattr(cls, name, member)

    def __int__(self):
        return self.value

    __index__ = __int__

    def __eq__(self, other):
        return type(other) is type(self) and other.value == self.value

    def __hash__(self):
        return hash((type(self).__name__, self.value))

    def __repr__(self):
        return "<%s.%s: %d>" % (type(self).__name__, self.name, self.value)

    def __str__(self):
        return "%s.%s" % (type(self).__name__, self.name)


class _EagerMode(_PybindEnum):
    """TorchTPU's raw eager-mode enum (``execution_mode_impl._EagerMode``)."""


_EagerMode._define(DEFER_AND_FUSE=0, DEFER_NEVER=1, DEFER_NEVER_AND_LAUNCH_BLOCKING=2)


class EagerMode(enum.Enum):
    """``torch.tpu.EagerMode``: its values are the raw ``_EagerMode`` members, as in TorchTPU
    (``EagerMode.DEFER_NEVER.value`` is ``_EagerMode.DEFER_NEVER``; ``int()`` of it is 1)."""

    DEFER_AND_FUSE = _EagerMode.DEFER_AND_FUSE
    DEFER_NEVER = _EagerMode.DEFER_NEVER
    DEFER_NEVER_AND_LAUNCH_BLOCKING = _EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING

    @classmethod
    def of(cls, number):
        return cls(_EagerMode(number))


class Precision(_PybindEnum):
    """``torch.tpu.Precision`` (``precision_impl.Precision``, a pybind11 enum)."""


Precision._define(DEFAULT=0, HIGH=1, HIGHEST=2)


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
    if _LEGACY_DEVICE_APIS:
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


def get_device_properties(device=None):
    """TorchTPU's fields only (a script reading more would fail on a TPU)."""
    chip = state.CHIP
    return _TpuDeviceProperties(name=chip["device_name"], total_memory=int(state.HBM), multi_processor_count=1)


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


STREAMS_TEXT = ("Streams and Events are not fully implemented in TorchTPU. Please file a feature request "
                "describing your use case.")


class Stream:
    """TorchTPU's streams are placeholders (ops run in order); so are the sim's. What TorchTPU
    has not implemented (``query``, ``priority_range``) raises its error."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = device
        self.priority = priority
        self.stream_id = kwargs.get("stream_id", 1)

    def synchronize(self):
        _torch.accelerator.synchronize()

    def query(self):
        raise NotImplementedError(STREAMS_TEXT)

    def priority_range(self):
        raise NotImplementedError(STREAMS_TEXT)

    def wait_stream(self, stream):
        return None

    def wait_event(self, event):
        return None

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def __repr__(self):
        return "<torch.tpu.TpuStream>"


class Event:
    """Host-measured timing, as TorchTPU's: ``elapsed_time`` is milliseconds between the two
    events completing. An event completes when it (or an event recorded after it) is
    synchronized; ``elapsed_time`` before that raises TorchTPU's error."""

    _recorded = []  # events in record order, for "a later event's synchronize completes it"

    def __init__(self, enable_timing=False, blocking=False, interprocess=False, external=False, device=None):
        self.enable_timing = enable_timing
        self.time = None
        self.completed = False

    def ipc_handle(self):
        raise NotImplementedError(STREAMS_TEXT)

    @classmethod
    def from_ipc_handle(cls, device, handle):
        raise NotImplementedError(STREAMS_TEXT)

    def record(self, stream=None):
        _torch.accelerator.synchronize()
        self.time = time.perf_counter()
        self.completed = False
        Event._recorded.append(self)
        del Event._recorded[:-64]
        return self

    def synchronize(self):
        if self.time is None:
            return None
        for e in Event._recorded:
            e.completed = True
            if e is self:
                break
        return None

    def query(self):
        return self.time is not None

    def wait(self, stream=None):
        return None

    def elapsed_time(self, end_event):
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        if self.time is None or end_event.time is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.completed and end_event.completed):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
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
        return int(mode.value)
    if isinstance(mode, _EagerMode):
        return int(mode)
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
        return EagerMode.of(state.EAGER_MODE)

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


# TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS, read once when torch.tpu is installed, as TorchTPU reads it
# (``env.get_bool_env_once`` at import): setting it later changes nothing.
_LEGACY_DEVICE_APIS = False


def install(torch):
    """Make this module ``torch.tpu`` (and its submodules ``torch.tpu.*``)."""
    global _torch, _LEGACY_DEVICE_APIS
    _torch = torch
    _LEGACY_DEVICE_APIS = os.environ.get("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS", "").lower() in ("1", "true", "yes")
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
