//! The `tpuport` binary: parse the command line, run the command, map the result to an exit code.

mod cli;

use std::process::ExitCode;

/// mimalloc: the Python parser allocates per node, and glibc's malloc/free were ~18 % of a
/// `migrate` run over a large tree.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
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
