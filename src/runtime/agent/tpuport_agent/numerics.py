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
    """Same seeds in both runs; the loss of each step is the tensor backward() is called on
    (also used by ``tpuport check``)."""
    torch.manual_seed(0)
    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    original = torch.Tensor.backward

    def backward(self, *args, **kwargs):
        if self.numel() == 1 and not agent._in_sync:
            agent._in_sync = True
            try:
                agent.pending["loss"] = float(self.detach().float())
            finally:
                agent._in_sync = False
        return original(self, *args, **kwargs)

    torch.Tensor.backward = backward


def finish(agent):
    """After the last step: save the parameters (reference run) or compare with the saved ones."""
    torch, n = agent.torch, agent.numerics
    params = []
    if agent.last_optimizer is not None:
        params = [p.detach().float().cpu() for g in agent.last_optimizer.param_groups for p in g["params"]]
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
