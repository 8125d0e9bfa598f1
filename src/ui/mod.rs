//! The terminal dashboard (ratatui + crossterm), laid out like bottom: state, data and drawing
//! apart.
//!
//! - State: [`app`] is the view state and what keys do to it, through the one key table in
//!   [`keys`] (which also writes the footer and the help screen).
//! - Data: the aggregated run ([`crate::profile::aggregate`]) and the HBM outlook
//!   ([`crate::profile::forecast`]); nothing in `profile` knows about the dashboard.
//! - Drawing: [`draw`], one module per pane, reading the state and the data and changing
//!   neither; [`format`] writes its numbers.
//! - Driving: [`terminal`] takes the terminal over and restores it, [`live`] runs the dashboard
//!   for `tpuport run` (as the runtime's observer) and [`top`] for `tpuport top` over events files.
//! - [`review`]: `tpuport migrate -i`, the review screen of proposed fixes (its own state, widgets
//!   and loop; its data comes from [`crate::port::review`]).

pub mod app;
pub mod draw;
pub mod format;
pub mod keys;
pub mod live;
pub mod review;
pub mod terminal;
pub mod top;
