//! The event model of a run (serde, JSON lines), its aggregation into summaries and series,
//! reading events files (whole or followed live), and reports with charts.

pub mod aggregate;
pub mod breakdown;
pub mod charts;
pub mod event;
pub mod follow;
pub mod forecast;
pub mod ranks;
pub mod report;
pub mod skipped;
pub mod summary;
