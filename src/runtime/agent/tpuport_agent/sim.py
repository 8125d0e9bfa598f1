"""The sim target: a ported script runs unmodified with no TPU, with TPU semantics where they matter.

Installed by the agent right after ``import torch`` when the target is sim. It

- maps the "tpu" device onto the host (CUDA if present, else CPU): a ``TorchFunctionMode``
  rewrites device arguments ("tpu", "tpu:N", ``torch.device("tpu")``) in factories, ``.to``,
  ``Module.to`` and ``torch.device(...)``; ``torch.autocast("tpu")`` becomes the host's autocast;
  on a CPU-only host ``Tensor.pin_memory()`` returns the tensor (a TPU VM has a pinned
  allocator, a CPU-only torch build would ask for the NVIDIA driver);
- serves ``torch.tpu`` (the emulated public API of torch_tpu 0.2.0, package ``simtpu``) and makes
  ``torch.accelerator`` answer for one "tpu" device with the sim's memory figures;
- makes the ATen ops TorchTPU lacks fail with its message (``sim_ops``; ``--cpu-fallback`` runs
  them on the host and lists them instead);
- gives ``torch.compile`` TorchTPU's defaults (backend "tpu", ``dynamic=False``) and errors;
- registers the "tpu_dist" process-group backend (gloo underneath);
- emulates float32 matmul precision (``sim_precision``) and tracks HBM (``sim_memory``);
- applies the eager mode's semantics: debug = synchronous with index checks, defer-fuse = the
  host syncs that would end a fused region are counted per step.

- shows the script a TPU VM's ``torch.cuda`` (no driver) on a CUDA host, and gives tensors
  TorchTPU's ``is_tpu``/``.tpu()`` (``sim_cuda``).

Tensors report the host device (``x.device.type == "cpu"``); code that branches on
``device.type == "tpu"`` sees the host (see docs/sim.md).

This module only installs: the state the patches share lives in ``state`` (which the other sim
modules read, so none of them imports this one).
"""

import os
import sys
import time

from tpuport_agent import sim_cuda, sim_memory, sim_ops, sim_precision, simtpu, state

DYNAMIC_ERROR = (
    "TPU backend does not support torch.compile(..., dynamic=True, ...). Please run torch.compile() with "
    "dynamic=None or default dynamism i.e. torch.compile(model) and try again."
)
INDUCTOR_ERROR = (
    "torch.compile(..., backend='inductor') on TPU is experimental and does not yet have full TPU support; "
    "compilation is likely to fail with cryptic errors, e.g. https://github.com/google-pytorch/torch_tpu/issues/4300. "
    "Pass backend='tpu' or do not specify `backend` in torch.compile to use TorchTPU, which does have full TPU "
    "support. If you do want to run Inductor on TPU, you can bypass this error by passing "
    "options={'tpu_backend': 'pallas'}."
)
TAKE_CHECK = (
    "Unlike PyTorch on CUDA or CPU, TorchTPU doesn't by default check that the indices for take() are in range. "
    "Set the TORCH_TPU_ENABLE_DEBUG_CHECKS environment variable to \"1\" to enable this check, which incurs a "
    "performance penalty."
)


class SimDevice(str):
    """What ``torch.accelerator.current_accelerator()`` gives the script on the sim target: what
    TorchTPU gives, ``device(type='tpu')`` with ``.index`` None (so ``f"{acc}:{rank}"`` is
    ``tpu:0``, as FSDP2's device mesh builds it). A str, which torch accepts wherever a device
    goes and the sim maps to the host (a torch.device of type "tpu" cannot exist without
    TorchTPU)."""

    type = "tpu"
    index = None

    def __new__(cls):
        return str.__new__(cls, "tpu")

    def __repr__(self):
        return "device(type='tpu')"


def _is_tpu(d):
    import torch

    # An integer device is the current accelerator's device in torch 2.15 (`.to(local_rank)`,
    # `torch.device(0)`): tpu:i under TorchTPU, which maps it to the process's device.
    if isinstance(d, int) and not isinstance(d, bool):
        return True
    if isinstance(d, str):
        return d == "tpu" or d.startswith("tpu:")
    if isinstance(d, torch.device):
        return d.type == "tpu"
    return False


def _host(d):
    import torch

    if isinstance(d, str) and ":" in d and state.HOST != "cpu":
        return torch.device(state.HOST, int(d.split(":", 1)[1]))
    return torch.device(state.HOST)


