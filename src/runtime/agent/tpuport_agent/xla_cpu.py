"""The xla-cpu target: the script runs on TorchTPU 0.2.0 itself, with XLA:CPU in the TPU's place.

tpuport's launcher has already set TorchTPU's environment: ``TPU_LIBRARY_PATH`` names tpuport's
PJRT shim (TorchTPU loads it as "the TPU plugin"; it forwards to a CPU PJRT plugin with one
device), ``TPU_SKIP_MDS_QUERY=1``, the eager mode's switches. Here, in the script's process:

- ``prepare`` (before anything imports torch): TorchTPU's folder goes on ``sys.path``, so
  ``import torch`` autoloads it as on a TPU VM; faulthandler shows where an XLA:CPU abort hit.
- ``install`` (right after ``import torch``): registers the device, as TorchTPU does when its
  PCI scan finds a TPU (it finds none here), and creates the PJRT client, so that
  ``torch.accelerator`` answers from the script's first line as a one-device TPU VM process does
  (``is_available()`` True, ``device_count()`` 1, ``current_accelerator()`` ``tpu``). Then the
  emulation this target adds to TorchTPU: XLA:CPU's gaps (``xla_cpu_gaps``), the TPU's float32
  matmul precision (``sim_precision`` on TorchTPU's kernels; XLA:CPU computes float32 dots in
  full float32), and HBM, counted from the live ``tpu`` tensors (``sim_memory``; the CPU
  plugin keeps no allocator statistics) against the chip's capacity.

Everything else is TorchTPU's: the device and tensors, its op coverage and errors, eager modes,
``torch.compile(backend="tpu")`` and its compile cache.
"""

import os
import sys

from tpuport_agent import sim_memory, sim_precision, state, xla_cpu_gaps

TCMALLOC = r"<TorchTpu/Performance/TcMalloc/>"
# The compile-cache counters after the agent's own first op (the script's are counted from here).
_CACHE_BASE = None


def prepare(config):
    """Before the script (and torch) is imported."""
    import faulthandler
    import warnings

    for p in reversed(config.get("python_path") or []):
        if p not in sys.path:
            sys.path.insert(0, p)
    # XLA:CPU is no TPU VM: TorchTPU's advice to preload tcmalloc for host speed says nothing here.
    warnings.filterwarnings("ignore", message=TCMALLOC)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    faulthandler.enable()


def install(torch, config, agent):
    """Right after ``import torch``."""
    global _CACHE_BASE
    loader = sys.modules.get("torch_tpu._loader")
    if loader is None:
        import torch_tpu._loader as loader  # autoload is off in this process: load it now
    if not getattr(loader, "_DEVICE_INITIALIZED", False):
        loader._init_device("tpu")
    # The PJRT client, now: before it exists TorchTPU answers device questions from the PCI bus.
    torch.empty(1, device="tpu").fill_(0)
    _CACHE_BASE = _raw_cache_stats(torch)

    chip = config["chip"]
    state.CHIP = chip
    state.HBM = int(config.get("hbm_bytes") or chip["hbm_per_device"])
    state.XLA_CPU = True
    _chip_is(chip)
    emit = agent.em.emit if agent is not None else None
    xla_cpu_gaps.install(torch, emit)
    precision = (config.get("numerics") or {}).get("precision") or "default"
    from torch_tpu._internal.precision import precision_impl

    sim_precision.install(torch, precision, "tpu", key="PrivateUse1",
                          level=lambda: int(precision_impl._get_precision()))
    sim_memory.install(torch, config, agent, device_type="tpu")
    _install_memory_api(torch)


def _chip_is(chip):
    """TorchTPU reads the chip from the PCI bus (name, HBM and FLOPs tables, device count and
    topology); XLA:CPU is on no bus, so it answers as one chip of the chosen kind (``--chip``,
    default v5e): ``get_device_name()``, ``get_device_properties()``, the HBM per device,
    ``torch.tpu.distributed.set_tpu_launch_env()``. (The device itself is initialised already.)"""
    from torch_tpu._internal.utils import hardware

    name = chip["device_name"]
    topologies = {int(n): t for n, t in (chip.get("topologies") or {}).items()}
    hardware.get_tpu_device_name = lambda: name
    hardware._scan_pci_tpus = lambda: (1, topologies)


def on_dynamo(torch):
    xla_cpu_gaps.on_dynamo(torch)


def _raw_cache_stats(torch):
    try:
        s = torch.tpu._get_cache_stats()
        return (int(s.num_cache_reqs), int(s.num_cache_hits), int(s.num_compilations))
    except Exception:
        return None


def cache_stats(torch):
    """TorchTPU's compile-cache counters for the script (the agent's first op left out)."""
    now = _raw_cache_stats(torch)
    if now is None:
        return None
    base = _CACHE_BASE or (0, 0, 0)
    return {"requests": now[0] - base[0], "hits": now[1] - base[1], "compilations": now[2] - base[2]}


def _install_memory_api(torch):
    """torch.accelerator's memory calls read the count of live tpu tensors (TorchTPU asks the
    plugin's allocator, which the CPU plugin does not have, and warns)."""
    acc = torch.accelerator
    tracker = sim_memory.TRACKER
    patches = {
        "memory_allocated": lambda device_index=None, /: tracker.allocated(),
        "max_memory_allocated": lambda device_index=None, /: tracker.max_allocated(),
        "memory_reserved": lambda device_index=None, /: tracker.allocated(),
        "max_memory_reserved": lambda device_index=None, /: tracker.max_allocated(),
        "memory_stats": lambda device_index=None, /: tracker.stats(),
        "reset_peak_memory_stats": lambda device_index=None, /: tracker.reset_peak(),
        "get_memory_info": lambda device_index=None, /: (max(state.HBM - tracker.allocated(), 0), state.HBM),
    }
    mem = getattr(acc, "memory", None)
    for name, fn in patches.items():
        for where in (acc, mem):
            if where is not None and hasattr(where, name):
                fn.__name__ = name
                setattr(where, name, fn)


def memory():
    """Device memory for the agent's memory events."""
    if sim_memory.TRACKER is None:
        return None
    return sim_memory.TRACKER.event_fields()
