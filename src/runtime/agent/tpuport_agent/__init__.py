"""tpuport's agent: runs a user script as __main__ and reports what happens in it.

It is loaded inside the script's process, either by the tpuport worker (CPython embedded in the
tpuport binary) or by ``python -m tpuport_agent`` when the Python version differs from the one
tpuport was built with. Both paths run this same code and send the same events: JSON lines on
the file descriptor named by TPUPORT_EVENTS_FD, a pipe to the tpuport parent process.

What it observes (all optional: a script without torch still runs):
  steps     the global optimizer post-step hook, or explicit ``tpuport.step()`` markers
  compiles  every Dynamo compile and recompile with its reason, from torch's own compilation
            metrics; the "recompile limit hit" state; survives ``torch._dynamo.reset()``
  memory    torch.accelerator allocated/reserved/peak where a device exists, process RSS
  syncs     ``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()`` per step, with call sites
  warnings  every warning shown, and the script's final exception with its traceback
"""

import json
import os
import sys
import threading
import time

from tpuport_agent import check, errors, numerics, phases, placement, state, syncs

_AGENT = None


class StepLimit(BaseException):
    """Raised at the end of the step ``--max-steps`` names; the run ends as a clean exit. A
    BaseException, so the script's own ``except Exception`` does not swallow it."""


class Emitter:
    """Writes events as JSON lines to the pipe to the parent. Never raises into the script."""

    def __init__(self, fd, t0):
        self.fd = fd
        self.t0 = t0
        self.broken = fd < 0
        self.lock = threading.RLock()  # the collective watchdog emits from its own thread

    def now(self):
        return time.time() - self.t0

    def emit(self, event_type, **fields):
        if self.broken:
            return
        fields["type"] = event_type
        fields.setdefault("t", round(self.now(), 6))
        try:
            data = (json.dumps(fields, default=str) + "\n").encode()
            with self.lock:
                while data:
                    n = os.write(self.fd, data)
                    data = data[n:]
        except OSError:
            self.broken = True


