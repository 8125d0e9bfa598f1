//! Build script: link the embedded CPython with an rpath to its libpython (so the interpreter
//! found at build time is the one loaded at run time, not another copy with the same soname),
//! record its version and location for the runtime's compatibility check, and list the agent's
//! Python files (`src/runtime/agent/**.py`) for the binary to carry (`$OUT_DIR/agent_files.rs`).

use std::path::{Path, PathBuf};

/// The agent's sources, relative to the crate root.
const AGENT_DIR: &str = "src/runtime/agent";

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
    write_agent_files();
}

/// Write `AGENT_FILES`: `&[(path relative to the agent folder, include_str!(absolute path))]`,
/// sorted by path, for every `.py` file under the agent folder (caches and hidden files skipped).
fn write_agent_files() {
    let root =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo")).join(AGENT_DIR);
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = vec![];
    python_files(&root, &mut files);
    files.sort();
    let mut out = String::from("/// The agent's Python files (written by build.rs).\n");
    out += "const AGENT_FILES: &[(&str, &str)] = &[\n";
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        let rel = file.strip_prefix(&root).expect("under the agent folder");
        let rel = rel.to_str().expect("UTF-8 agent file names");
        let abs = file.to_str().expect("a UTF-8 path to the agent");
        out += &format!("    ({rel:?}, include_str!({abs:?})),\n");
    }
    out += "];\n";
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("agent_files.rs");
    std::fs::write(&dest, out).expect("cannot write agent_files.rs");
}

fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read the agent folder {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a readable agent folder").path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        if path.is_dir() {
            python_files(&path, out);
        } else if name.ends_with(".py") {
            out.push(path);
        }
    }
}