def install(config, agent=None):
    """Install the sim for the agent's configuration (the chip record comes from Rust's table)."""
    import torch

    chip = config["chip"]
    state.CHIP = chip
    state.HBM = int(config.get("hbm_bytes") or chip["hbm_per_device"])
    state.HOST = "cuda" if torch.cuda.is_available() else "cpu"
    mode = config.get("mode", "strict")
    state.EAGER_MODE = {"strict": 1, "debug": 2, "defer-fuse": 0}.get(mode, 1)
    state.DEBUG_CHECKS = bool(config.get("debug_checks"))
    state.EXCESS_PRECISION = (bool(config.get("excess_precision"))
                              or "--xla_allow_excess_precision=true" in os.environ.get("XLA_FLAGS", ""))
    if state.EAGER_MODE == 2 and state.HOST == "cuda":
        os.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")

    state.HIDE_CUDA = state.HOST == "cuda" or os.environ.get("TPUPORT_SIM_HIDE_CUDA") == "1"
    _install_device_mapping(torch)
    sim_cuda.tpu_methods(torch, state.HOST)
    if state.HIDE_CUDA:
        sim_cuda.hide_cuda(torch.cuda, torch.Tensor, torch.nn.Module)
    sim_ops.install(torch, bool(config.get("cpu_fallback")))
    simtpu.install(torch)
    _install_accelerator(torch)
    _install_compile(torch)
    _install_distributed(torch)
    precision = (config.get("numerics") or {}).get("precision") or config.get("precision") or "default"
    sim_precision.install(torch, precision, state.HOST)
    sim_memory.install(torch, config, agent)
    if state.EAGER_MODE == 0 and agent is not None:
        agent.em.emit("log", stream="tpuport", line=(
            "sim: defer-fuse eager mode; each host sync (.item(), .cpu(), print, bool(tensor), ...) ends a fused "
            "region on a TPU; their count per step is in the sync events"))
    state.ACTIVE = True


# ---- the device -----------------------------------------------------------------------------


