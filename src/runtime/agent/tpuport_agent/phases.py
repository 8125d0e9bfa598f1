"""Where a step's time goes, without a profiler: data (the DataLoader iterator's next batch),
forward (from the outermost module call until the next phase starts, so a loss computed
with ``F.cross_entropy`` after the model counts as forward), backward (``torch.autograd.backward`` / ``grad``),
optimizer (``optimizer.step`` and what goes with it: ``zero_grad``, gradient clipping,
GradScaler's ``unscale_`` and ``update``), sync (the host syncs the agent counts) and collective
(synchronous torch.distributed calls, timed by ``collectives.py`` in a multi-process run). Each phase is timed
exclusively: time in a phase nested in another (a sync inside forward, an LBFGS closure inside
the optimizer step) counts for the inner one only. The rest of the step is ``other`` (the
script's own code between them); the step event carries the five measured phases.

These are host times. On a TPU the device runs behind the host, and its work shows up in the
phase that waits for it (a host sync, or the next batch's transfer)."""

import time

PHASES = ("data", "forward", "backward", "optimizer", "sync", "collective")


class Phases:
    def __init__(self):
        self.totals = dict.fromkeys(PHASES, 0.0)
        self.stack = []
        self.mark = time.perf_counter()
        self.forward_depth = 0

    def enter(self, name):
        now = time.perf_counter()
        if name not in ("sync", "collective") and self.forward_depth == 0 and self.stack and self.stack[-1] == "forward":
            # The forward pass (and the loss after it) ends where backward, the optimizer or the
            # next batch begins.
            self.totals["forward"] += now - self.mark
            self.stack.pop()
            self.mark = now
        if self.stack:
            self.totals[self.stack[-1]] += now - self.mark
        self.stack.append(name)
        self.mark = now

    def exit(self, name):
        now = time.perf_counter()
        if not self.stack or name not in self.stack:
            return
        self.totals[self.stack[-1]] += now - self.mark
        self.mark = now
        # Unwind to the phase that ended (a phase left by an exception leaves with it).
        while self.stack:
            if self.stack.pop() == name:
                break

    def take(self, now):
        """The step's phases in seconds, up to `now`; open phases keep counting afterwards."""
        if self.stack:
            self.totals[self.stack[-1]] += now - self.mark
        self.mark = now
        out = {k: round(v, 6) for k, v in self.totals.items()}
        for k in self.totals:
            self.totals[k] = 0.0
        return out

    def restart(self, now):
        """The next step starts at `now` (the agent's own bookkeeping in between counts nowhere)."""
        self.mark = now

    # ---- hooks -------------------------------------------------------------------------------

    def install(self, torch):
        phases = self
        self.install_forward(torch)

        from torch.optim.optimizer import register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(lambda opt, args, kwargs: phases.enter("optimizer"))

        import torch.autograd as autograd

        for name in ("backward", "grad"):
            setattr(autograd, name, self.timed("backward", getattr(autograd, name)))

        optim = torch.optim.Optimizer
        optim.zero_grad = self.timed("optimizer", optim.zero_grad)
        import torch.nn.utils as nn_utils
        from torch.nn.utils import clip_grad

        for name in ("clip_grad_norm_", "clip_grad_value_"):
            for owner in (nn_utils, clip_grad):
                fn = getattr(owner, name, None)
                if fn is not None and not hasattr(fn, "_tpuport_phase"):
                    setattr(owner, name, self.timed("optimizer", fn))
        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        for name in ("unscale_", "update"):
            if scaler is not None and hasattr(scaler, name):
                setattr(scaler, name, self.timed("optimizer", getattr(scaler, name)))

        from torch.utils.data import dataloader

        it = dataloader._BaseDataLoaderIter
        it.__next__ = self.timed("data", it.__next__)

    def install_forward(self, torch):
        """Time forward at `nn.Module.__call__` (global module hooks would do, but torch warns
        about them under torch.compile and Dynamo takes them for frames to compile). Inside a
        compiled region the wrapper only passes the call on, and Dynamo inlines it."""
        phases = self
        compiling = getattr(torch.compiler, "is_compiling", lambda: False)
        call = torch.nn.Module.__call__

        def module_call(module, *args, **kwargs):
            if compiling():
                return call(module, *args, **kwargs)
            depth = phases.forward_depth
            if depth == 0:
                stack = phases.stack
                if stack and stack[-1] == "data":  # a transform inside the loader
                    return call(module, *args, **kwargs)
                if not stack or stack[-1] != "forward":  # not a second model call, or the loss
                    phases.enter("forward")
            phases.forward_depth = depth + 1
            try:
                return call(module, *args, **kwargs)
            finally:
                phases.forward_depth = depth
                if depth == 0 and "backward" in phases.stack:
                    phases.exit("forward")  # recomputed in backward (activation checkpointing)
                # Otherwise forward stays open until the next phase: the loss comes after it.

        module_call.__name__ = "__call__"
        module_call.__qualname__ = "Module.__call__"
        module_call.__wrapped__ = call
        torch.nn.Module.__call__ = module_call
        self.frames = [module_call.__code__, self.enter.__func__.__code__, self.exit.__func__.__code__]

    def dynamo_imported(self, torch):
        """A compiled module calls its original module under Dynamo's frame callback: skip
        these frames there (what they call is still compiled) rather than compile them."""
        skip_code = getattr(getattr(torch._dynamo, "eval_frame", None), "skip_code", None)
        if skip_code is not None:
            for code in self.frames:
                skip_code(code)

    def timed(self, phase, fn):
        phases = self

        def timed(*args, **kwargs):
            phases.enter(phase)
            try:
                return fn(*args, **kwargs)
            finally:
                phases.exit(phase)

        timed.__name__ = getattr(fn, "__name__", phase)
        timed.__qualname__ = getattr(fn, "__qualname__", phase)
        timed.__doc__ = getattr(fn, "__doc__", None)
        timed.__wrapped__ = fn
        timed._tpuport_phase = phase
        return timed

    def end_optimizer_step(self):
        self.exit("optimizer")

    def reset_nesting(self):
        """At a step's end nothing is open: forget what an exception left behind (a forward
        that raised without `always_call`)."""
        self.forward_depth = 0
        self.stack = []
