"""HBM on the sim target: live bytes of the tensors on the emulated device, with peak, compared
with the chip's capacity.

On a CUDA host the CUDA allocator's own counters are used (free). On a CPU host a
``TorchDispatchMode`` sees every op's outputs and counts each new storage once (by its data
pointer) until ``weakref.finalize`` reports it freed. That costs Python code on every op, so by
default ("sampled") it runs for the first steps and then one step in every ``SAMPLE_EVERY``;
before each sampled step a scan of the live tensors (``gc``) re-establishes the baseline, and the
peak of the sampled steps stands for the steps between (training steps repeat). ``full`` tracks
every op (exact, slower); ``off`` tracks nothing. ``--strict-hbm`` implies ``full`` and raises
``torch.OutOfMemoryError`` when the live bytes pass the capacity, as the device would.
"""

import gc
import weakref

from tpuport_agent import state

TRACKER = None
SAMPLE_FIRST = 3
SAMPLE_EVERY = 25
OOM_TEXT = "the TPU ran out of memory while awaiting the materialization of value"


class Tracker:
    def __init__(self, torch, capacity, policy, strict, host, agent, device_type=None):
        self.torch = torch
        # xla-cpu: only storages on this device type count (the script's CPU tensors do not).
        self.device_type = device_type
        self.capacity = capacity
        self.policy = policy
        self.strict = strict
        self.host = host
        self.agent = agent
        self.live = 0
        self.peak = 0
        self.allocations = 0
        self.gen = 0
        self.storages = {}
        self.mode = None
        self.active = False
        self.forecast_sent = False

    # -- counting --------------------------------------------------------------------------

    def _free(self, gen, ptr):
        if gen != self.gen:
            return
        n = self.storages.pop(ptr, None)
        if n is not None:
            self.live -= n

    def add_storage(self, st):
        if self.host == "cuda":
            # --strict-hbm on a CUDA host: CUDA's allocator knows what is live, exactly.
            self.allocations += 1
            self.live = int(self.torch.cuda.memory_allocated())
            self.peak = max(self.peak, self.live)
            if self.live > self.capacity:
                self.over_capacity()
            return
        try:
            if self.device_type is not None and st.device.type != self.device_type:
                return
            ptr = st.data_ptr()
            n = st.nbytes()
        except Exception:
            return
        if n == 0 or ptr in self.storages:
            return
        self.storages[ptr] = n
        self.live += n
        self.allocations += 1
        try:
            weakref.finalize(st, self._free, self.gen, ptr)
        except TypeError:
            pass
        if self.live > self.peak:
            self.peak = self.live
            if self.peak > self.capacity:
                self.over_capacity()

    def over_capacity(self):
        if not self.forecast_sent:
            self.forecast_sent = True
            if self.agent is not None:
                self.agent.em.emit("memory", step=self.agent.step, forecast=True, **self.event_fields())
                self.agent.em.emit("warning", category="tpuport", file="", line=0, message=(
                    "%s: HBM in use (%s) exceeds the %s's %s per device; this step would not fit on the TPU"
                    % (self.who(), _fmt(self.live), self.chip_name(), _fmt(self.capacity))))
        if self.strict:
            raise self.torch.OutOfMemoryError(
                "%s (tpuport %s: %s of tensors live, the %s has %s per device; --strict-hbm)"
                % (OOM_TEXT, self.who(), _fmt(self.live), self.chip_name(), _fmt(self.capacity)))

    def who(self):
        return "xla-cpu" if self.device_type is not None else "sim"

    def chip_name(self):
        return state.CHIP["device_name"]

    def scan(self):
        """Baseline: the storages of every tensor the program holds right now."""
        self.gen += 1
        self.storages = {}
        self.live = 0
        Tensor = self.torch.Tensor
        for obj in gc.get_objects():
            # type(), not isinstance(): some objects' __class__ is a property that warns.
            if issubclass(type(obj), Tensor):
                try:
                    self.add_storage(obj.untyped_storage())
                except Exception:
                    pass

    # -- the dispatch mode ------------------------------------------------------------------

    def start(self):
        # On a CUDA host the allocator's own statistics are exact; ops are watched only to
        # raise OutOfMemoryError at the allocation that passes the HBM (--strict-hbm).
        if self.active or (self.host == "cuda" and not self.strict):
            return
        if self.mode is None:
            self.mode = _make_mode(self.torch, self)
        self.mode.__enter__()
        self.active = True

    def stop(self):
        if self.active:
            self.mode.__exit__(None, None, None)
            self.active = False

    def on_step(self, step):
        """Called at the end of each step: start or stop sampling for the next one."""
        if self.host == "cuda":
            self._read_cuda()
            return
        if self.policy != "sampled":
            return
        sample_next = (step + 1) <= SAMPLE_FIRST or (step + 1) % SAMPLE_EVERY == 0
        if sample_next and not self.active:
            self.scan()
            self.start()
        elif not sample_next and self.active:
            self.stop()

    def _read_cuda(self):
        cuda = self.torch.cuda
        self.live = int(cuda.memory_allocated())
        self.peak = max(self.peak, int(cuda.max_memory_allocated()))
        if self.peak > self.capacity:
            self.over_capacity()

    # -- reporting --------------------------------------------------------------------------

    def refresh(self):
        """On a CUDA host, read live and peak from CUDA's allocator now (exact there)."""
        if self.host == "cuda":
            self._read_cuda()

    def allocated(self):
        """Bytes live now."""
        self.refresh()
        return self.live

    def max_allocated(self):
        """The peak since the last reset."""
        self.refresh()
        return self.peak

    def reset_peak(self):
        if self.host == "cuda":
            self.torch.cuda.reset_peak_memory_stats()
            self.live = int(self.torch.cuda.memory_allocated())
        self.peak = self.live

    def stats(self):
        import collections

        self.refresh()
        return collections.OrderedDict([
            ("allocated_bytes.all.current", self.live), ("allocated_bytes.all.peak", self.peak),
            ("allocation.all.allocated", self.allocations), ("reserved_bytes.all.current", self.live),
            ("reserved_bytes.all.peak", self.peak),
        ])

    def event_fields(self):
        self.refresh()
        return {"allocated": self.live, "reserved": self.live, "peak": self.peak, "hbm_capacity": self.capacity,
                "hbm_track": self.policy if self.host != "cuda" else "cuda"}


def _make_mode(torch, tracker):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    Tensor = torch.Tensor

    class HbmTracker(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            # Dynamo compiles as usual; the compiled graph's ops are counted when they run.
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if type(t) is Tensor or isinstance(t, Tensor):
                    try:
                        st = t.untyped_storage()
                    except (NotImplementedError, RuntimeError):
                        continue  # no storage (sparse, some subclasses)
                    tracker.add_storage(st)  # may raise OutOfMemoryError (--strict-hbm)
            return out

    return HbmTracker()


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%.1f %s" % (n, unit)) if unit != "B" else "%d B" % n
        n /= 1024.0


def install(torch, config, agent, device_type=None):
    global TRACKER
    strict = bool(config.get("strict_hbm"))
    policy = config.get("hbm_track") or "sampled"
    if strict:
        policy = "full"
    host = "cpu" if device_type is not None else state.HOST
    TRACKER = Tracker(torch, state.HBM, policy, strict, host, agent, device_type)
    if policy in ("full", "sampled"):
        TRACKER.scan()
        TRACKER.start()
