//! The terminal dashboard (ratatui + crossterm), like bottom: view state and keys ([`app`]),
//! drawing ([`widgets`]), the terminal take-over and its restoration ([`terminal`]), the driver
//! used by `tpuport run` ([`live`]) and `tpuport top` over events files ([`top`]). The data it
//! shows comes from [`crate::profile::aggregate`].

pub mod app;
pub mod live;
pub mod terminal;
pub mod top;
pub mod widgets;
