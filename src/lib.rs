//! tpuport: move PyTorch CUDA/NCCL/torch_xla code onto Google Cloud TPUs (TorchTPU) and show
//! how it behaves there.
//!
//! Data flows one way: source → [`port`] → patch; script → [`runtime`] → events → [`profile`].
//! The binary's front end is `src/cli.rs`.

pub mod port;
pub mod profile;
pub mod runtime;
pub mod ui;
