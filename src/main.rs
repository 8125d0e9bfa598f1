//! The `tpuport` binary: parse the command line, run the command, map the result to an exit code.

mod cli;

use std::process::ExitCode;

/// mimalloc: the Python parser allocates per node, and glibc's malloc/free were ~18 % of a
/// `migrate` run over a large tree.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// mimalloc's own option setter (in the library the `mimalloc` crate links).
unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}
/// `mi_option_purge_delay` in mimalloc 3's option enum (libmimalloc-sys 0.1.49, pinned by
/// Cargo.lock).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;
/// `mi_option_allow_large_os_pages` in the same enum.
const MI_OPTION_ALLOW_LARGE_OS_PAGES: std::ffi::c_int = 6;

fn main() -> ExitCode {
    // Memory a file's syntax tree freed is kept for the next file instead of being given back to
    // the system after 10 ms and faulted in (zeroed) again: `migrate` over a large tree spent
    // ~12 % of its time in page faults (bench/migrate_vs_ruff.sh). A user's MIMALLOC_PURGE_DELAY
    // still wins.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; called before any thread starts.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
    // Large (2 MiB) OS pages where the system has them: one page fault per 2 MiB instead of per
    // 4 KiB as the parser's arenas grow (the ruff benchmark's run on a 2-core machine: median
    // 1.25 s → 1.11 s; system time halved). Ignored where the system has none.
    if std::env::var_os("MIMALLOC_ALLOW_LARGE_OS_PAGES").is_none() {
        // SAFETY: as above.
        unsafe { mi_option_set(MI_OPTION_ALLOW_LARGE_OS_PAGES, 1) };
    }
    match cli::run() {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            // A closed pipe (`tpuport migrate . | head`) is not an error.
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::from(0);
            }
            eprintln!("tpuport: {err:#}");
            ExitCode::from(2)
        }
    }
}
