//! The xla-cpu target's installation: TorchTPU 0.2.0 itself, run on XLA:CPU through a CPU PJRT
//! plugin and tpuport's PJRT shim (the `pjrt-shim/` crate).
//!
//! `scripts/bootstrap-xla-cpu` installs it, once, into `<cache>/xla-cpu-<key>/` (and records
//! that folder in `<cache>/xla-cpu-default`; `$TPUPORT_XLA_CPU` names another one):
//!
//! ```text
//! xla-cpu.json                    the manifest (versions and the paths below)
//! site/                           torch_tpu, libtpu and their small requirements (pip --target)
//! plugin/…/pjrt_c_api_cpu_plugin.so   the CPU PJRT plugin (PyPI lammps-jax-pjrt-cpu)
//! libtpuport_pjrt_shim.so         the shim TorchTPU loads as "the TPU plugin"
//! ```
//!
//! `site/` is added to the script's `sys.path` on this target only, so TorchTPU never reaches
//! the other targets' processes (where installed, `import torch` would autoload it). torch itself
//! is the script environment's own, which must be one TorchTPU 0.2.0 supports (2.11–2.15).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::dists::{dist_version, numbers};
use super::interpreter::{PythonEnv, cache_root};

/// The torch releases TorchTPU 0.2.0 ships glue for (its wheel's `Requires-Dist`).
pub const TORCH_RANGE: ((u32, u32), (u32, u32)) = ((2, 11), (2, 15));

/// `xla-cpu.json`, as `scripts/bootstrap-xla-cpu` writes it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Manifest {
    /// The Python `major.minor` the site folder was installed for.
    pub python: String,
    pub torch_tpu: String,
    pub libtpu: String,
    /// The CPU PJRT plugin's distribution, version, PJRT API version and `.so` (relative).
    pub plugin: PluginInfo,
    /// Paths relative to the installation folder.
    pub site: String,
    pub shim: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PluginInfo {
    pub dist: String,
    pub version: String,
    pub pjrt_api: String,
    pub path: String,
}

/// A complete installation.
#[derive(Debug, Clone, PartialEq)]
pub struct XlaCpu {
    pub root: PathBuf,
    pub manifest: Manifest,
    pub site: PathBuf,
    pub plugin: PathBuf,
    pub shim: PathBuf,
}

impl XlaCpu {
    /// Reads and checks an installation folder: every file its manifest names must be there.
    pub fn open(root: &Path) -> Result<XlaCpu, String> {
        let file = root.join("xla-cpu.json");
        let text = std::fs::read_to_string(&file).map_err(|e| {
            format!(
                "{}: {e} (an incomplete xla-cpu install: run scripts/bootstrap-xla-cpu again)",
                file.display()
            )
        })?;
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let x = XlaCpu {
            site: root.join(&manifest.site),
            plugin: root.join(&manifest.plugin.path),
            shim: root.join(&manifest.shim),
            root: root.to_path_buf(),
            manifest,
        };
        for (what, p) in [
            ("TorchTPU's folder", &x.site),
            ("the CPU PJRT plugin", &x.plugin),
            ("the PJRT shim", &x.shim),
        ] {
            if !p.exists() {
                return Err(format!(
                    "{what} is missing: {} (run scripts/bootstrap-xla-cpu again)",
                    p.display()
                ));
            }
        }
        if !root.join(".complete").is_file() {
            return Err(format!(
                "{} was not installed completely (run scripts/bootstrap-xla-cpu again)",
                root.display()
            ));
        }
        pjrt_plugin(&x.shim).map_err(|e| {
            format!("the PJRT shim cannot be used: {e} (run scripts/bootstrap-xla-cpu again)")
        })?;
        // The plugin is XLA itself (200 MB, with static state that must not be unloaded from
        // this process): only its file is checked here; the shim reports one that does not load.
        shared_object(&x.plugin).map_err(|e| {
            format!("the CPU PJRT plugin cannot be used: {e} (run scripts/bootstrap-xla-cpu again)")
        })?;
        Ok(x)
    }
}

/// Whether the file at `path` is an ELF shared object (its magic number).
fn shared_object(path: &Path) -> Result<(), String> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if magic != *b"\x7fELF" {
        return Err(format!("{} is not a shared library", path.display()));
    }
    Ok(())
}

