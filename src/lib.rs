//! tpuport: move PyTorch CUDA/NCCL/torch_xla code onto Google Cloud TPUs (TorchTPU) and show
//! how it behaves there.
//!
//! Data flows one way, and each layer only imports the ones before it:
//!
//! ```text
//! source ─→ port ─→ patch, diagnostics          (tpuport migrate, tpuport rule)
//!   parse → semantic (qualified names) → check (rules matched) → edit/fix → imports/helpers
//!   → render / driver; the rules are data (rules/*.toml, compiled in by port::rules)
//!
//! script ─→ runtime ─→ events ─→ profile ─→ ui (dashboard) | report (charts, summary.md)
//!
//! script ─→ check: port (a copy) + runtime (original on the host, port on the sim) ─→ events
//!   ─→ compare, verdicts ─→ report (terminal, JSON, Markdown/HTML with charts)   (tpuport check)
//!   launcher (child, pipes, exit) ⇄ agent (Python, in the child; AgentConfig in, events out)
//!   the launcher reports to a runtime::launcher::RunObserver: step lines (runtime) or the
//!   dashboard (ui::live), chosen by the front end
//! ```
//!
//! - [`port`]: the source rewriter; knows nothing of running code.
//! - [`runtime`]: runs a script (sim target, real TPU or host) and writes its events; never
//!   imports [`ui`] — whatever shows a run implements its observer.
//! - [`profile`]: the event model (serde), aggregation, events files, reports and charts.
//! - [`check`]: `tpuport check`, which puts [`port`], [`runtime`] and [`profile`] behind one
//!   question ("is this script ready for a TPU?"); it never imports [`ui`].
//! - [`ui`]: the ratatui dashboard over [`profile`]'s aggregates (`tpuport run`, `tpuport top`).
//! - [`watch`]: debounced change notification for `--watch` (a leaf: imports no other layer).
//!
//! The binary's front end (`src/cli.rs`) parses the command line, chooses the observer and
//! dispatches; nothing else lives there. `tests/integration/architecture.rs` checks these
//! layers (no import circle, nothing below the front end reaches `ui`).

pub mod check;
pub mod port;
pub mod profile;
pub mod runtime;
pub mod ui;
pub mod watch;
