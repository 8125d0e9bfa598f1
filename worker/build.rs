//! Build script of the worker: link the CPython pyo3 finds (`PYO3_PYTHON`, else `python3`) with a
//! run path to its libpython (a default; `tpuport run` puts the target environment's library
//! folder first on `LD_LIBRARY_PATH`, which a run path does not override), and record its
//! version for `tpuport-worker --describe`.

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
    let cfg = pyo3_build_config::get();
    println!(
        "cargo:rustc-env=TPUPORT_WORKER_PYTHON={}.{}",
        cfg.version().major,
        cfg.version().minor
    );
    println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
}
