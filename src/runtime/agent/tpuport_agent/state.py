"""The sim target's shared state: what ``sim.install`` sets up and ``torch.tpu`` (``simtpu``), the
HBM tracker (``sim_memory``) and the agent read or change while the script runs.

It imports nothing from this package (nor anything else), so every module can import it and no
import circle runs through it. Outside the sim target it keeps its defaults (``ACTIVE`` False).
"""

# The sim is installed.
ACTIVE = False
# The xla-cpu target is installed (TorchTPU itself on XLA:CPU; ``xla_cpu``).
XLA_CPU = False
# The host device the "tpu" device is mapped onto: "cuda" if present, else "cpu".
HOST = "cpu"
# The script is shown a TPU VM's torch.cuda (no driver): set on a CUDA host (``sim_cuda``).
HIDE_CUDA = False
# The chip being simulated: its record from the Rust chip table (``runtime/chips.rs``), as the
# agent's configuration carries it: name, device_name, pci_device, hbm_per_device,
# devices_per_chip, bf16_flops_per_chip, topologies ({device count: TORCH_TPU_TOPOLOGY}).
CHIP = None
# HBM per device in effect: ``--hbm``, else the chip's.
HBM = 0
# TorchTPU state the sim keeps (torch.tpu reads and writes these).
EAGER_MODE = 1  # DEFER_NEVER (strict); 0 = DEFER_AND_FUSE, 2 = DEFER_NEVER_AND_LAUNCH_BLOCKING
DEBUG_CHECKS = False
EXCESS_PRECISION = False
EXCESS_LATCHED = None  # the value the first compile saw
COMPILED = False
# Per compile id: the graph's size and backend time (the "tpu" compile backend records them).
GRAPH_INFO = {}
