"""``tpuport check`` inside the script's process: the same seeds in both runs (the original on the
host, the port on the sim), the loss of each step, and on the first step every module's output,
saved by the original run and compared by the port's, layer by layer.

The agent calls ``install`` after ``import torch`` when its configuration has a ``check`` entry
(``{"layers": {"save": PATH}}`` or ``{"layers": {"compare": PATH, "out": PATH}}``) and
``after_step`` after each optimizer step. Modules are matched by call order (both runs build the
same model from the same code); each row carries the module's name (its path in the model that
owns it) and class. Compiled code is not hooked (the hooks would change its graphs).
"""

import gc
import json

from tpuport_agent import numerics

MAX_CALLS = 400  # module calls recorded on the first step
MAX_ELEMENTS = 1 << 20  # elements kept per output (the first ones, flattened)
# torch.testing.assert_close's float32 defaults, which the report names as the strict bar.
RTOL, ATOL = 1.3e-6, 1e-5


def install(agent, torch):
    numerics.seed_and_record_loss(agent, torch)
    layers = (agent.config.get("check") or {}).get("layers")
    if not layers:
        return
    calls = []
    compiling = getattr(torch.compiler, "is_compiling", lambda: False)

    def hook(module, args, output):
        if agent.step >= 1 or len(calls) >= MAX_CALLS or compiling():
            return
        t = _first_tensor(torch, output)
        if t is None or not t.is_floating_point():
            return
        # The copy is the check's own, not the script's: not a host sync of the script (on a
        # device it is one, and without this the sync counter put it on the module's line).
        was, agent._in_sync = agent._in_sync, True
        try:
            flat = t.detach().reshape(-1)[:MAX_ELEMENTS].float().cpu().clone()
        finally:
            agent._in_sync = was
        calls.append((module, type(module).__name__, list(t.shape), flat))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    agent.check_state = {"calls": calls, "handle": handle, "layers": layers, "done": False}


def after_step(agent):
    """After the first optimizer step: stop hooking, then save or compare the outputs."""
    st = getattr(agent, "check_state", None)
    if st is None or st["done"] or agent.step < 1:
        return
    st["done"] = True
    st["handle"].remove()
    torch = agent.torch
    names = _module_names(torch)
    rows = [{"index": i, "name": names.get(id(m), ""), "class": cls, "shape": shape, "values": flat}
            for i, (m, cls, shape, flat) in enumerate(st["calls"])]
    st["calls"].clear()
    layers = st["layers"]
    if layers.get("save"):
        torch.save(rows, layers["save"])
    if layers.get("compare"):
        reference = torch.load(layers["compare"])
        with open(layers["out"], "w") as f:
            json.dump({"layers": compare(torch, rows, reference), "calls": [len(rows), len(reference)]}, f)


def compare(torch, rows, reference):
    """Per module call (port vs reference): assert_close-style mismatch counts and the tolerances
    that would pass. Calls that do not line up (class or shape differ) end the comparison."""
    out = []
    for a, b in zip(rows, reference):
        if a["class"] != b["class"] or a["shape"] != b["shape"]:
            break
        x, y = a["values"], b["values"]
        if x.numel() == 0:
            continue
        diff = (x - y).abs()
        finite = torch.isfinite(diff)
        bound = ATOL + RTOL * y.abs()
        mismatched = int(((diff > bound) | ~finite).sum())
        scale = y.abs()
        rel = torch.where(scale > 0, diff / scale, torch.where(diff > 0, torch.full_like(diff, float("inf")), diff))
        worst = int(torch.nan_to_num(diff, nan=float("inf")).argmax())
        norm = float(y.norm())
        out.append({
            "index": a["index"], "name": a["name"] or b["name"], "class": a["class"], "shape": a["shape"],
            "elements": int(x.numel()), "mismatched": mismatched,
            "max_abs": float(diff.max()), "max_rel": float(rel.max()), "worst_index": worst,
            "rel_fro": float((x - y).norm()) / norm if norm > 0 else float(diff.max() > 0),
            # The tolerances that would pass: atol alone (rtol=0), rtol alone (atol=0).
            "atol_to_pass": float(diff.max()), "rtol_to_pass": float(rel.max()),
        })
    return out


def _first_tensor(torch, value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            t = _first_tensor(torch, v)
            if t is not None:
                return t
    if isinstance(value, dict):
        for v in value.values():
            t = _first_tensor(torch, v)
            if t is not None:
                return t
    for attr in ("logits", "last_hidden_state", "loss"):  # model-output objects
        t = getattr(value, attr, None)
        if isinstance(t, torch.Tensor):
            return t
    return None


def _module_names(torch):
    """id(module) -> its path in the largest model that holds it (``GPT.blocks.0.attn``)."""
    modules = [o for o in gc.get_objects() if isinstance(o, torch.nn.Module)]
    children = set()
    for m in modules:
        for c in m.children():
            children.add(id(c))
    roots = sorted((m for m in modules if id(m) not in children), key=lambda m: -sum(1 for _ in m.modules()))
    names = {}
    for root in roots:
        base = type(root).__name__
        for path, m in root.named_modules():
            names.setdefault(id(m), base + ("." + path if path else ""))
    return names
