//! What the wheel ships besides the executables (`packaging/wheel.data`, see pyproject.toml):
//! the man pages and shell completions must be what the CLI generates now, so a wheel built
//! with plain `maturin build` documents the commands it has. `scripts/update-wheel-data`
//! regenerates them. The wheel itself is built and installed by `scripts/test-wheel`.

use std::path::Path;
use std::process::Command;

use crate::common::{repo, success};

fn tpuport(args: &[&str]) -> Vec<u8> {
    let out = Command::new(env!("CARGO_BIN_EXE_tpuport"))
        .args(args)
        .output()
        .unwrap();
    success(&out);
    out.stdout
}

fn same(committed: &Path, generated: &[u8]) {
    let old = std::fs::read(committed).unwrap_or_default();
    assert!(
        old == generated,
        "{} is out of date with the CLI: run scripts/update-wheel-data",
        committed.display()
    );
}

#[test]
fn wheel_data_is_current() {
    let share = repo().join("packaging/wheel.data/data/share");
    for (shell, file) in [
        ("bash", "bash-completion/completions/tpuport"),
        ("zsh", "zsh/site-functions/_tpuport"),
        ("fish", "fish/vendor_completions.d/tpuport.fish"),
    ] {
        same(&share.join(file), &tpuport(&["completions", shell]));
    }
    let dir = tempfile::tempdir().unwrap();
    let listed =
        String::from_utf8(tpuport(&["man", "-o", &dir.path().display().to_string()])).unwrap();
    let pages: Vec<&str> = listed.lines().collect();
    assert!(pages.len() > 10, "a page per command: {listed}");
    let mut committed: Vec<String> = std::fs::read_dir(share.join("man/man1"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    committed.sort();
    let mut generated: Vec<String> = pages
        .iter()
        .map(|p| {
            Path::new(p)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .to_string()
        })
        .collect();
    generated.sort();
    assert_eq!(committed, generated, "run scripts/update-wheel-data");
    for name in &generated {
        same(
            &share.join("man/man1").join(name),
            &std::fs::read(dir.path().join(name)).unwrap(),
        );
    }
    // Each page is roff for its command, with its options.
    let migrate = std::fs::read_to_string(dir.path().join("tpuport-migrate.1")).unwrap();
    assert!(
        migrate.starts_with(".ie") || migrate.contains(".TH tpuport-migrate"),
        "{migrate}"
    );
    assert!(migrate.contains("unsafe\\-fixes"), "{migrate}");
    // Completions know the commands and their flags.
    let bash = String::from_utf8(tpuport(&["completions", "bash"])).unwrap();
    assert!(
        bash.contains("migrate") && bash.contains("--nproc"),
        "bash completion"
    );
    let ps = String::from_utf8(tpuport(&["completions", "powershell"])).unwrap();
    assert!(ps.contains("Register-ArgumentCompleter"), "{ps}");
}

#[test]
fn version_names_the_build_and_the_workers() {
    let v = String::from_utf8(tpuport(&["--version"])).unwrap();
    assert!(
        v.starts_with(&format!("tpuport {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{v}"
    );
    assert!(v.contains("embedded CPython: "), "{v}");
    let short = String::from_utf8(tpuport(&["-V"])).unwrap();
    assert_eq!(
        short.trim(),
        format!("tpuport {}", env!("CARGO_PKG_VERSION"))
    );
}

/// `tpuport` links no libpython (the worker does): it starts where none is installed.
#[test]
fn the_cli_links_no_libpython() {
    let out = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_tpuport")])
        .output();
    let Ok(out) = out else {
        panic!("readelf (binutils) is needed for this test");
    };
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(dynamic.contains("NEEDED"), "{dynamic}");
    assert!(!dynamic.contains("libpython"), "{dynamic}");
    // And it runs with an empty library path, from a folder with no Python in sight.
    let out = Command::new(env!("CARGO_BIN_EXE_tpuport"))
        .args(["rule", "CUD001"])
        .env("LD_LIBRARY_PATH", "")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    success(&out);
}