/// Whether the shared library at `path` loads and exports `GetPjrtApi` (checked with `dlopen`
/// and `dlsym` in this process; nothing in it is called). For the shim: a broken one would
/// otherwise stop TorchTPU with a fatal C++ check in the script's process.
pub fn pjrt_plugin(path: &Path) -> Result<(), String> {
    use std::ffi::{CStr, CString};
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a NUL byte in the path", path.display()))?;
    // SAFETY: dlopen/dlsym/dlclose with a valid C string; the library's code is not run beyond
    // its loader (the shim has no constructors, and loads the plugin only when called).
    unsafe {
        let handle = libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if handle.is_null() {
            let why = libc::dlerror();
            let why = if why.is_null() {
                "cannot be loaded".to_string()
            } else {
                CStr::from_ptr(why).to_string_lossy().into_owned()
            };
            return Err(why);
        }
        let sym = libc::dlsym(handle, c"GetPjrtApi".as_ptr());
        libc::dlclose(handle);
        if sym.is_null() {
            return Err(format!("{} exports no GetPjrtApi", path.display()));
        }
    }
    Ok(())
}

/// Where the installation is: `$TPUPORT_XLA_CPU`, else the folder `<cache>/xla-cpu-default`
/// names. None when neither is set.
pub fn location() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TPUPORT_XLA_CPU").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let recorded = std::fs::read_to_string(cache_root()?.join("xla-cpu-default")).ok()?;
    Some(PathBuf::from(recorded.trim()))
}

/// The installation, if it can run scripts in `env`; otherwise why not, in words that say what
/// to do. `platform` is `(os, arch)` (the running machine's in production).
pub fn for_env(env: &PythonEnv, platform: (&str, &str)) -> Result<XlaCpu, String> {
    usable(
        location().as_deref(),
        &env.version,
        &env.python,
        &env.site_packages,
        platform,
    )
}

/// [`for_env`] with every fact given: the install folder (if any), the script environment's
/// Python (`major.minor`, and its interpreter for messages) and site-packages, the platform.
pub fn usable(
    root: Option<&Path>,
    python_version: &str,
    python: &Path,
    site_packages: &[PathBuf],
    platform: (&str, &str),
) -> Result<XlaCpu, String> {
    if platform != ("linux", "x86_64") {
        return Err(format!(
            "TorchTPU 0.2.0 ships only for Linux x86_64 (this is {} {})",
            platform.0, platform.1
        ));
    }
    let Some(root) = root else {
        return Err(
            "xla-cpu is not installed (scripts/bootstrap-xla-cpu installs TorchTPU 0.2.0 and a CPU PJRT plugin)"
                .into(),
        );
    };
    let x = XlaCpu::open(root)?;
    if x.manifest.python != python_version {
        return Err(format!(
            "xla-cpu is installed for Python {} and {} is Python {} (run scripts/bootstrap-xla-cpu with TPUPORT_BOOTSTRAP_PYTHON set to this Python)",
            x.manifest.python,
            python.display(),
            python_version
        ));
    }
    torch_supported(site_packages)?;
    Ok(x)
}

/// TorchTPU 0.2.0 needs torch 2.11–2.15 in the script's environment.
pub fn torch_supported(site_packages: &[PathBuf]) -> Result<String, String> {
    let Some(v) = dist_version(site_packages, "torch") else {
        return Err("torch is not installed in the script's environment".into());
    };
    let n = numbers(&v);
    let mm = (
        n.first().copied().unwrap_or(0),
        n.get(1).copied().unwrap_or(0),
    );
    let ((a0, a1), (b0, b1)) = TORCH_RANGE;
    if mm < (a0, a1) || mm > (b0, b1) {
        return Err(format!(
            "TorchTPU 0.2.0 supports torch {a0}.{a1}–{b0}.{b1}, and the script's environment has torch {v}"
        ));
    }
    Ok(v)
}

