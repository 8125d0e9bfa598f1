"""In-process A/B of the agent's per-step cost, immune to this machine's run-to-run drift.

One process runs an AdamW MLP training step (10 ms on CPU) in alternating blocks of 20 steps:
with the agent's hooks (optimizer step hook, host-sync counters and the step breakdown's
wrappers: `nn.Module.__call__`, autograd, `zero_grad`, an optimizer pre-hook; events to
/dev/null) and without. A placebo pass (a no-op hook in the "on" blocks) measures the harness's own order bias.
Run with the project venv:

    PYTHONPATH=src/runtime/agent ~/.cache/tpuport/venv-*/bin/python bench/hook_overhead.py

It prints the median step time with and without hooks and the ratio, for the placebo and for the
real hooks; the hooks' cost is the difference between the two ratios. Run it on a quiet machine:
another process competing for the cores (a build) swamps the few percent it measures.
"""

import os
import statistics
import sys
import time

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

import tpuport_agent

BLOCKS = int(os.environ.get("BLOCKS", "20"))
STEPS = 20


def measure(real):
    fd = os.open(os.devnull, os.O_WRONLY)
    os.environ["TPUPORT_EVENTS_FD"] = str(fd)
    agent = tpuport_agent.Agent({"target": "host", "t0": time.time()})
    agent.script_start = time.perf_counter()
    agent.torch = torch
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    names = ("item", "cpu", "tolist", "numpy")
    # (owner, attribute) pairs the hooks replace: swapped in and out per block.
    slots = [(torch.Tensor, k) for k in names] + [
        (nn.Module, "__call__"),
        (torch.autograd, "backward"),
        (torch.autograd, "grad"),
        (torch.optim.Optimizer, "zero_grad"),
    ]
    plain = {slot: getattr(*slot) for slot in slots}
    if real:
        agent.install_sync_counters(torch)
        agent.phases.install_forward(torch)
        for owner, name in slots[len(names) + 1 :]:
            phase = "optimizer" if name == "zero_grad" else "backward"
            setattr(owner, name, agent.phases.timed(phase, getattr(owner, name)))
    hooked = {slot: getattr(*slot) for slot in slots}

    def step():
        t0 = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
        return time.perf_counter() - t0

    on, off = [], []
    for _ in range(BLOCKS):
        handle = register_optimizer_step_post_hook(agent.on_optimizer_step if real else (lambda *a: None))
        pre = register_optimizer_step_pre_hook((lambda *a: agent.phases.enter("optimizer")) if real else (lambda *a: None))
        for (owner, k), v in hooked.items():
            setattr(owner, k, v)
        on += [step() for _ in range(STEPS)]
        handle.remove()
        pre.remove()
        for (owner, k), v in plain.items():
            setattr(owner, k, v)
        off += [step() for _ in range(STEPS)]
    for (owner, k), v in plain.items():
        setattr(owner, k, v)
    return statistics.median(on), statistics.median(off)


if __name__ == "__main__":
    for label, real in (("placebo", False), ("agent hooks", True)):
        on, off = measure(real)
        print(f"{label:12s} on {on * 1e3:7.3f} ms  off {off * 1e3:7.3f} ms  ratio {on / off:.4f}")
    sys.exit(0)