class Agent:
    def __init__(self, config):
        self.config = config
        self.em = Emitter(int(os.environ.get("TPUPORT_EVENTS_FD", "-1")), float(config.get("t0", time.time())))
        self.step = 0
        self.last_step_end = None
        self.marker_mode = False
        self.pending = {}
        self.sync_counts = {}
        self.sync_sites = {}
        self.seen_compiles = set()
        self.last_memory = 0.0
        self.torch = None
        self._in_sync = False
        self._hook_failed = False
        self.compiles_pending = False
        # TorchTPU itself runs the script: on a TPU, or on XLA:CPU (xla-cpu).
        self.target_tpu = config.get("target") in ("tpu", "xla-cpu")
        self.placement = None
        self.step_buffer = []
        self.last_send = 0.0
        self.sim_memory = None  # the sim target's HBM tracker, once installed
        self.numerics = config.get("numerics")  # `tpuport numerics`: steps, save, compare
        self.last_optimizer = None
        self.max_steps = config.get("max_steps")
        # Where each step's time goes (`--no-breakdown` turns it off).
        self.phases = phases.Phases() if config.get("breakdown", True) else None

    # ---- steps -------------------------------------------------------------------------------

    def on_optimizer_step(self, optimizer, args, kwargs):
        self.last_optimizer = optimizer
        if self.placement is not None:
            self.guarded(self.placement.check_optimizer, optimizer)
        if self.phases is not None:
            self.phases.end_optimizer_step()
        if not self.marker_mode:
            self.guarded(self.end_step, "optimizer")
        if self.numerics and self.step >= int(self.numerics["steps"]):
            numerics.finish(self)
        if self.config.get("check"):
            self.guarded(check.after_step, self)
        self.check_step_limit()

    def check_step_limit(self):
        if self.max_steps and self.step >= int(self.max_steps):
            raise StepLimit()

    def guarded(self, fn, *args):
        """Run an observation hook; a failure in tpuport must never break the script."""
        try:
            fn(*args)
        except Exception as e:
            if not self._hook_failed:
                self._hook_failed = True
                self.em.emit("log", stream="tpuport", line="tpuport agent hook failed (observations may be incomplete): %r" % (e,))
            if os.environ.get("TPUPORT_AGENT_DEBUG"):
                raise

    def marker(self, samples=None, tokens=None, **metrics):
        self.marker_mode = True
        self.report(samples=samples, tokens=tokens, **metrics)
        self.guarded(self.end_step, "marker")
        self.check_step_limit()

    def report(self, samples=None, tokens=None, **metrics):
        if samples is not None:
            self.pending["samples"] = float(samples)
        if tokens is not None:
            self.pending["tokens"] = float(tokens)
        for k, v in metrics.items():
            try:
                self.pending[k] = float(v)
            except (TypeError, ValueError):
                self.pending[k] = str(v)

    def end_step(self, source):
        now = time.perf_counter()
        start = self.last_step_end if self.last_step_end is not None else self.script_start
        self.step += 1
        fields = {"step": self.step, "dt": round(now - start, 6), "source": source,
                  "samples": None, "tokens": None, "t": round(self.em.now(), 6)}
        if self.pending:
            fields.update(self.pending)
            self.pending = {}
        if self.target_tpu:
            cache = self.tpu_cache_stats()
            if cache is not None:
                fields["tpu_cache"] = cache
        # A step the sampled HBM tracker watched runs slower (every op is recorded): it is marked,
        # and the step-time statistics leave it out.
        if self.sim_memory is not None and self.sim_memory.active and self.sim_memory.policy == "sampled":
            fields["hbm_sampled"] = True
        if self.phases is not None:
            fields["phases"] = self.phases.take(now)
            self.phases.reset_nesting()
        self.step_buffer.append(fields)
        if self.sim_memory is not None:
            self.sim_memory.on_step(self.step)
        if self.sync_counts:
            self.flush_syncs(self.step)
        # Steps are sent in small batches (at most ~10 a second, and right away while there are
        # few): writing each one costs the script's hot loop more than recording it.
        if now - self.last_send >= 0.1 or self.step <= 3:
            self.send_buffered()
            self.maybe_memory(force=False)
        self.last_step_end = time.perf_counter()
        if self.phases is not None:
            self.phases.restart(self.last_step_end)

    def send_buffered(self):
        for fields in self.step_buffer:
            self.em.emit("step", **fields)
        self.step_buffer = []
        self.last_send = time.perf_counter()
        if self.compiles_pending:
            self.compiles_pending = False
            self.poll_compiles()

    # ---- host syncs --------------------------------------------------------------------------

    def install_sync_counters(self, torch):
        syncs.install(self, torch)

    def flush_syncs(self, step):
        syncs.flush(self, step)

    # ---- compiles ----------------------------------------------------------------------------

    def install_compile_hooks(self, torch):
        """Hook Dynamo once it is imported (importing it up front would slow every start)."""
        if "torch._dynamo" in sys.modules:
            self.hook_dynamo(torch)
        else:
            sys.meta_path.insert(0, _PostImport("torch._dynamo", lambda module: self.hook_dynamo(torch)))

    def hook_dynamo(self, torch):
        import logging

        import torch._dynamo.callback as callback
        import torch._dynamo.utils  # noqa: F401  (compilation metrics)

        if state.ACTIVE:
            from tpuport_agent import sim

            sim.register_compile_backend(torch)
        if state.XLA_CPU:
            from tpuport_agent import xla_cpu

            xla_cpu.on_dynamo(torch)

        if self.phases is not None:
            self.guarded(self.phases.dynamo_imported, torch)
        dynamo = torch._dynamo
        agent = self

        def register():
            try:
                callback.on_compile_end(agent.on_compile_end)
            except Exception:
                pass

        register()
        original_reset = dynamo.reset

        def reset(*args, **kwargs):
            agent.poll_compiles()
            result = original_reset(*args, **kwargs)
            register()
            return result

        reset.__wrapped__ = original_reset
        reset.__doc__ = original_reset.__doc__
        dynamo.reset = reset

        class LimitHandler(logging.Handler):
            def emit(self, record):
                try:
                    if "recompile_limit" not in str(record.msg) and "recompile_limit" not in str(record.args[:1]):
                        return
                    args = record.args or ()
                    func = str(args[2]) if len(args) > 2 else ""
                    reason = str(args[3]) if len(args) > 3 else None
                    name, file, line = func, "", 0
                    if func.startswith("'") and " (" in func:
                        name = func[1:func.index("'", 1)]
                        loc = func[func.index(" (") + 2:].rstrip(")")
                        file, _, ln = loc.rpartition(":")
                        line = int(ln) if ln.isdigit() else 0
                    agent.em.emit("compile", compile_id="", function=name, file=file, line=line,
                                  reason=reason, seconds=0.0, kind="forward", step=agent.step,
                                  status="limit_hit", limit=str(args[0]) if args else "")
                except Exception:
                    pass

        logging.getLogger("torch._dynamo.convert_frame").addHandler(LimitHandler(level=logging.WARNING))

    def on_compile_end(self, args):
        # Dynamo records a compile's metrics as the compile finishes; read them now and again
        # when steps are next sent (in case the record lands after this callback).
        self.compiles_pending = True
        self.guarded(self.send_buffered)
        self.guarded(self.poll_compiles)

    def poll_compiles(self):
        torch = self.torch
        if torch is None or "torch._dynamo" not in sys.modules:
            return
        try:
            metrics = torch._dynamo.utils.get_compilation_metrics()
        except Exception:
            return
        for m in metrics:
            # torch._dynamo.reset() restarts compile ids but keeps the metrics: the start time
            # tells records apart.
            key = (getattr(m, "compile_id", None), getattr(m, "is_forward", None), getattr(m, "co_name", None),
                   getattr(m, "start_time", None) or getattr(m, "start_time_us", None))
            if key in self.seen_compiles:
                continue
            self.seen_compiles.add(key)
            fail = getattr(m, "fail_type", None)
            seconds = getattr(m, "entire_frame_compile_time_s", None)
            if seconds is None:
                seconds = getattr(m, "backend_compile_time_s", None) or 0.0
            is_forward = getattr(m, "is_forward", True)
            extra = state.GRAPH_INFO.get(str(getattr(m, "compile_id", "") or ""), {})
            self.em.emit(
                "compile",
                compile_id=str(getattr(m, "compile_id", "") or ""),
                function=str(getattr(m, "co_name", "") or ""),
                file=str(getattr(m, "co_filename", "") or ""),
                line=int(getattr(m, "co_firstlineno", 0) or 0),
                reason=getattr(m, "recompile_reason", None),
                seconds=round(float(seconds or 0.0), 6),
                kind="forward" if is_forward is not False else "backward",
                step=self.step,
                status="failed" if fail else "ok",
                fail_reason=getattr(m, "fail_reason", None) if fail else None,
                graph_ops=getattr(m, "graph_op_count", None),
                **extra,
            )

    def tpu_cache_stats(self):
        if not self.target_tpu or self.torch is None:
            return None
        if state.XLA_CPU:
            from tpuport_agent import xla_cpu

            return xla_cpu.cache_stats(self.torch)
        try:
            s = self.torch.tpu._get_cache_stats()
            return {"requests": int(s.num_cache_reqs), "hits": int(s.num_cache_hits),
                    "compilations": int(s.num_compilations)}
        except Exception:
            return None

    # ---- memory ------------------------------------------------------------------------------

    def maybe_memory(self, force):
        now = time.perf_counter()
        if not force and now - self.last_memory < 0.25:
            return
        self.last_memory = now
        fields = {"step": self.step, "allocated": None, "reserved": None, "peak": None, "rss": rss()}
        device = self.device_memory()
        if device:
            fields.update(device)
        self.em.emit("memory", **fields)

    def device_memory(self):
        if state.ACTIVE:
            from tpuport_agent import sim

            return sim.memory()
        if state.XLA_CPU:
            from tpuport_agent import xla_cpu

            return xla_cpu.memory()
        torch = self.torch
        if torch is None:
            return None
        try:
            acc = torch.accelerator
            if not acc.is_available():
                return None
            return {"allocated": int(acc.memory_allocated()), "reserved": int(acc.memory_reserved()),
                    "peak": int(acc.max_memory_allocated())}
        except Exception:
            return None

    # ---- warnings ----------------------------------------------------------------------------

    def install_warning_hook(self):
        import warnings

        original = warnings.showwarning
        agent = self

        def showwarning(message, category, filename, lineno, file=None, line=None):
            agent.em.emit("warning", category=getattr(category, "__name__", str(category)),
                          message=str(message), file=str(filename), line=int(lineno or 0))
            return original(message, category, filename, lineno, file, line)

        warnings.showwarning = showwarning

    # ---- running the script ------------------------------------------------------------------

    def on_torch(self, torch):
        """Right after `import torch` finished, before the script's next line."""
        if self.config.get("target") == "sim":
            from tpuport_agent import sim

            sim.install(self.config, self)
            self.sim_memory = sys.modules["tpuport_agent.sim_memory"].TRACKER
        elif self.config.get("target") == "xla-cpu":
            from tpuport_agent import xla_cpu

            xla_cpu.install(torch, self.config, self)
            self.sim_memory = sys.modules["tpuport_agent.sim_memory"].TRACKER
        elif self.config.get("target") == "host" and self.config.get("cuda_on_cpu"):
            from tpuport_agent import host_cuda

            if host_cuda.install(torch):
                self.em.emit("log", stream="tpuport", line="host: no CUDA here; the script's CUDA devices run on the CPU")
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self.torch = torch
        if self.config.get("target") != "host":
            self.placement = placement.Placement(self, torch, self.config.get("target"))
            self.placement.install()
        register_optimizer_step_post_hook(self.on_optimizer_step)
        self.install_compile_hooks(torch)
        self.install_sync_counters(torch)
        if self.phases is not None:
            self.phases.install(torch)
        if os.environ.get("WORLD_SIZE", "1") not in ("", "1"):
            from tpuport_agent import collectives

            collectives.install(self, torch)
        if self.numerics:
            numerics.install(self, torch)
        elif self.config.get("check"):
            check.install(self, torch)
        # TorchTPU settings that must precede the first compile (from `tpuport run` flags).
        for call in self.config.get("calls", []):
            try:
                exec(call, {"torch": torch})
            except Exception as e:
                raise RuntimeError("tpuport could not apply `%s` for the chosen target: %s" % (call, e)) from e

    def run(self):
        import runpy
        import signal

        cfg = self.config
        script = cfg["script"]
        # Python's own SIGINT handling: Ctrl-C (forwarded by the parent) raises KeyboardInterrupt.
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        except ValueError:
            pass
        module = cfg.get("module")
        if module:
            sys.argv = [module] + list(cfg.get("args", []))
            sys.path.insert(0, os.getcwd())  # as `python -m` does
        else:
            sys.argv = [script] + list(cfg.get("args", []))
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        self.install_warning_hook()
        if cfg.get("target") == "xla-cpu":
            from tpuport_agent import xla_cpu

            xla_cpu.prepare(cfg)
        self.script_start = time.perf_counter()

        # Observe torch from the moment the script imports it (importing it here would cost
        # every run seconds, and scripts that never use torch should not pay for it).
        if "torch" in sys.modules:
            self.on_torch(sys.modules["torch"])
        else:
            sys.meta_path.insert(0, _PostImport("torch", self.on_torch))
        self.em.emit("hello", python=sys.version.split()[0], executable=sys.executable, pid=os.getpid())
        self.script_start = time.perf_counter()
        code = 0
        try:
            if module:
                if module == "torch" or module.startswith("torch."):
                    import torch  # noqa: F401  (the sim serves torch.tpu once torch is imported)
                served = sys.modules.get(module)
                if getattr(served, "__name__", "").startswith("tpuport_agent.simtpu") and hasattr(served, "main"):
                    served.main()  # the sim's torch.tpu.* module (`python -m torch.tpu.distributed`)
                else:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(script, run_name="__main__")
        except SystemExit as e:
            code = exit_code(e.code)
            if code != 0:
                self.em.emit("exit_status", status="exit", code=code)
        except numerics.NumericsDone:
            code = 0
        except StepLimit:
            code = 0
            sys.stderr.write("tpuport: stopped after %d steps (--max-steps)\n" % self.step)
        except KeyboardInterrupt as e:
            errors.show(e)
            code = 130
            self.em.emit("exit_status", status="interrupted", code=code)
        except BaseException as e:
            tb = errors.show(e)
            code = 1
            self.em.emit("exception", exception={"type": type(e).__name__, "message": str(e), "traceback": tb})
        finally:
            try:
                self.send_buffered()
                self.poll_compiles()
                self.flush_syncs(self.step + 1 if self.sync_counts else self.step)
                self.maybe_memory(force=True)
                sim_ops = sys.modules.get("tpuport_agent.sim_ops")
                line = sim_ops.summary() if sim_ops is not None else None
                if line:
                    sys.stderr.write("[tpuport sim] %s\n" % line)
            except Exception:
                pass
        return code