def _install_device_mapping(torch):
    from torch.overrides import TorchFunctionMode

    original_device = torch.device
    original_autocast_init = torch.amp.autocast_mode.autocast.__init__
    sdpa = torch.nn.functional.scaled_dot_product_attention
    take_like = {torch.take, torch.Tensor.take, torch.index_select, torch.Tensor.index_select,
                 torch.gather, torch.Tensor.gather, torch.nn.functional.embedding}

    pin_memory = torch.Tensor.pin_memory

    # Functions the mode must look at even without a device keyword: moves (device positional),
    # pinning, attention, index-taking ops (the TPU's out-of-range note). Every other call with no
    # `device=` goes straight through (the fast path: most of a training step's calls).
    special = {original_device, pin_memory, sdpa, torch.Tensor.to} | take_like

    class TpuOnHost(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func not in special and not (kwargs and "device" in kwargs) and \
                    getattr(func, "__name__", "") != "to":
                return func(*args, **(kwargs or {}))
            if func is pin_memory and state.HOST == "cpu":
                # A TPU VM pins host memory with TorchTPU's allocator; a CPU-only host has no
                # pinned allocator (torch would ask the NVIDIA driver): the tensor serves as
                # already pinned, which pin_memory() allows.
                return args[0]
            kwargs = dict(kwargs or {})
            d = kwargs.get("device")
            if state.HIDE_CUDA and (sim_cuda.is_cuda_string(d) or (
                    len(args) > 1 and sim_cuda.is_cuda_string(args[1]) and getattr(func, "__name__", "") == "to")) \
                    and sim_cuda.is_user_frame(2):
                raise RuntimeError(sim_cuda.NO_DRIVER)  # the script names CUDA: a TPU VM has no driver
            if d is not None and _is_tpu(d):
                kwargs["device"] = _host(d)
            if args and _is_tpu(args[0]) and (func is original_device or getattr(func, "__name__", "") == "to"):
                args = (_host(args[0]),) + tuple(args[1:])
            elif len(args) > 1 and _is_tpu(args[1]) and getattr(func, "__name__", "") == "to":
                args = (args[0], _host(args[1])) + tuple(args[2:])
            if func is sdpa:
                if sim_precision.emulating(args[0] if args else kwargs.get("query")):
                    return sim_precision.sdpa_math(torch, *args, **kwargs)
            if func in take_like:
                try:
                    return func(*args, **kwargs)
                except (IndexError, RuntimeError) as e:
                    if state.DEBUG_CHECKS or state.EAGER_MODE == 2 or "index" not in str(e).lower():
                        raise
                    raise type(e)("%s\n[tpuport sim] On a TPU this call would not fail: out-of-range indices "
                                  "read arbitrary values. %s (tpuport run --debug-checks)" % (e, TAKE_CHECK)) from None
            return func(*args, **kwargs)

    def autocast_init(self, device_type, *args, **kwargs):
        if device_type == "tpu":
            device_type = state.HOST
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
    if state.HOST == "cpu":
        # DataLoader(pin_memory=True) looks for a real accelerator and warns that pinning is off;
        # on a TPU VM it pins, and on the sim pinned and plain host memory are the same.
        import warnings

        warnings.filterwarnings("ignore", message="'pin_memory' argument is set as true but no accelerator")
    TpuOnHost().__enter__()


# ---- torch.accelerator ------------------------------------------------------------------------


def _install_accelerator(torch):
    """One "tpu" device per process, as TorchTPU shows it; memory from the sim's tracker."""
    acc = torch.accelerator
    host_sync = torch.cuda.synchronize if state.HOST == "cuda" else (lambda *a, **k: None)

    def _index(device):
        if device is None:
            return 0
        if isinstance(device, int):
            return device
        if isinstance(device, str):
            return int(device.split(":", 1)[1]) if ":" in device else 0
        return device.index or 0

    def set_device_index(device, /):
        # TorchTPU's answer in a process with one addressable device (a TPU VM process under
        # torchrun; xla-cpu): index 0 only.
        if _index(device) != 0:
            raise RuntimeError("Device index %d is out of bounds of the number of addressable devices 1"
                               % _index(device))

    def synchronize(device=None, /):
        host_sync()

    device = SimDevice()
    patches = {
        "current_accelerator": lambda check_available=False: device,
        "is_available": lambda check_available=True: True,
        "device_count": lambda: 1,
        "current_device_index": lambda: 0,
        "current_device_idx": lambda: 0,
        "set_device_index": set_device_index,
        "set_device_idx": set_device_index,
        "synchronize": synchronize,
        "memory_allocated": lambda device_index=None, /: sim_memory.TRACKER.allocated(),
        "max_memory_allocated": lambda device_index=None, /: sim_memory.TRACKER.max_allocated(),
        "memory_reserved": lambda device_index=None, /: sim_memory.TRACKER.allocated(),
        "max_memory_reserved": lambda device_index=None, /: sim_memory.TRACKER.max_allocated(),
        "memory_stats": lambda device_index=None, /: sim_memory.TRACKER.stats(),
        "reset_peak_memory_stats": lambda device_index=None, /: sim_memory.TRACKER.reset_peak(),
        "get_memory_info": lambda device_index=None, /: (max(state.HBM - sim_memory.TRACKER.allocated(), 0),
                                                          state.HBM),
        "empty_cache": lambda: None,
    }
    getframe = sys._getframe

    def for_user(name, sim_fn, host_fn):
        # torch's own callers (Dynamo's stream tracking, DDP, ...) must keep seeing the host as it
        # is; the script sees one "tpu" device.
        def fn(*args, **kwargs):
            mod = getframe(1).f_globals.get("__name__", "")
            if mod == "torch" or mod.startswith("torch."):
                return host_fn(*args, **kwargs)
            return sim_fn(*args, **kwargs)

        fn.__name__ = name
        fn.__doc__ = host_fn.__doc__
        return fn

    mem = getattr(acc, "memory", None)
    for name, fn in patches.items():
        for where in (acc, mem):
            if where is None or not hasattr(where, name):
                continue
            setattr(where, name, for_user(name, fn, getattr(where, name)))


# ---- torch.compile ----------------------------------------------------------------------------


def _install_compile(torch):
    """TorchTPU's torch.compile defaults on the host: backend "tpu", dynamic=False (so every new
    shape recompiles), and its errors for dynamic=True, Inductor and Inductor's ``mode``, raised
    as TorchTPU raises them: at the first call, by the backend, so Dynamo reports them as
    ``BackendCompilerFailed``."""
    import functools

    original = torch.compile

    def failing(name, error):
        def backend(gm, example_inputs, **kwargs):
            raise error

        backend.__name__ = name
        return backend

    @functools.wraps(original)
    def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, disable=False):
        selector = backend is None
        tpu_backend = backend is None or backend == "tpu"
        name = "_default_backend_selector" if selector else str(backend)
        if tpu_backend and dynamic:
            backend, mode = failing(name, NotImplementedError(DYNAMIC_ERROR)), None
        elif tpu_backend and mode is not None:
            backend = failing(name, TypeError("Unexpected keyword arguments: {'mode': %r}" % (mode,)))
            mode = None
        elif tpu_backend:
            backend, dynamic = "tpu", False
        elif backend == "inductor" and not (options or {}).get("tpu_backend") == "pallas":
            backend, mode, options = failing("inductor", RuntimeError(INDUCTOR_ERROR)), None, None
        kwargs = dict(fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable)
        if backend == "tpu" or callable(backend):
            kwargs.pop("options")  # TorchTPU's backend options have no meaning on the host
        if model is None:
            return lambda m: original(m, **kwargs)
        return original(model, **kwargs)

    compile._tpuport_sim = True
    torch.compile = compile


