# Classes of programs left half-ported on real code (issue 25's real-code harness): each case is
# a whole program's pattern, ported whole under `--to portable`.
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn

# 1. Backend options listed in a comment are no reason for a backend (below: a reason given).
backend = 'nccl' # 'nccl', 'gloo', etc.
other_backend = 'nccl' # must stay nccl: the all-to-all hangs on gloo


def ddp_setup():
    # 2. `set_device` of a device string with an index, assigned just before: the index.
    dist.init_process_group(backend=backend)
    local_rank = int(os.environ['LOCAL_RANK'])
    device = f'cuda:{local_rank}'
    torch.cuda.set_device(device)
    return device


def ddp_setup_later(rank):
    # ... not where the name is rebound in between (or the index is).
    device = f'cuda:{rank}'
    rank = rank + 1
    torch.cuda.set_device(device)
    return device


# 4. A chain that also tests MPS through the program's own helper, returning the device.
def mps_is_available():
    try:
        return torch.backends.mps.is_available()
    except AttributeError:
        return False


def gpu_device():
    if torch.cuda.is_available():
        return torch.device('cuda')
    elif mps_is_available():
        return torch.device('mps')
    else:
        return torch.device('cpu')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--no-cuda', action='store_true', default=False)
    args = parser.parse_args()
    # 3. A flag named for CUDA whose every read picks the device or DataLoader settings.
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    device = torch.device("cuda" if use_cuda else "cpu")
    train_kwargs = {'batch_size': 64}
    if use_cuda:
        cuda_kwargs = {'num_workers': 1, 'pin_memory': True}
        train_kwargs.update(cuda_kwargs)
    # ... but not one that is also reported as CUDA's.
    has_cuda = torch.cuda.is_available()
    print(f"CUDA: {has_cuda}")
    model = nn.Linear(4, 4).to(device)
    return model, train_kwargs, gpu_device()


if __name__ == "__main__":
    main()
