"""``torch.tpu.distributed`` on the sim target (one host): launch variables, SPMD helpers and the
device mesh, with gloo doing the communication (backend "tpu_dist", registered by the sim).

``main()`` prints the launch variables as ``python -m torch.tpu.distributed`` does.
"""

import functools
import os
import socket
import time

from tpuport_agent import state

window_num_stripes = 4
window_stripe_chunk_mb = 8


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def set_tpu_launch_env(*, nnodes=None, nproc_per_node=None):
    """Single host only on the sim: nproc_per_node devices (default: WORLD_SIZE, else 1); the
    topology for that count comes from the simulated chip's record."""
    hosts = [h for h in os.environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h]
    if len(hosts) > 1 or (nnodes or 1) > 1 or os.environ.get("JOB_COMPLETION_INDEX"):
        raise RuntimeError("set_tpu_launch_env(): the tpuport sim target emulates one host; multi-host launch "
                           "variables need the real TPU slice")
    env = os.environ
    env.setdefault("TORCH_TPU_XPROF_SESSION_ID", str(time.time_ns()))
    count = nproc_per_node or int(env.get("WORLD_SIZE", "0") or 0) or 1
    if "TORCH_TPU_SLICEBUILDER_ADDRESSES" not in env:
        env["TORCH_TPU_SLICEBUILDER_ADDRESSES"] = ",".join("localhost:%d" % _free_port() for _ in range(count))
    if "TORCH_TPU_TOPOLOGY" not in env:
        # JSON object keys are strings: the chip record maps "4" to "2,2,1".
        topo = state.CHIP["topologies"].get(str(count))
        if topo is None:
            raise RuntimeError("No TPU topology found for count: %d" % count)
        env["TORCH_TPU_TOPOLOGY"] = topo


def main():
    set_tpu_launch_env()
    env = os.environ
    print('TORCH_TPU_TOPOLOGY="%s"' % env["TORCH_TPU_TOPOLOGY"])
    print('TORCH_TPU_SLICEBUILDER_ADDRESSES="%s"' % env["TORCH_TPU_SLICEBUILDER_ADDRESSES"])
    print('TORCH_TPU_XPROF_SESSION_ID="%s"' % env["TORCH_TPU_XPROF_SESSION_ID"])
    print("WORLD_SIZE=%d" % len(env["TORCH_TPU_SLICEBUILDER_ADDRESSES"].split(",")))
    print('NODE_RANK="%s"' % env.get("NODE_RANK", "0"))
    for name in ("NNODES", "MASTER_ADDR", "MASTER_PORT"):
        if name in env:
            print('%s="%s"' % (name, env[name]))


def spmd_safe(func):
    """On a TPU, lets collectives fuse with the ops around them; the host runs them as written."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def topology_aware_mesh(mesh_shape, *, dcn_mesh_shape=None, allow_split_physical_axes=False,
                        contiguous_submeshes=False):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("PyTorch distributed process group must be initialized before calling topology_aware_mesh.")
    shape = tuple(mesh_shape)
    if dcn_mesh_shape is not None:
        shape = tuple(a * b for a, b in zip(shape, dcn_mesh_shape))
    return init_device_mesh(state.HOST, shape)


if __name__ == "__main__":
    main()
