"""Where the model lives: the two ways a ported script trains wrong without an error.

- **The model stayed on the CPU.** A device chosen by ``'cuda' if torch.cuda.is_available()
  else 'cpu'`` picks the CPU on a TPU VM, and training runs on the host with no error. At the
  first optimizer step the agent looks at the optimizer's parameters: on TorchTPU (a TPU, or
  xla-cpu) if none is a ``tpu`` tensor, a ``DevicePlacement`` warning says so. (On the sim "tpu"
  is the host, so it cannot tell.)
- **A move untied tied weights.** TorchTPU's tensors are not shallow-copy compatible with CPU
  ones, so ``nn.Module._apply`` gives every holder of a moved weight its own new Parameter:
  after ``model.to("tpu")`` an embedding and an output layer that shared one weight (nanoGPT's
  ``wte``/``lm_head``, Hugging Face's ``tie_word_embeddings``) are two, the first loss is the
  same and the gradients are not. The agent compares the shared parameters before and after each
  ``Module.to``/``tpu``: a tie lost gets a ``TiedWeights`` warning naming both modules and the
  fix. On the sim, which keeps the tie (its "tpu" is the host), a move to "tpu" of a model with
  ties gets the same warning, since TorchTPU would untie them.
"""

import sys

FIX = ("re-tie them after the move (e.g. `model.{b} = model.{a}`, or `model.tie_weights()` for a Hugging Face "
       "model), or call torch.__future__.set_swap_module_params_on_conversion(True) before it")


class Placement:
    def __init__(self, agent, torch, target):
        self.agent = agent
        self.torch = torch
        self.target = target
        self.checked_optimizers = set()
        self.depth = 0

    # ---- the optimizer's parameters ------------------------------------------------------------

    def check_optimizer(self, optimizer):
        """At an optimizer's first step: where its parameters are (the step event's
        ``param_devices``, e.g. {"tpu": 12}), and on TorchTPU a warning when none is on the TPU."""
        if id(optimizer) in self.checked_optimizers:
            return
        self.checked_optimizers.add(id(optimizer))
        devices = {}
        for group in getattr(optimizer, "param_groups", []):
            for p in group.get("params", []):
                t = getattr(getattr(p, "device", None), "type", None)
                if t is not None:
                    devices[t] = devices.get(t, 0) + 1
        if devices:
            seen = self.agent.pending.get("param_devices") or {}
            for d, n in devices.items():
                seen[d] = seen.get(d, 0) + n
            self.agent.pending["param_devices"] = seen
        if self.target not in ("tpu", "xla-cpu") or not devices or "tpu" in devices:
            return
        where = ", ".join("%d on %s" % (n, d) for d, n in sorted(devices.items()))
        on = sorted(devices)[0] if len(devices) == 1 else "/".join(sorted(devices))
        self.agent.em.emit(
            "warning", category="DevicePlacement", file="", line=0, step=self.agent.step, devices=devices,
            message=("the optimizer's parameters are on %s, not tpu (%s): the model trains on the host CPU, on a "
                     "TPU VM too; move it to the TPU (model.to(device) with device = "
                     "torch.accelerator.current_accelerator()) before creating the optimizer" % (on, where)))

    # ---- tied weights ---------------------------------------------------------------------------

    def install(self):
        torch = self.torch
        placement = self
        for name in ("to", "tpu"):
            original = getattr(torch.nn.Module, name, None)
            if original is None:
                continue
            setattr(torch.nn.Module, name, placement._wrap(name, original))

    def _wrap(self, name, original):
        placement = self

        def moved(module, *args, **kwargs):
            if placement.depth:
                return original(module, *args, **kwargs)
            placement.depth += 1
            try:
                ties = placement._ties(module)
                result = original(module, *args, **kwargs)
                if ties:
                    placement._after(module, ties, name == "tpu" or _to_tpu(placement.torch, args, kwargs))
                return result
            finally:
                placement.depth -= 1

        moved.__name__ = original.__name__
        moved.__doc__ = original.__doc__
        moved.__wrapped__ = original
        return moved

    def _ties(self, module):
        """Groups of parameter names that share one Parameter."""
        try:
            seen = {}
            for n, p in module.named_parameters(remove_duplicate=False):
                seen.setdefault(id(p), []).append(n)
            return [names for names in seen.values() if len(names) > 1]
        except Exception:
            return []

    def _after(self, module, ties, to_tpu):
        try:
            params = dict(module.named_parameters(remove_duplicate=False))
        except Exception:
            return
        for names in ties:
            objs = [params.get(n) for n in names]
            untied = any(o is not objs[0] for o in objs[1:])
            if untied:
                what = "this move untied them (TorchTPU's tensors are not shallow-copy compatible with CPU ones): " \
                       "they now train as two parameters"
            elif self.target == "sim" and to_tpu:
                what = "on TorchTPU this move unties them (its tensors are not shallow-copy compatible with CPU " \
                       "ones; the sim keeps the tie): there they would train as two parameters"
            else:
                continue
            a, b = _module_of(names[0]), _module_of(names[1])
            frame = _user_frame()
            self.agent.em.emit(
                "warning", category="TiedWeights", file=frame[0], line=frame[1], step=self.agent.step,
                params=names,
                message=("%s and %s shared one weight before .to(), and %s; %s"
                         % (names[0], names[1], what, FIX.format(a=names[0], b=names[1]))))


def _to_tpu(torch, args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, str) and (a == "tpu" or a.startswith("tpu:")):
            return True
        if getattr(a, "type", None) == "tpu":
            return True
    return False


def _module_of(name):
    return name.rsplit(".", 1)[0] if "." in name else name


def _user_frame():
    """The script's line that made the call (the first frame outside torch and tpuport)."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if "/torch/" not in name and "tpuport_agent" not in name and "/torch_tpu/" not in name:
            return name, f.f_lineno
        f = f.f_back
    return "", 0
