"""Run under `tpuport run --target sim`: checks every public name of torch.tpu (torch_tpu 0.2.0),
torch.accelerator, torch.compile's TorchTPU semantics, tpu_dist, and the precision emulation.

It also runs on xla-cpu (TorchTPU itself, tests/integration/sim.rs): every check the sim passes
must hold on TorchTPU too, so the sim's copy of TorchTPU cannot drift unseen. The few checks of
what only the sim does (a TPU kernel it cannot run) are skipped there (SIM_ONLY).

Prints `ok <name>` for each check that passed and exits non-zero at the first failure.
"""
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch import nn

tpu = torch.tpu
checked = []
SIM_ONLY = "torch_tpu" not in sys.modules


def ok(name):
    checked.append(name)
    print("ok", name, flush=True)


def raises(exc, text, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except exc as e:
        assert text in str(e), "%s: %r does not contain %r" % (fn, str(e), text)
        return
    raise AssertionError("%s did not raise %s" % (fn, exc.__name__))


# ---- the internal helpers raise TorchTPU's exact text --------------------------------------------
INTERNAL = {
    "is_available": ("torch.accelerator.is_available", ()),
    "device_count": ("torch.accelerator.device_count", ()),
    "current_device": ("torch.accelerator.current_device_index", ()),
    "set_device": ("torch.accelerator.set_device_index", (0,)),
    "synchronize": ("torch.accelerator.synchronize", ()),
    "set_stream": ("torch.accelerator.set_stream", (None,)),
    "current_stream": ("torch.accelerator.current_stream", ()),
    "get_rng_state": ("torch.accelerator.random.get_rng_state", ()),
    "initial_seed": ("torch.accelerator.random.initial_seed", ()),
}
for name, (prefer, args) in INTERNAL.items():
    raises(RuntimeError, "%s is internal to TorchTPU and can only be called by the PyTorch framework (torch and "
           "torch_tpu). Use %s instead." % (name, prefer), getattr(tpu, name), *args)
    ok(name)
raises(RuntimeError, "_DeviceContext is internal to TorchTPU and can only be called by the PyTorch framework (torch "
       "and torch_tpu). Use torch.accelerator.device_index instead.", tpu.device, 0)
ok("device")
# TorchTPU reads TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS once, at import: set later, it changes nothing
# (sim_legacy.py runs with it set from the start).
os.environ["TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS"] = "1"
raises(RuntimeError, "device_count is internal to TorchTPU", tpu.device_count)
del os.environ["TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS"]
ok("TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS")

# ---- experimental names ---------------------------------------------------------------------------
assert tpu.eager_mode == tpu.EagerMode.DEFER_NEVER, tpu.eager_mode
with tpu.set_eager_mode(tpu.EagerMode.DEFER_AND_FUSE):
    assert tpu.eager_mode == tpu.EagerMode.DEFER_AND_FUSE
assert tpu.eager_mode == tpu.EagerMode.DEFER_NEVER
tpu.eager_mode = tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
assert int(tpu.eager_mode.value) == 2 and tpu.eager_mode.value != 2  # a pybind enum in TorchTPU
tpu.eager_mode = tpu.EagerMode.DEFER_NEVER
ok("EagerMode")
ok("eager_mode")
ok("set_eager_mode")

P = tpu.Precision
assert [int(p) for p in (P.DEFAULT, P.HIGH, P.HIGHEST)] == [0, 1, 2] and P.HIGH != 1  # a pybind enum in TorchTPU
ok("Precision")
raises(ValueError, "expected to be one of 'PrecisionConfig.DEFAULT', 'PrecisionConfig.HIGH', or "
       "'PrecisionConfig.HIGHEST', got 'highest'", lambda: tpu.precision("highest").__enter__())
ok("precision")

props = tpu.get_device_properties()
assert props.name == "TPU v5e" and props.total_memory == 16 << 30 and props.multi_processor_count == 1, props
assert not hasattr(props, "devices_per_chip") and not hasattr(props, "bf16_flops"), props  # TorchTPU has neither
ok("get_device_properties")
assert tpu.get_device_name() == "TPU v5e"
ok("get_device_name")
dtypes = tpu.get_amp_supported_dtype()
assert torch.bfloat16 in dtypes and torch.float32 in dtypes and len(dtypes) >= 19, dtypes
ok("get_amp_supported_dtype")
assert tpu.is_initialized() is True
ok("is_initialized")

tpu.manual_seed(7)
a = torch.randn(3, device="tpu")
tpu.manual_seed_all(7)
assert torch.equal(a, torch.randn(3, device="tpu"))
ok("manual_seed")
ok("manual_seed_all")
state = tpu.default_generators[0].get_state()
b = torch.randn(3, device="tpu")
tpu.set_rng_state(state)
assert torch.equal(b, torch.randn(3, device="tpu"))
ok("default_generators")
ok("set_rng_state")

s = tpu.Stream(priority=0)
raises(NotImplementedError, "Streams and Events are not fully implemented in TorchTPU", s.query)
assert tpu.default_stream().stream_id == 0
with tpu.stream(s):
    pass
ok("Stream")
ok("default_stream")
ok("stream")
start, end = tpu.Event(enable_timing=True), tpu.Event(enable_timing=True)
start.record()
torch.randn(256, 256, device="tpu").sum()
end.record()
assert end.query() in (True, False)  # the work may still be in flight (async, as on a TPU)
raises(RuntimeError, "Both events must be completed before calculating elapsed time", start.elapsed_time, end)
end.synchronize()
assert start.elapsed_time(end) >= 0.0
raises(NotImplementedError, "Streams and Events are not fully implemented in TorchTPU",
       tpu.Event(interprocess=True).ipc_handle)
ok("Event")
with tpu.device_of(a):
    pass
ok("device_of")

with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    raises(RuntimeError, "PyTorch distributed process group must be initialized before calling "
           "topology_aware_mesh.", tpu.topology_aware_mesh, (1,))
    assert any("Use torch.tpu.distributed.topology_aware_mesh instead." in str(x.message) for x in w)
ok("topology_aware_mesh")

# ---- submodules -------------------------------------------------------------------------------------
from torch.tpu import compiler, distributed, ops, optimizers, pallas, profiler  # noqa: E402

with compiler.custom_compiler_options({"xla_optimization_level": "O3"}):
    with compiler.custom_compiler_options({"a": "1"}):
        if hasattr(compiler, "_current_options"):  # the sim's own record of them
            assert compiler._current_options() == {"xla_optimization_level": "O3", "a": "1"}
raises(RuntimeError, "push_compiler_options(): unknown XLA compiler effort level: O9",
       lambda: compiler.custom_compiler_options({"xla_optimization_level": "O9"}).__enter__())
raises(TypeError, "push_compiler_options(): incompatible function arguments",
       lambda: compiler.custom_compiler_options({"a": 1}).__enter__())
ok("compiler.custom_compiler_options")
assert distributed.window_num_stripes == 4 and distributed.window_stripe_chunk_mb == 8
assert distributed.spmd_safe(lambda x: x + 1)(1) == 2
distributed.set_tpu_launch_env()
assert os.environ["TORCH_TPU_TOPOLOGY"] == "1,1,1" and os.environ["TORCH_TPU_SLICEBUILDER_ADDRESSES"].startswith("localhost:")
ok("distributed")
x = torch.randn(1, 1, 8, 8, device="tpu")
pool = ([2, 2], [2, 2], [0, 0], [1, 1], False)  # every argument required, as in TorchTPU
raises(TypeError, "missing", ops.max_pool2d, x, 2)
assert torch.equal(ops.max_pool2d(x, *pool), torch.nn.functional.max_pool2d(x, 2))
g = ops.max_pool2d_backward(torch.ones(1, 1, 4, 4, device="tpu"), x, *pool)
assert g.shape == x.shape and float(g.sum()) == 16.0
if SIM_ONLY:
    raises(NotImplementedError, "no host version", ops.ragged_dot, x, x)
ok("ops")
# TorchTPU's optimizers are stateless functional ones, not torch.optim's.
assert not issubclass(optimizers.AdamW, torch.optim.Optimizer) and not issubclass(optimizers.Sgd, torch.optim.Optimizer)
if SIM_ONLY:  # the sim does not emulate them, and says so
    raises(NotImplementedError, "stateless functional optimizers", optimizers.AdamW, lr=1e-3)
    raises(NotImplementedError, "SingleTraceTrainer", optimizers.SingleTraceTrainer)
ok("optimizers")
raises(ImportError, "JAX/Pallas is not available. Please install JAX to use this API", lambda: pallas.jax_op)
ok("pallas")
cfg = profiler.TpuProfilerConfig(run_dir="/tmp/x", worker_rank="3")
assert cfg.custom_profiler_config == 'host_tracer_level:2,device_tracer_level:1,python_tracer_level:0,run_dir:/tmp/x,worker_rank:"3"'
raises(ValueError, "worker_rank", profiler.TpuProfilerConfig, worker_rank="a:b")
ok("profiler")
raises(AttributeError, "module 'torch.tpu' has no attribute 'memory_allocated'", lambda: tpu.memory_allocated)
assert set(tpu.__all__) >= set(checked) - {"TORCH_TPU_ALLOW_LEGACY_DEVICE_APIS"} - {n for n in checked if "." in n}

# ---- torch.accelerator --------------------------------------------------------------------------------
acc = torch.accelerator
assert acc.is_available() and acc.device_count() == 1 and acc.current_device_index() == 0
dev = acc.current_accelerator()
assert dev.type == "tpu" and str(dev) == "tpu" and dev.index is None, dev  # TorchTPU's answer
assert "%s:%d" % (dev, 0) == "tpu:0"  # how FSDP2's device mesh names a rank's device
assert torch.zeros(2, device=dev).sum().item() == 0 and nn.Linear(2, 2).to(dev)(torch.ones(1, 2, device=dev)).shape == (1, 2)
acc.set_device_index(0)
raises(RuntimeError, "Device index 1 is out of bounds of the number of addressable devices 1", acc.set_device_index, 1)
acc.synchronize()
before = acc.memory_allocated()
big = torch.empty(1 << 20, dtype=torch.float32, device="tpu")  # 4 MiB
assert acc.memory_allocated() - before == 4 << 20, (before, acc.memory_allocated())
assert acc.max_memory_allocated() >= acc.memory_allocated()
free, total = acc.get_memory_info()
assert total == 16 << 30 and free == total - acc.memory_allocated()
del big
assert acc.memory_allocated() == before
ok("torch.accelerator")

# ---- torch.compile as TorchTPU --------------------------------------------------------------------------
# TorchTPU's compile errors come at the first call, from the backend (Dynamo's BackendCompilerFailed).
from torch._dynamo.exc import BackendCompilerFailed  # noqa: E402

one = torch.ones(1, 2, device="tpu")
for kwargs, text in (({"dynamic": True}, "NotImplementedError: TPU backend does not support torch.compile(..., dynamic=True, ...)"),
                     ({"backend": "inductor"}, "RuntimeError: torch.compile(..., backend='inductor') on TPU is experimental"),
                     ({"mode": "max-autotune"}, "TypeError: Unexpected keyword arguments: {'mode': 'max-autotune'}")):
    raises(BackendCompilerFailed, text, torch.compile(nn.Linear(2, 2).to("tpu"), **kwargs), one)
tpu.allow_excess_precision = True
assert tpu.allow_excess_precision is True
compiled_before = len(torch._dynamo.utils.get_compilation_metrics())
f = torch.compile(lambda t: t * 2 + 1)
for n in (3, 4, 5):
    f(torch.randn(n, device="tpu"))
compiled = len(torch._dynamo.utils.get_compilation_metrics()) - compiled_before
assert compiled == 3, "dynamic=False: one compile per new shape, got %d" % compiled
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    tpu.allow_excess_precision = False
    if SIM_ONLY:  # tpuport's own advice (TorchTPU flips it silently)
        assert any("latching" in str(x.message) for x in w), [str(x.message) for x in w]
ok("torch.compile")
ok("allow_excess_precision")

# ---- distributed backend --------------------------------------------------------------------------------
assert "tpu_dist" in dist.Backend.backend_list
# As TorchTPU does in a one-device process: a one-rank tpu_dist group, and DDP with device_ids of
# the process's device (inputs go to tpu:i, which is that device).
import socket

with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
dist.init_process_group("tpu_dist", init_method="tcp://127.0.0.1:%d" % port, world_size=1, rank=0)
ddp = nn.parallel.DistributedDataParallel(nn.Linear(2, 2).to("tpu"), device_ids=[0])
ddp(torch.ones(3, 2, device="tpu")).sum().backward()
if SIM_ONLY:  # on TorchTPU, device_ids=[1] fails at the forward (IndexError); the sim says so up front
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        nn.parallel.DistributedDataParallel(nn.Linear(2, 2).to("tpu"), device_ids=[1])
    assert any("device_ids=[1]" in str(x.message) and "IndexError" in str(x.message) for x in w), w
dist.destroy_process_group()
ok("tpu_dist")

# ---- precision ---------------------------------------------------------------------------------------------
from tpuport_agent import sim_precision  # noqa: E402

err = {level: sim_precision.relative_error(torch, level) for level in (0, 1, 2)}
print("precision relative error vs float64 (256x256):", " ".join("%s=%.3g" % (k, v) for k, v in
      zip(("default", "high", "highest"), err.values())), flush=True)
assert 1.5e-3 < err[0] < 4e-3, err
assert 1e-6 < err[1] < 1e-5, err
assert err[2] < 2.5e-7, err
assert torch.get_float32_matmul_precision() == "medium"
torch.set_float32_matmul_precision("high")
assert torch.get_float32_matmul_precision() == "high"
torch.set_float32_matmul_precision("medium")
raises(ValueError, "expected to be one of 'highest', 'high', or 'medium', got 'low'", torch.set_float32_matmul_precision, "low")
# backward is emulated too: weight grads of a Linear at DEFAULT differ from HIGHEST by ~bf16 error.
lin = nn.Linear(128, 128, bias=False).to("tpu")
inp = torch.randn(64, 128, device="tpu")
grads = []
for level in (tpu.Precision.DEFAULT, tpu.Precision.HIGHEST):
    lin.zero_grad()
    with tpu.precision(level):
        lin(inp).square().sum().backward()
    grads.append(lin.weight.grad.clone())
rel = float((grads[0] - grads[1]).norm() / grads[1].norm())
# On TorchTPU the backward runs on autograd's device thread, where torch.tpu.precision's scope
# (per thread) does not reach: both backwards there run at the global precision (README).
assert 5e-4 < rel < 1e-2 if SIM_ONLY else rel == 0.0, rel
conv = nn.Conv2d(4, 8, 3).to("tpu")
cx = torch.randn(2, 4, 16, 16, device="tpu")
with tpu.precision(tpu.Precision.HIGHEST):
    hi = conv(cx)
lo = conv(cx)
rel = float((lo - hi).norm() / hi.norm())
# xla-cpu keeps TorchTPU's own convolution kernel, float32 on XLA:CPU (README: what it emulates).
assert 5e-4 < rel < 1e-2 if SIM_ONLY else rel < 1e-6, rel
ok("precision emulation")
# Run with --cpu-fallback: an op a TPU lacks runs on the host and is listed at the end.
assert torch.median(torch.tensor([3.0, 1.0, 2.0], device="tpu")).item() == 2.0
ok("cpu fallback")
# TorchTPU's generated methods: Tensor.is_tpu, Tensor.tpu(), Module.tpu().
x = torch.randn(2, 3).tpu()
assert x.is_tpu and torch.randn(2, device="tpu").is_tpu
assert nn.Linear(3, 1).tpu()(x).shape == (2, 1)
ok("is_tpu")
# A TPU VM's torch.cuda (run with TPUPORT_SIM_HIDE_CUDA=1, as on a CUDA host): the script's calls
# get no-driver answers, torch's own callers the host's.
assert torch.cuda.is_available() is False and torch.cuda.device_count() == 0
if SIM_ONLY:  # the sim's own mechanism (on xla-cpu this host's torch.cuda simply has no driver)
    assert getattr(torch.cuda.synchronize, "_tpuport_sim", False) and getattr(torch.Tensor.cuda, "_tpuport_sim", False)
raises(RuntimeError, "Found no NVIDIA driver on your system", torch.cuda.synchronize)
raises(RuntimeError, "Found no NVIDIA driver on your system", torch.ones(2).to, "cuda")
raises(RuntimeError, "Found no NVIDIA driver on your system", torch.zeros, 2, device="cuda:0")
assert torch.device("cuda").type == "cuda"  # naming a device is fine on a TPU VM; using it is not
if SIM_ONLY:
    from tpuport_agent import sim_cuda  # noqa: E402


    class FakeCuda:  # a host whose CUDA works
        is_available = staticmethod(lambda: True)
        synchronize = staticmethod(lambda: "synced")


    class FakeTensor:
        def cuda(self):
            return "on cuda"


    sim_cuda.hide_cuda(FakeCuda, FakeTensor, FakeTensor)
    assert FakeCuda.is_available() is False
    raises(RuntimeError, "Found no NVIDIA driver", FakeCuda.synchronize)
    raises(RuntimeError, "Found no NVIDIA driver", FakeTensor().cuda)
    inside_torch = {"__name__": "torch.nn.parallel.distributed", "FakeCuda": FakeCuda, "FakeTensor": FakeTensor}
    exec("seen = (FakeCuda.is_available(), FakeCuda.synchronize(), FakeTensor().cuda())", inside_torch)
    assert inside_torch["seen"] == (True, "synced", "on cuda"), inside_torch["seen"]
ok("cuda hidden")
print("checked", len(checked))
