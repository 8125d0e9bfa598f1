//! tpuport: move PyTorch CUDA/NCCL/torch_xla code onto Google Cloud TPUs (TorchTPU).
//!
//! `port` is the source rewriter (`tpuport migrate`). The binary's front end is `src/cli.rs`.

pub mod port;
