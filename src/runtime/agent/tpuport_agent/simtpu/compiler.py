"""``torch.tpu.compiler`` on the sim target: XLA compiler options are validated and scoped, but
the host compiles with AOTAutograd, so they change nothing there."""

import contextlib

_STACK = []
_LEVELS = ("O0", "O1", "O2", "O3")


@contextlib.contextmanager
def custom_compiler_options(options):
    import torch

    if torch.compiler.is_compiling():
        raise RuntimeError("Attempt to trace forbidden callable torch.tpu.compiler.custom_compiler_options")
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
        raise TypeError("custom_compiler_options expects a dict[str, str], got %r" % (options,))
    for key in ("xla_optimization_level", "xla_memory_fitting_level"):
        if key in options and options[key] not in _LEVELS:
            raise ValueError("%s must be one of %s, got %r" % (key, ", ".join(_LEVELS), options[key]))
    merged = dict(current_options())
    merged.update(options)  # nested scopes merge; the inner one wins
    _STACK.append(merged)
    try:
        yield
    finally:
        _STACK.pop()


def current_options():
    """The XLA options in force (sim only: what a TPU compile would receive)."""
    return dict(_STACK[-1]) if _STACK else {}
