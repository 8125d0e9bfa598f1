"""``tpuport numerics`` inside the script's process (the agent calls it when its configuration has
a ``numerics`` entry): the same seeds in both runs, the loss of each step (the scalar tensor
``backward()`` is called on), and after the last step the parameters saved (the float32 run) or
compared with the saved ones (the run with TPU precision emulated).
"""

import json
import random
import sys


class NumericsDone(BaseException):
    """Ends a `tpuport numerics` run after its steps (BaseException: scripts' `except Exception`
    must not catch it)."""


def install(agent, torch):
    seed_and_record_loss(agent, torch)


def seed_and_record_loss(agent, torch):
    """Same seeds in both runs (torch, `random`, numpy here; Python's hash seed is fixed when
    tpuport starts the process: PYTHONHASHSEED=0 unless set); the loss of each step is the tensor
    backward() is called on, or under a GradScaler the loss it scaled (also used by ``tpuport
    check`` and ``run --losses``)."""
    torch.manual_seed(0)
    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    original = torch.Tensor.backward
    _remember_scaled_losses(torch)

    def backward(self, *args, **kwargs):
        if self.numel() == 1 and not agent._in_sync:
            agent._in_sync = True
            try:
                loss = getattr(self, SCALED_FROM, None)
                loss = loss if isinstance(loss, torch.Tensor) else self
                agent.pending["loss"] = float(loss.detach().float())
            finally:
                agent._in_sync = False
        return original(self, *args, **kwargs)

    torch.Tensor.backward = backward


# The attribute a GradScaler's output carries: the loss before scaling. A scaler multiplies the
# loss by its scale (65536 at first) before backward(), so the tensor backward() is called on is
# not the script's loss, and a run whose scaler is off (a port that dropped it, a TPU's
# GradScaler(enabled=False)) would part from one whose scaler is on by that factor alone.
SCALED_FROM = "_tpuport_scaled_from"


def _remember_scaled_losses(torch):
    scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
    if scaler is None or getattr(scaler.scale, "_tpuport", False):
        return
    scale = scaler.scale

    def remember(self, outputs):
        out = scale(self, outputs)
        if isinstance(outputs, torch.Tensor) and isinstance(out, torch.Tensor) and out is not outputs:
            try:
                setattr(out, SCALED_FROM, outputs)
            except (AttributeError, TypeError):
                pass  # a tensor type that takes no attributes: its scaled value is recorded
        return out

    remember._tpuport = True
    remember.__doc__ = scale.__doc__
    scaler.scale = remember


def finish(agent):
    """After the last step: save the parameters (reference run) or compare with the saved ones."""
    torch, n = agent.torch, agent.numerics
    params = []
    if agent.last_optimizer is not None:
        was, agent._in_sync = agent._in_sync, True  # numerics' own copies: no sync of the script
        try:
            params = [p.detach().float().cpu() for g in agent.last_optimizer.param_groups for p in g["params"]]
        finally:
            agent._in_sync = was
    if n.get("save"):
        torch.save(params, n["save"])
    if n.get("compare"):
        ref = torch.load(n["compare"])
        rows = []
        for i, (a, b) in enumerate(zip(params, ref)):
            if a.shape != b.shape:
                continue
            d = (a - b).abs()
            rows.append({"index": i, "shape": list(a.shape), "max_abs": float(d.max()) if d.numel() else 0.0,
                         "rel": float(d.norm() / b.norm()) if float(b.norm()) > 0 else 0.0})
        with open(n["compare_out"], "w") as f:
            json.dump({"params": rows, "count": [len(params), len(ref)]}, f)
    raise NumericsDone()
