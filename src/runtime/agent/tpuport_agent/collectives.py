"""Time the script spends in torch.distributed collectives, per step (``collective_s`` in the step
event). With one process per device, a fast rank waits in its collectives for the slowest one:
a step's time minus its collective time is the rank's own work, which is what tells the
straggler (``tpuport run --nproc``). Synchronous calls only (``async_op=True`` returns at once;
its wait is not counted), and DDP's gradient all-reduce runs inside backward in C++, unseen here.
The same time is the step breakdown's ``collective`` phase.

A collective still in flight after ``WAIT_S`` is reported once, as it waits, by a watchdog thread
(a ``warning`` of category ``CollectiveWait`` with ``op`` and ``since``): the collective call
releases the GIL while it waits, so the thread runs. When a job ends on ``--timeout`` or a
signal, the ranks that were waiting in a collective are told from the rank they waited for.
"""

import sys
import threading
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
    # The collective in flight: [name, perf start, agent time at start, file, line], or None.
    flight = [None]
    watching = []  # the watchdog starts with the first collective (none in most runs)

    def wrap(name, fn):
        def timed(*args, **kwargs):
            t = perf()
            caller = sys._getframe(1)
            if not watching:
                watching.append(threading.Thread(target=_watch, args=(agent, flight, perf),
                                                 name="tpuport-collective-watch", daemon=True))
                watching[0].start()
            outer = flight[0]  # all_gather_object runs all_gather: the outer call stays in flight
            flight[0] = outer or [name, t, agent.em.now(), caller.f_code.co_filename, caller.f_lineno]
            if phases is not None:
                phases.enter("collective")
            try:
                return fn(*args, **kwargs)
            finally:
                flight[0] = outer
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


WAIT_S = 2.0  # a collective in flight this long is reported (a late or hung rank)


def _watch(agent, flight, perf):
    reported = None
    while not agent.em.broken:
        time.sleep(0.5)
        f = flight[0]
        if f is None or f is reported or perf() - f[1] < WAIT_S:
            continue
        reported = f
        name, _, since, file, line = f
        agent.em.emit("warning", category="CollectiveWait", file=file, line=line, op=name,
                      since=round(since, 6),
                      message="waiting in %s for %.1f s: another rank is late or hung" % (name, perf() - f[1]))
