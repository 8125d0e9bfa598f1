//! Build script: link the embedded CPython with an rpath to its libpython (so the interpreter
//! found at build time is the one loaded at run time, not another copy with the same soname),
//! and record its version and location for the runtime's compatibility check.

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
    let cfg = pyo3_build_config::get();
    println!(
        "cargo:rustc-env=TPUPORT_PYTHON_VERSION={}.{}",
        cfg.version().major,
        cfg.version().minor
    );
    let exe = cfg.executable().unwrap_or_default();
    println!("cargo:rustc-env=TPUPORT_PYTHON_EXECUTABLE={exe}");
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
