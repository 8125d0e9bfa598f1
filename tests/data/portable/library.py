# Library modules (no `__main__` block, no module-level call) reached through a dynamic import
# (`importlib.import_module(f"pkg.ml_{backend}.train")`) that the program graph cannot follow.
# A device chosen by a CUDA check whose branch also does other work is ported with the check:
# left alone, the program trains on the CPU of a TPU VM and exits 0.
import torch
import torch.nn as nn


# 1. The CUDA branch logs the device count and seeds CUDA before it picks the device; the
#    fallback is `torch.device("cpu")`: ported (the same on CUDA, the TPU on a TPU VM). A batch
#    scaled by the count would be per-device work, which a TorchTPU process (one device) does
#    not share: that keeps the check CUDA's (safety::device_count_uses).
def init_training(args, model):
    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        print("devices:", torch.cuda.device_count())
        torch.cuda.manual_seed_all(args.seed)
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    return model.to(device)


# 2. The branch also tunes cuDNN (not ported under --to portable): the check stays CUDA's,
#    with the reason.
def init_eval(model):
    if torch.cuda.is_available():
        torch.backends.cudnn.benchmark = True
        device = "cuda"
    else:
        device = "cpu"
    return model.to(device)


# 3. A one-line branch with `torch.device("cpu")` as the fallback: ported.
def pick():
    if torch.cuda.is_available():
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    return nn.Linear(2, 2).to(device)
