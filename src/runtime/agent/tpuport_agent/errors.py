"""The script's exception as ``python script.py`` shows it: without the frames of the agent and
of runpy above the script's own (``tpuport_agent/__init__.py ... runpy.run_path``,
``<frozen runpy>``), and without the agent's import hook (and the import machinery around it)
between the script's ``import torch`` and torch's own frames. Used for the traceback on stderr
and for the one in the events file; a script that installed its own ``sys.excepthook`` gets it
called with the same trimmed traceback, as python would call it."""

import os
import sys
import traceback

_AGENT_DIR = os.path.dirname(os.path.abspath(__file__))
_STDLIB = os.path.dirname(os.path.abspath(os.__file__))
_IMPORTLIB = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")


def _file(tb):
    return tb.tb_frame.f_code.co_filename


def _runner(tb):
    """A frame of the agent or of runpy, which stand where python's own start-up would."""
    f = _file(tb)
    if f.startswith(_AGENT_DIR + os.sep) or f == "<frozen runpy>":
        return True
    return f == os.path.join(_STDLIB, "runpy.py")


def _import_hook(tb):
    """The agent's wrapper around torch's module loading (``_PostImport``)."""
    return _file(tb).startswith(_AGENT_DIR + os.sep) and tb.tb_frame.f_code.co_name == "exec_module"


def _importlib(tb):
    f = _file(tb)
    return f in _IMPORTLIB or f.startswith(os.path.join(_STDLIB, "importlib") + os.sep)


def trim(tb):
    """The traceback ``tb`` without the agent's frames above the script and its import hook;
    None when no frame is left (a SyntaxError in the script, raised while runpy compiles it)."""
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    i = 0
    while i < len(entries) and _runner(entries[i]):
        i += 1
    kept = []
    for t in entries[i:]:
        if _import_hook(t):
            # Python hides the import machinery's frames of an import; the hook split them in two.
            while kept and _importlib(kept[-1]):
                kept.pop()
            continue
        kept.append(t)
    for a, b in zip(kept, kept[1:]):
        a.tb_next = b
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


def _trim_chain(e, seen):
    if e is None or id(e) in seen:
        return
    seen.add(id(e))
    try:
        e.__traceback__ = trim(e.__traceback__)
    except (AttributeError, TypeError, ValueError):
        pass
    _trim_chain(e.__cause__, seen)
    _trim_chain(e.__context__, seen)
    for sub in getattr(e, "exceptions", None) or ():
        _trim_chain(sub, seen)


def show(e):
    """Write the exception to stderr as python would, and return its text for the events file."""
    _trim_chain(e, set())
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    hook = sys.excepthook
    if hook is not sys.__excepthook__ and hook is not None:
        try:
            hook(type(e), e, e.__traceback__)
            return text
        except Exception:
            pass
    try:
        sys.stderr.write(text)
    except Exception:
        pass
    return text
