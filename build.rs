//! Build script: record the commit the binary is built from (`tpuport --version`: `git rev-parse`
//! where the sources are a git checkout, else `$TPUPORT_COMMIT`, else "unknown"), and list the
//! agent's Python files (`src/runtime/agent/**.py`) for the binary to carry
//! (`$OUT_DIR/agent_files.rs`). No libpython here: the embedded CPython lives in `worker/`.

use std::path::{Path, PathBuf};

/// The agent's sources, relative to the crate root.
const AGENT_DIR: &str = "src/runtime/agent";

fn main() {
    println!("cargo:rustc-env=TPUPORT_COMMIT={}", commit());
    write_agent_files();
}

/// The short commit hash; "unknown" outside a checkout.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=TPUPORT_COMMIT");
    if let Ok(c) = std::env::var("TPUPORT_COMMIT") {
        return c;
    }
    let root = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&root)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let Some(hash) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".into();
    };
    // Rebuild when HEAD moves: a checkout changes HEAD, a commit the branch's ref.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        let dir = Path::new(&root).join(dir);
        println!("cargo:rerun-if-changed={}", dir.join("HEAD").display());
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={}", dir.join(r).display());
        }
    }
    hash
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