class _PostImport:
    """A meta-path finder that runs a callback right after one module has been imported."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback
        self.busy = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self.busy:
            return None
        import importlib.util

        self.busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return None
        original = spec.loader.exec_module
        callback = self.callback
        finder = self

        def exec_module(module):
            original(module)
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
            callback(module)

        spec.loader.exec_module = exec_module
        return spec


def exit_code(value):
    """What `python script.py` exits with for sys.exit(value)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value & 0xFF
    sys.stderr.write("%s\n" % (value,))
    return 1


def rss():
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def close():
    """The end of the script, as the interpreter ends `python script.py` and in its order, but
    while the interpreter is still whole: wait for the script's non-daemon threads, run its
    atexit handlers, then free its objects. Its globals are a reference cycle (its functions
    hold them) that the interpreter would otherwise free while finalizing, when a gloo process
    group's worker threads (held by a DDP model) can no longer take the GIL and the process
    aborts after the script has finished ("terminate called without an active exception",
    pytorch/pytorch#179291). The interpreter's own exit then finds nothing left to run."""
    import atexit
    import gc
    import threading

    try:
        threading._shutdown()
    except Exception:
        pass
    atexit._run_exitfuncs()
    gc.collect()


def main():
    """Entry point of both the embedded worker and ``python -m tpuport_agent``."""
    global _AGENT
    config = json.loads(os.environ["TPUPORT_AGENT_CONFIG"])
    _AGENT = Agent(config)
    code = _AGENT.run()
    close()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    return code


def agent():
    """The running agent (for the ``tpuport`` helper module)."""
    return _AGENT
