//! The event model of a run (serde, JSON lines) and its aggregation into summaries.

pub mod event;
pub mod summary;
