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

fn main() -> ExitCode {
    // Memory a file's syntax tree freed is kept for the next file instead of being given back to
    // the system after 10 ms and faulted in (zeroed) again: `migrate` over a large tree spent
    // ~12 % of its time in page faults (bench/migrate_vs_ruff.sh). A user's MIMALLOC_PURGE_DELAY
    // still wins.
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one integer option; called before any thread starts.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    }
    // No transparent huge pages: mimalloc asks for them on its arenas, and each is zeroed whole
    // (2 MiB) on first touch; that was 16 % of a `migrate --check` of the transformers wheel
    // (bench/migrate_vs_ruff.sh, 2 cores: wall 0.93-1.16 s with them, 0.92-0.99 s without, the
    // resident size 160 MB → 110 MB). mimalloc reads its own switch (MIMALLOC_ALLOW_THP) before
    // `main`, so the process turns them off itself; a user's MIMALLOC_ALLOW_THP still wins.
    #[cfg(target_os = "linux")]
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: a process-wide flag; no memory is touched. A kernel without it answers EINVAL.
        unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
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
