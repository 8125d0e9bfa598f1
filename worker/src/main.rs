//! `tpuport-worker`: the process `tpuport run` starts to run a script with CPython embedded, the
//! agent inside. A separate executable, so that `tpuport` itself never links libpython (it
//! starts where no libpython is, e.g. installed from a wheel); one is built per CPython minor
//! version (`tpuport-worker-3.12`, ...), and `tpuport` picks the one matching the script's
//! environment, with that environment's library folder on `LD_LIBRARY_PATH`, or else runs the
//! agent as `python -m tpuport_agent`.
//!
//! `tpuport-worker --describe` prints the CPython version it was built for (`{"python":
//! "3.11"}`); it needs its libpython to start, so a failure to run it means "not usable here".
//!
//! This program is the only owner of the interpreter. CPython is initialised through PyConfig
//! with `program_name` set to the environment's `python`, so its getpath reads `pyvenv.cfg`
//! and the venv's site-packages are used (a plain `Py_Initialize` would ignore the venv), and
//! with Python's own signal handlers installed, so SIGINT raises KeyboardInterrupt. The agent
//! then does everything else, exactly as under `python -m tpuport_agent`.

use std::ffi::{CStr, CString};
use std::mem::MaybeUninit;

use anyhow::{Context, Result, bail};
use pyo3::ffi;
use pyo3::prelude::*;

/// Exit status when the agent itself fails (not the script): EX_SOFTWARE.
const EXIT_AGENT_FAILURE: i32 = 70;

fn main() {
    if std::env::args().nth(1).as_deref() == Some("--describe") {
        println!("{{\"python\": \"{}\"}}", env!("TPUPORT_WORKER_PYTHON"));
        return;
    }
    match run() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("tpuport-worker: {e:#}");
            std::process::exit(EXIT_AGENT_FAILURE)
        }
    }
}

/// Run the worker; returns the process exit code.
fn run() -> Result<i32> {
    let python = std::env::var("TPUPORT_PYTHON")
        .context("TPUPORT_PYTHON is not set (the worker is started by `tpuport run`)")?;
    let agent_dir = std::env::var("TPUPORT_AGENT_DIR").context("TPUPORT_AGENT_DIR is not set")?;
    initialize(&python)
        .with_context(|| format!("during initialising the embedded Python for {python}"))?;
    let code = Python::attach(|py| -> PyResult<i32> {
        let sys = py.import("sys")?;
        sys.getattr("path")?
            .call_method1("insert", (0, agent_dir.as_str()))?;
        let agent = py.import("tpuport_agent")?;
        agent.call_method0("main")?.extract::<i32>()
    });
    let code = match code {
        Ok(c) => c,
        Err(e) => {
            Python::attach(|py| e.print(py));
            eprintln!(
                "tpuport: the agent failed (this is a tpuport bug; please report it with the traceback above)"
            );
            EXIT_AGENT_FAILURE
        }
    };
    // Like `python script.py`: run atexit handlers, flush and close the interpreter.
    unsafe {
        ffi::PyGILState_Ensure();
        ffi::Py_FinalizeEx();
    }
    // Then leave without running C++ static destructors: libtorch's (a gloo process group's
    // threads, still joinable) can abort the process at exit ("terminate called without an
    // active exception") after the script has finished; its files are closed and flushed by now.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    unsafe { libc::_exit(code) }
}

fn initialize(python: &str) -> Result<()> {
    let program = CString::new(python)?;
    unsafe {
        let mut config = MaybeUninit::<ffi::PyConfig>::uninit();
        ffi::PyConfig_InitPythonConfig(config.as_mut_ptr());
        let mut config = config.assume_init();
        config.install_signal_handlers = 1;
        config.parse_argv = 0;
        let status =
            ffi::PyConfig_SetBytesString(&mut config, &mut config.program_name, program.as_ptr());
        if ffi::PyStatus_Exception(status) != 0 {
            ffi::PyConfig_Clear(&mut config);
            bail!("setting program_name failed: {}", status_text(&status));
        }
        let status = ffi::Py_InitializeFromConfig(&config);
        ffi::PyConfig_Clear(&mut config);
        if ffi::PyStatus_Exception(status) != 0 {
            bail!("{}", status_text(&status));
        }
        // Release the GIL so pyo3's `Python::attach` can take it.
        ffi::PyEval_SaveThread();
    }
    Ok(())
}

fn status_text(s: &ffi::PyStatus) -> String {
    if s.err_msg.is_null() {
        return format!("exit code {}", s.exitcode);
    }
    unsafe { CStr::from_ptr(s.err_msg) }
        .to_string_lossy()
        .into_owned()
}