def register_compile_backend(torch):
    """`torch.compile(backend="tpu")` on the host: Dynamo's graph capture, then AOTAutograd with
    eager kernels (aot_eager), recording each graph's size and backend time. Called once Dynamo
    is imported."""
    from torch._dynamo import list_backends, lookup_backend, register_backend

    if "tpu" in list_backends(exclude_tags=()):
        return
    aot_eager = lookup_backend("aot_eager")

    def tpu(gm, example_inputs, **kwargs):
        if not state.COMPILED:
            state.COMPILED, state.EXCESS_LATCHED = True, state.EXCESS_PRECISION
        t = time.perf_counter()
        compiled = aot_eager(gm, example_inputs)
        try:
            from torch._guards import CompileContext

            cid = str(CompileContext.current_compile_id())
        except Exception:
            cid = ""
        state.GRAPH_INFO[cid] = {"graph_nodes": len(gm.graph.nodes), "backend_seconds": round(time.perf_counter() - t, 6)}
        return compiled

    register_backend(tpu, name="tpu")


# ---- torch.distributed ------------------------------------------------------------------------


def _install_distributed(torch):
    """Backend "tpu_dist" (and "tpu") as TorchTPU registers them, with gloo doing the work."""
    import torch.distributed as dist

    if not dist.is_available():
        return

    def create(*args, **kwargs):
        # Old-style creator (store, rank, size, timeout) or extended (dist_backend_opts, pg_options).
        if len(args) == 1 and hasattr(args[0], "store"):
            o = args[0]
            store, rank, size, timeout = o.store, o.group_rank, o.group_size, o.timeout
        else:
            store, rank, size, timeout = args[:4]
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    for name in ("tpu_dist", "tpu"):
        if name not in dist.Backend.backend_list:
            dist.Backend.register_backend(name, create, devices=["cpu", "cuda"] if state.HOST == "cuda" else ["cpu"])
    _install_ddp_device_ids(torch)


DDP_INDEX = ("DistributedDataParallel(device_ids=[%d]): on TorchTPU a process has one device, index 0, and "
             "DDP's forward fails with IndexError (torch's per-device stream table) once the inputs are on the "
             "device; pass device_ids=[0] (torch.accelerator.current_device_index()) or leave device_ids out")


def _install_ddp_device_ids(torch):
    """``DDP(model, device_ids=[i])`` of a model on the TPU. TorchTPU takes ``[0]`` (inputs go to
    the process's one device); with ``i`` > 0 its forward fails once the inputs are on the
    device (they go to ``tpu:i``, past torch's one-entry stream table). On a CPU host the sim's
    "tpu" is the CPU, where DDP refuses device_ids, so the sim drops them there, and warns that
    a TPU would fail for ``i`` > 0 (the sim cannot tell inputs on the TPU from inputs on the CPU)."""
    if state.HOST != "cpu":
        return
    import warnings

    from torch.nn.parallel import DistributedDataParallel as DDP

    original = DDP.__init__

    def init(self, module, device_ids=None, output_device=None, *args, **kwargs):
        if device_ids:
            devices = {p.device.type for p in module.parameters()}
            if devices == {"cpu"}:
                first = device_ids[0]
                index = first if isinstance(first, int) else getattr(first, "index", 0) or 0
                if index != 0:
                    warnings.warn("[tpuport sim] " + DDP_INDEX % index, UserWarning, stacklevel=2)
                device_ids, output_device = None, None
        return original(self, module, device_ids, output_device, *args, **kwargs)

    init.__wrapped__ = original
    init.__doc__ = original.__doc__
    DDP.__init__ = init


def memory():
    """Device memory as the sim sees it (for the agent's memory events)."""
    if sim_memory.TRACKER is None:
        return None
    return sim_memory.TRACKER.event_fields()
