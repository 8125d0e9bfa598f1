//! The integration tests, in one test binary (`cargo test --test integration`) so that a change
//! relinks one executable: a module per area, with the helpers they share in `common`. One area:
//! `cargo test --test integration sim::`. The data they read stays in `tests/` (fixtures, data,
//! scripts, rules_*); the insta snapshots are in `tests/integration/snapshots/`. `architecture`
//! checks the house rules of the source tree itself (no import circle, file sizes, layers).

mod architecture;
mod areas;
mod check;
mod cli;
mod common;
mod config;
mod doc_snippets;
mod docs;
mod each_file;
mod errors;
mod examples;
mod fixtures;
mod notebook;
mod packaging;
mod portable;
mod programs;
mod ranks;
mod report;
mod review;
mod run;
mod sarif;
mod sim;
mod statistics;
mod tmux;
mod ui;
mod watch;
mod xla;
mod xla_cpu;
