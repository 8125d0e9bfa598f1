"""``torch.tpu.profiler`` on the sim target: TpuProfilerConfig builds and checks the same
configuration string as TorchTPU's; the host's profiler ignores the TPU part."""

import torch.profiler

_STABLE = ("host_tracer_level", "device_tracer_level", "python_tracer_level", "run_dir", "worker_rank")


class TpuProfilerConfig(torch.profiler._ExperimentalConfig):
    def __init__(self, *, host_tracer_level=2, device_tracer_level=1, python_tracer_level=0, run_dir=None,
                 worker_rank=None, experimental_options=None, check_experimental_options=True):
        if host_tracer_level not in (0, 1, 2, 3):
            raise ValueError("host_tracer_level must be 0-3, got %r" % (host_tracer_level,))
        if device_tracer_level not in (0, 1):
            raise ValueError("device_tracer_level must be 0 or 1, got %r" % (device_tracer_level,))
        if python_tracer_level not in (0, 1):
            raise ValueError("python_tracer_level must be 0 or 1, got %r" % (python_tracer_level,))
        parts = ["host_tracer_level:%d" % host_tracer_level, "device_tracer_level:%d" % device_tracer_level,
                 "python_tracer_level:%d" % python_tracer_level]
        if run_dir is not None:
            parts.append("run_dir:%s" % run_dir)
        if worker_rank is not None:
            if not isinstance(worker_rank, str) or ":" in worker_rank or "," in worker_rank:
                raise ValueError("worker_rank must be a str without ':' or ',', got %r" % (worker_rank,))
            parts.append('worker_rank:"%s"' % worker_rank)
        for k, v in (experimental_options or {}).items():
            if k in _STABLE:
                raise ValueError("experimental option %r clashes with a stable option" % (k,))
            parts.append("%s:%s" % (k, v))
        if experimental_options:
            parts.append("check_experimental_options:%s" % ("true" if check_experimental_options else "false"))
        config = ",".join(parts)
        super().__init__(custom_profiler_config=config)  # before any attribute: a pybind base
        self.custom_profiler_config = config
