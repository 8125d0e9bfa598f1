"""Host syncs: the calls that make the host wait for the device (``.item()``, ``.cpu()``,
``.tolist()``, ``.numpy()``; in DeferAndFuse mode also data-dependent Python on tensors), counted
per step with the script's lines that made them. torch's own calls on CPU tensors are no device
sync and are not counted; on a device every sync counts.
"""

import os
import sys

from tpuport_agent import state


def install(agent, torch):
    """Count .item(), .cpu(), .tolist(), .numpy() (and in DeferAndFuse mode the other
    materialising calls) per step, with the script's line that made each."""
    compiling = getattr(torch.compiler, "is_compiling", lambda: False)
    torch_dir = os.path.dirname(torch.__file__)
    agent_dir = os.path.dirname(os.path.abspath(__file__))
    skip = (torch_dir, agent_dir)
    tt = sys.modules.get("torch_tpu")
    if tt is not None and getattr(tt, "__file__", None):
        skip += (os.path.dirname(tt.__file__),)
    getframe = sys._getframe

    def wrap(kind, original):
        kind = kind.strip("_")

        def counted(self, *args, **kwargs):
            if agent._in_sync or compiling():
                return original(self, *args, **kwargs)
            f = getframe(1)
            name = f.f_code.co_filename
            while name.startswith(agent_dir):
                f = f.f_back  # the sim's function mode sits between torch and the call
                if f is None:
                    return original(self, *args, **kwargs)
                name = f.f_code.co_filename
            if name.startswith(torch_dir):
                # torch's own .item() on CPU tensors (optimizer step counters, ...) is no
                # device sync; on a real device every sync counts.
                if self.is_cpu:
                    return original(self, *args, **kwargs)
                depth = 0
                # Up to the script's line: past torch's frames and the agent's own wrappers
                # (phases.py's Module.__call__), which sit between the script and torch.
                while f is not None and depth < 16 and f.f_code.co_filename.startswith(skip):
                    f = f.f_back
                    depth += 1
            counts = agent.sync_counts
            counts[kind] = counts.get(kind, 0) + 1
            if f is not None:
                site = "%s:%d" % (f.f_code.co_filename, f.f_lineno)
                agent.sync_sites[site] = agent.sync_sites.get(site, 0) + 1
            # A torch function mode (the sim's) dispatches back through this wrapper.
            agent._in_sync = True
            if agent.phases is not None:
                agent.phases.enter("sync")
            try:
                return original(self, *args, **kwargs)
            finally:
                agent._in_sync = False
                if agent.phases is not None:
                    agent.phases.exit("sync")

        counted.__name__ = original.__name__
        counted.__doc__ = original.__doc__
        counted.__wrapped__ = original
        return counted

    kinds = ["item", "cpu", "tolist", "numpy"]
    if state.EAGER_MODE == 0:
        # DeferAndFuse: data-dependent control flow and printing materialise too.
        kinds += ["__bool__", "__int__", "__float__", "__index__", "__repr__", "__format__"]
    for kind in kinds:
        original = getattr(torch.Tensor, kind, None)
        if original is not None:
            setattr(torch.Tensor, kind, wrap(kind, original))

def flush(agent, step):
    """Send the step's counts and busiest sites (a sync event)."""
    if not agent.sync_counts:
        return
    sites = sorted(agent.sync_sites.items(), key=lambda kv: -kv[1])[:5]
    agent.send_buffered()
    agent.em.emit("sync", step=step, counts=agent.sync_counts, sites=[[s, n] for s, n in sites])
    agent.sync_counts = {}
    agent.sync_sites = {}
