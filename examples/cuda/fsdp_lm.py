"""Fully sharded data-parallel (FSDP) training of a small language model.

    torchrun --nproc_per_node=8 fsdp_lm.py

Parameters, gradients and optimizer state are sharded across all CUDA
devices; set FSDP_CPU_COLLECTIVES=1 to also get a gloo group for CPU tensors.
"""

import functools
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

VOCAB, D_MODEL, N_LAYERS, SEQ_LEN = 32000, 512, 8, 256


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=8, dim_feedforward=4 * D_MODEL, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=N_LAYERS)
        self.lm_head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, tokens):
        mask = nn.Transformer.generate_square_subsequent_mask(tokens.size(1), device=tokens.device)
        return self.lm_head(self.encoder(self.embed(tokens), mask=mask, is_causal=True))


def setup(local_rank):
    if os.environ.get("FSDP_CPU_COLLECTIVES") == "1":
        # Gloo handles CPU tensors (e.g. gathering metrics), NCCL handles GPU tensors.
        dist.init_process_group("cpu:gloo,cuda:nccl")
    else:
        dist.init_process_group(backend="nccl", device_id=torch.device(f"cuda:{local_rank}"))
    if dist.get_backend() == dist.Backend.NCCL and dist.get_rank() == 0:
        print(f"using NCCL {torch.cuda.nccl.version()}")


def report_memory(rank):
    free, total = torch.cuda.mem_get_info()
    capacity = torch.cuda.get_device_properties(0).total_memory
    print(f"[rank {rank}] free {free / 2**30:.1f} GiB of {total / 2**30:.1f} GiB (device capacity {capacity / 2**30:.1f} GiB)")


def main():
    assert dist.is_nccl_available(), "FSDP example expects a CUDA build of PyTorch with NCCL"
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    setup(local_rank)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank)

    torch.manual_seed(0)
    torch.cuda.manual_seed(0)

    wrap_policy = functools.partial(size_based_auto_wrap_policy, min_num_params=1_000_000)
    bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)
    model = FSDP(
        LM(),
        auto_wrap_policy=wrap_policy,
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        mixed_precision=bf16,
        device_id=torch.cuda.current_device(),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    if rank == 0:
        print(model)
        report_memory(rank)

    model.train()
    for step in range(200):
        tokens = torch.randint(0, VOCAB, (8, SEQ_LEN + 1), device=device)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        try:
            logits = model(inputs)
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
            loss.backward()
            model.clip_grad_norm_(1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        except torch.cuda.OutOfMemoryError:
            # Print what the allocator sees before giving up; lowering the batch size usually helps.
            report_memory(rank)
            raise

        if step % 20 == 0:
            loss_avg = loss.detach().clone()
            dist.all_reduce(loss_avg, op=dist.ReduceOp.AVG)
            if rank == 0:
                print(f"step {step:4d} | loss {loss_avg.item():.4f} | world {world_size}")

    dist.barrier()
    if rank == 0:
        report_memory(rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
