"""Distributed data-parallel training of a small CNN on synthetic data.

Launch with torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node=4 ddp_train.py --epochs 5

Each process drives a single CUDA device and gradients are all-reduced over
NCCL. For quick single-process debugging on one GPU, pass --debug and run
the script directly with python.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    parser = argparse.ArgumentParser(description="DDP training on synthetic images")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64, help="per-GPU batch size")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--num-samples", type=int, default=8192)
    parser.add_argument("--device", type=str, default="cuda")
    parser.add_argument("--backend", type=str, default="nccl", help="distributed backend")
    parser.add_argument("--checkpoint", type=str, default="checkpoint.pt")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--debug", action="store_true", help="run a single process on GPU 0")
    return parser.parse_args()


class ConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(32)
        self.bn2 = nn.BatchNorm2d(64)
        self.fc1 = nn.Linear(64 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def make_dataset(num_samples, seed=0):
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(num_samples, 3, 32, 32, generator=g)
    labels = torch.randint(0, 10, (num_samples,), generator=g)
    return TensorDataset(images, labels)


def setup_single_process():
    """Debug mode: pretend to be a world of size one on the first CUDA device."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    torch.cuda.set_device("cuda:0")
    dist.init_process_group(backend="nccl", rank=0, world_size=1)


def log_memory(rank, device, tag):
    allocated = torch.cuda.memory_allocated(device=device) / 2**20
    peak = torch.cuda.max_memory_allocated() / 2**20
    print(f"[rank {rank}] {tag}: allocated {allocated:.1f} MiB, peak {peak:.1f} MiB")


def save_checkpoint(path, model, optimizer, epoch):
    state = {
        "model": model.module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
    }
    torch.save(state, path)


def train_one_epoch(model, loader, criterion, optimizer, device, epoch, rank):
    model.train()
    running_loss = 0.0
    torch.cuda.synchronize()
    start = time.time()
    for step, (inputs, targets) in enumerate(loader):
        inputs = inputs.cuda(non_blocking=True)
        targets = targets.to(device, non_blocking=True)

        optimizer.zero_grad(set_to_none=True)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

        running_loss += loss.item()
        if rank == 0 and step % 50 == 0:
            print(f"epoch {epoch} step {step:4d} loss {loss.item():.4f}")
    torch.cuda.synchronize()
    elapsed = time.time() - start
    return running_loss / max(1, len(loader)), elapsed


def main():
    args = parse_args()

    if args.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("This script requires at least one CUDA-capable GPU")

    if args.debug:
        setup_single_process()
    else:
        dist.init_process_group(backend=args.backend)

    local_rank = int(os.environ["LOCAL_RANK"])
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    if rank == 0:
        print(f"world size {world_size}, {torch.cuda.device_count()} GPUs visible on this node")

    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(1234 + rank)

    dataset = make_dataset(args.num_samples)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        sampler=sampler,
        num_workers=2,
        pin_memory=True,
    )

    model = ConvNet().to(device)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    criterion = nn.CrossEntropyLoss()
    criterion.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    start_epoch = 0
    if args.resume and os.path.exists(args.checkpoint):
        # Map tensors saved from rank 0's GPU onto this process's own GPU.
        checkpoint = torch.load(args.checkpoint, map_location=f"cuda:{local_rank}")
        model.module.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_epoch = checkpoint["epoch"] + 1
        if rank == 0:
            print(f"resumed from {args.checkpoint} at epoch {start_epoch}")

    torch.cuda.reset_peak_memory_stats()
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        avg_loss, elapsed = train_one_epoch(
            model, loader, criterion, optimizer, device, epoch, rank
        )

        # Average the epoch loss across ranks so rank 0 reports a global number.
        loss_tensor = torch.tensor([avg_loss], device=device)
        dist.all_reduce(loss_tensor, op=dist.ReduceOp.SUM)
        avg_loss = loss_tensor.item() / world_size

        if rank == 0:
            throughput = len(dataset) / elapsed
            print(f"epoch {epoch} done: loss {avg_loss:.4f}, {throughput:.0f} samples/s")
            save_checkpoint(args.checkpoint, model, optimizer, epoch)
        log_memory(rank, device, f"after epoch {epoch}")
        dist.barrier()

    torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
