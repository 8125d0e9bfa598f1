"""Time the script spends in torch.distributed collectives, per step (``collective_s`` in the step
event). With one process per device, a fast rank waits in its collectives for the slowest one:
a step's time minus its collective time is the rank's own work, which is what tells the
straggler (``tpuport run --nproc``). Synchronous calls only (``async_op=True`` returns at once;
its wait is not counted), and DDP's gradient all-reduce runs inside backward in C++, unseen here.
The same time is the step breakdown's ``collective`` phase.
"""

import time

NAMES = ("all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter",
         "reduce_scatter_tensor", "broadcast", "broadcast_object_list", "barrier", "all_to_all",
         "all_to_all_single", "reduce", "gather", "scatter", "send", "recv")


def install(agent, torch):
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    perf = time.perf_counter

    phases = agent.phases  # the step breakdown's `collective` phase (None: --no-breakdown)

    def wrap(name, fn):
        def timed(*args, **kwargs):
            t = perf()
            if phases is not None:
                phases.enter("collective")
            try:
                return fn(*args, **kwargs)
            finally:
                if phases is not None:
                    phases.exit("collective")
                agent.pending["collective_s"] = agent.pending.get("collective_s", 0.0) + (perf() - t)

        timed.__name__ = timed.__qualname__ = name
        timed.__doc__ = fn.__doc__
        timed.__wrapped__ = fn
        timed._tpuport_timed = True
        return timed

    for name in NAMES:
        fn = getattr(dist, name, None)
        if fn is not None and not getattr(fn, "_tpuport_timed", False):
            setattr(dist, name, wrap(name, fn))
