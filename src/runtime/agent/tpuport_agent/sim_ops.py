"""Ops a TPU lacks, on the sim target: what fails on a TPU fails here, at the same op.

TorchTPU 0.2.0 has no kernel for some ATen operators (``tpu_missing_ops``, generated from its
operator table); on a TPU they reach its catch-all fallback, which raises ``operator 'aten::median'
is not implemented for TPU. Please file a feature request`` unless its CPU fallback is on. The sim
replaces the host's kernel (CPU, or CUDA on a CUDA host) of each such overload with one that raises
the same message: ops a TPU runs pay nothing, composite ops decompose first as on a TPU (their
parts are what is checked), and compiled graphs meet the error when they run the op.

With ``--cpu-fallback`` (TorchTPU's ``enable_cpu_fallback``), the ops run on the host instead and
each is reported once, as TorchTPU warns, and listed at the end of the run.
"""

import os
import sys
import warnings

from tpuport_agent import state, tpu_missing_ops

MESSAGE = "operator 'aten::%s' is not implemented for TPU. Please file a feature request"
FALLBACK = "operator 'aten::%s' is not implemented for TPU. Falling back to CPU"

# Overload name -> calls that fell back to the host (with --cpu-fallback).
FELL_BACK = {}


class TpuCpuFallbackWarning(UserWarning):
    """An op a TPU lacks ran on the CPU (``--cpu-fallback``): once per op, at the script's line."""


def _script_site():
    """The innermost frame of the script's own code (not torch's, not tpuport's)."""
    f = sys._getframe(2)
    while f is not None:
        mod = f.f_globals.get("__name__", "") or ""
        if not (mod == "torch" or mod.startswith(("torch.", "tpuport_agent"))):
            return f.f_code.co_filename, f.f_lineno
        f = f.f_back
    return "<unknown>", 0


def install(torch, cpu_fallback):
    # TPUPORT_SIM_OP_CHECK=0 switches the check off (bench/op_check_overhead.sh measures its cost).
    if os.environ.get("TPUPORT_SIM_OP_CHECK") == "0":
        return
    if cpu_fallback:
        _install_fallback(torch)
    else:
        _install_raising(torch)


def _install_raising(torch):
    lib = torch.library.Library("aten", "IMPL")
    key = "CUDA" if state.HOST == "cuda" else "CPU"
    with warnings.catch_warnings():
        # Replacing a kernel makes torch warn once per op ("Overriding a previously registered
        # kernel"): that is the point here.
        warnings.simplefilter("ignore")
        for name in tpu_missing_ops.MISSING:
            def missing(*args, _name=name, **kwargs):
                raise NotImplementedError(MESSAGE % _name)

            try:
                lib.impl(name, missing, key)
            except (RuntimeError, ValueError):
                pass  # an overload this torch build does not have
    state.MISSING_OPS_LIBRARY = lib  # the registrations live as long as the library object


def _install_fallback(torch):
    from torch.utils._python_dispatch import TorchDispatchMode

    missing = set(tpu_missing_ops.MISSING)
    seen = {}  # OpOverload -> its name if missing, else None (each op looked up once)

    class CpuFallback(TorchDispatchMode):
        @classmethod
        def ignore_compile_internals(cls):
            return True

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = seen.get(func, False)
            if name is False:
                schema = func._schema
                full = schema.name.split("::", 1)[-1] + ("." + schema.overload_name if schema.overload_name else "")
                name = full if schema.name.startswith("aten::") and full in missing else None
                seen[func] = name
            if name is not None:
                if name not in FELL_BACK:
                    FELL_BACK[name] = 0
                    # Through showwarning, not the filters: the agent's hook records it as a
                    # warning event with the script's file and line, and it is printed.
                    filename, lineno = _script_site()
                    warnings.showwarning(FALLBACK % name, TpuCpuFallbackWarning, filename, lineno)
                FELL_BACK[name] += 1
            return func(*args, **(kwargs or {}))

    mode = CpuFallback()
    mode.__enter__()
    state.CPU_FALLBACK_MODE = mode


def summary():
    """The line the run's end prints with --cpu-fallback: which ops ran on the CPU, how often."""
    if not FELL_BACK:
        return None
    ops = ", ".join("aten::%s (%d call%s)" % (n, c, "" if c == 1 else "s") for n, c in sorted(FELL_BACK.items()))
    return "--cpu-fallback: %d op%s a TPU lacks ran on the CPU: %s" % (
        len(FELL_BACK), "" if len(FELL_BACK) == 1 else "s", ops)
