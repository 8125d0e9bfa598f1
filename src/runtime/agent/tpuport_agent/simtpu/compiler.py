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
    # TorchTPU's own errors (its C++ push_compiler_options).
    if not isinstance(options, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items()):
        raise TypeError("push_compiler_options(): incompatible function arguments. The following argument types "
                        "are supported:\n    1. (options: collections.abc.Mapping[str, str]) -> None")
    for key in ("xla_optimization_level", "xla_memory_fitting_level"):
        if key in options and options[key] not in _LEVELS:
            raise RuntimeError("push_compiler_options(): unknown XLA compiler effort level: %s" % options[key])
    merged = dict(_current_options())
    merged.update(options)  # nested scopes merge; the inner one wins
    _STACK.append(merged)
    try:
        yield
    finally:
        _STACK.pop()


def _current_options():
    """The XLA options in force (what a TPU compile would receive). Private: TorchTPU's
    ``torch.tpu.compiler`` has no such function, so a script must not find one here."""
    return dict(_STACK[-1]) if _STACK else {}