/// The running machine's `(os, arch)`.
pub fn this_platform() -> (&'static str, &'static str) {
    (std::env::consts::OS, std::env::consts::ARCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real PJRT library to stand for both: this workspace's shim, where cargo built it.
    fn a_pjrt_library() -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        let dir = exe.parent()?.parent()?;
        [
            dir.join("libtpuport_pjrt_shim.so"),
            dir.join("deps/libtpuport_pjrt_shim.so"),
        ]
        .into_iter()
        .find(|p| p.is_file())
    }

    fn install(dir: &Path, python: &str) {
        std::fs::create_dir_all(dir.join("site/torch_tpu")).unwrap();
        std::fs::create_dir_all(dir.join("plugin/p")).unwrap();
        match a_pjrt_library() {
            Some(lib) => {
                std::fs::copy(&lib, dir.join("plugin/p/plugin.so")).unwrap();
                std::fs::copy(&lib, dir.join("libtpuport_pjrt_shim.so")).unwrap();
            }
            None => {
                std::fs::write(dir.join("plugin/p/plugin.so"), b"").unwrap();
                std::fs::write(dir.join("libtpuport_pjrt_shim.so"), b"").unwrap();
            }
        }
        std::fs::write(
            dir.join("xla-cpu.json"),
            format!(
                r#"{{"python":"{python}","torch_tpu":"0.2.0","libtpu":"0.0.52","site":"site","shim":"libtpuport_pjrt_shim.so",
                "plugin":{{"dist":"lammps-jax-pjrt-cpu","version":"0.11.2","pjrt_api":"0.115","path":"plugin/p/plugin.so"}}}}"#
            ),
        )
        .unwrap();
    }

    fn site_with_torch(dir: &Path, version: &str) -> Vec<PathBuf> {
        let sp = dir.join("sp");
        std::fs::create_dir_all(sp.join(format!("torch-{version}.dist-info"))).unwrap();
        vec![sp]
    }

    #[test]
    fn an_install_opens_only_when_complete() {
        let d = tempfile::tempdir().unwrap();
        install(d.path(), "3.11");
        let e = XlaCpu::open(d.path()).unwrap_err();
        assert!(e.contains("not installed completely"), "{e}");
        std::fs::write(d.path().join(".complete"), b"").unwrap();
        if a_pjrt_library().is_some() {
            let x = XlaCpu::open(d.path()).unwrap();
            assert_eq!(x.manifest.plugin.pjrt_api, "0.115");
            assert_eq!(x.plugin, d.path().join("plugin/p/plugin.so"));
        }
        // A shim that is not a loadable PJRT library: said before any run.
        std::fs::write(d.path().join("libtpuport_pjrt_shim.so"), b"garbage").unwrap();
        let e = XlaCpu::open(d.path()).unwrap_err();
        assert!(
            e.starts_with("the PJRT shim cannot be used:") && e.contains("bootstrap-xla-cpu"),
            "{e}"
        );
        std::fs::remove_file(d.path().join("libtpuport_pjrt_shim.so")).unwrap();
        let e = XlaCpu::open(d.path()).unwrap_err();
        assert!(e.contains("the PJRT shim is missing"), "{e}");
        let e = XlaCpu::open(&d.path().join("nowhere")).unwrap_err();
        assert!(e.contains("bootstrap-xla-cpu"), "{e}");
    }

    #[test]
    fn torch_outside_torch_tpus_range_is_refused_with_the_range() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            torch_supported(&site_with_torch(d.path(), "2.15.0+cu132")).unwrap(),
            "2.15.0+cu132"
        );
        let d2 = tempfile::tempdir().unwrap();
        let e = torch_supported(&site_with_torch(d2.path(), "2.10.1")).unwrap_err();
        assert!(e.contains("2.11–2.15") && e.contains("torch 2.10.1"), "{e}");
        let d3 = tempfile::tempdir().unwrap();
        assert!(torch_supported(&site_with_torch(d3.path(), "2.16.0")).is_err());
        assert!(
            torch_supported(&[d3.path().join("empty")])
                .unwrap_err()
                .contains("not installed")
        );
    }

    #[test]
    fn other_platforms_say_why() {
        let env = PythonEnv {
            python: "/v/bin/python".into(),
            venv: None,
            version: "3.11".into(),
            base_prefix: "/usr".into(),
            site_packages: vec![],
            origin: "test".into(),
        };
        let e = for_env(&env, ("macos", "aarch64")).unwrap_err();
        assert!(
            e.contains("Linux x86_64") && e.contains("macos aarch64"),
            "{e}"
        );
    }
}
