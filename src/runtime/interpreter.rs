//! Which Python environment runs the script, and whether tpuport can embed it.
//!
//! The environment is `--python PATH` (an interpreter or a venv folder), else `$VIRTUAL_ENV`,
//! else the venv tpuport is installed in (a wheel installed with pip), else the project's own venv
//! made by `scripts/bootstrap`, else `python3` on PATH. Whether it is embedded (a worker built for
//! its version) or runs as `<python> -m tpuport_agent` is [`super::worker`]'s choice.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

#[derive(Debug, Clone)]
pub struct PythonEnv {
    /// The interpreter (a venv's `bin/python`, or a base install's).
    pub python: PathBuf,
    pub venv: Option<PathBuf>,
    /// `major.minor`.
    pub version: String,
    /// The base installation's prefix (`home` of a venv, or the interpreter's own).
    pub base_prefix: PathBuf,
    pub site_packages: Vec<PathBuf>,
    /// How it was chosen, for messages.
    pub origin: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// CPython embedded in the tpuport worker.
    Embedded,
    /// `<python> -m tpuport_agent`.
    Subprocess,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Embedded => "embedded",
            Runtime::Subprocess => "subprocess",
        }
    }
}

/// tpuport's cache folder: `$TPUPORT_CACHE`, else `~/.cache/tpuport` (shared with
/// `scripts/bootstrap`).
pub fn cache_root() -> Option<PathBuf> {
    std::env::var_os("TPUPORT_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/tpuport")))
}

/// The project's venv, as recorded by `scripts/bootstrap`.
pub fn project_venv() -> Option<PathBuf> {
    let p = std::fs::read_to_string(cache_root()?.join("default-venv")).ok()?;
    let p = PathBuf::from(p.trim());
    p.join("bin/python").exists().then_some(p)
}

/// The venv whose `bin/` holds the running `tpuport` (`pip install tpuport` into it).
fn installed_in() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let venv = exe.parent()?.parent()?;
    (venv.join("pyvenv.cfg").is_file() && venv.join("bin/python").exists())
        .then(|| venv.to_path_buf())
}

/// Find the environment to run in.
pub fn find(explicit: Option<&Path>) -> Result<PythonEnv> {
    if let Some(p) = explicit {
        return describe(p, "--python");
    }
    if let Some(v) = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty()) {
        return describe(Path::new(&v), "$VIRTUAL_ENV");
    }
    if let Some(v) = installed_in() {
        return describe(&v, "the venv tpuport is installed in");
    }
    if let Some(v) = project_venv() {
        return describe(&v, "the project venv of scripts/bootstrap");
    }
    describe(Path::new("python3"), "python3 on PATH")
}

fn describe(p: &Path, origin: &str) -> Result<PythonEnv> {
    // A venv folder, or an interpreter inside one.
    let venv = if p.is_dir() {
        Some(p.to_path_buf())
    } else {
        p.parent()
            .and_then(|bin| bin.parent())
            .filter(|v| v.join("pyvenv.cfg").exists())
            .map(Path::to_path_buf)
    };
    if let Some(v) = &venv {
        let cfg = std::fs::read_to_string(v.join("pyvenv.cfg")).with_context(|| {
            format!("{} ({origin}) is not a virtual environment: pyvenv.cfg is missing; pass a venv folder or a python executable", v.display())
        })?;
        let get = |key: &str| {
            cfg.lines().find_map(|l| {
                let (k, val) = l.split_once('=')?;
                (k.trim() == key).then(|| val.trim().to_string())
            })
        };
        let version = get("version_info")
            .or_else(|| get("version"))
            .unwrap_or_default();
        let version = version.split('.').take(2).collect::<Vec<_>>().join(".");
        let home = get("home").map(PathBuf::from).unwrap_or_default();
        let python = if p.is_dir() {
            v.join("bin/python")
        } else {
            p.to_path_buf()
        };
        if !python.exists() {
            bail!(
                "{} ({origin}) has no bin/python; recreate the venv (e.g. bash scripts/bootstrap)",
                v.display()
            );
        }
        let site = v
            .join("lib")
            .join(format!("python{version}"))
            .join("site-packages");
        let mut site_packages = vec![site];
        // A venv that sees the system's packages: ask it where they are (no import of torch).
        if get("include-system-site-packages").is_some_and(|x| x.eq_ignore_ascii_case("true"))
            && let Some(more) = probe(&python).map(|p| p.site_packages)
        {
            for d in more {
                if !site_packages.contains(&d) {
                    site_packages.push(d);
                }
            }
        }
        return Ok(PythonEnv {
            python,
            venv: Some(v.clone()),
            version,
            base_prefix: home.parent().map(Path::to_path_buf).unwrap_or(home),
            site_packages,
            origin: origin.to_string(),
        });
    }
    // A plain interpreter: ask it.
    let out = Command::new(p)
        .args(["-c", PROBE])
        .output()
        .with_context(|| {
            format!(
                "cannot run {} ({origin}): pass --python with a Python 3 interpreter or venv",
                p.display()
            )
        })?;
    if !out.status.success() {
        bail!(
            "{} ({origin}) failed to start: {}",
            p.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let mut env = parse_probe(&String::from_utf8_lossy(&out.stdout));
    env.origin = origin.to_string();
    Ok(env)
}

/// What an interpreter says of itself: version, base prefix, executable, then its package
/// folders (the user's own too, where Python would use it).
const PROBE: &str = "import sys,site;print('%d.%d' % sys.version_info[:2]);print(sys.base_prefix);print(sys.executable);print('\\n'.join(site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])))";

fn parse_probe(text: &str) -> PythonEnv {
    let mut lines = text.lines();
    let version = lines.next().unwrap_or_default().to_string();
    let base_prefix = PathBuf::from(lines.next().unwrap_or_default());
    let python = PathBuf::from(lines.next().unwrap_or_default());
    PythonEnv {
        python,
        venv: None,
        version,
        base_prefix,
        site_packages: lines.map(PathBuf::from).collect(),
        origin: String::new(),
    }
}

fn probe(python: &Path) -> Option<PythonEnv> {
    let out = Command::new(python).args(["-c", PROBE]).output().ok()?;
    out.status
        .success()
        .then(|| parse_probe(&String::from_utf8_lossy(&out.stdout)))
}

impl PythonEnv {
    /// Whether `import NAME` would find the top-level package `name` in this environment,
    /// looked up without starting Python: a package folder or module in a package folder of the
    /// environment, in a folder a `.pth` file there adds (editable and develop installs), or on
    /// `$PYTHONPATH`; or a `*.dist-info` of that name.
    pub fn finds_module(&self, name: &str) -> bool {
        let mut dirs: Vec<PathBuf> = std::env::var_os("PYTHONPATH")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        for sp in &self.site_packages {
            dirs.push(sp.clone());
            dirs.extend(pth_folders(sp));
        }
        dirs.iter().any(|d| {
            d.join(name).join("__init__.py").is_file() || d.join(format!("{name}.py")).is_file()
        }) || super::dists::dist_version(&self.site_packages, name).is_some()
    }

    /// The environment as a person would name it, and why it was picked: `the venv /x (Python
    /// 3.11, set by $VIRTUAL_ENV)`, `/usr/bin/python3 (Python 3.11, python3 on PATH)`.
    pub fn describe(&self) -> String {
        let why = match self.origin.as_str() {
            o @ ("--python" | "$VIRTUAL_ENV") => format!("set by {o}"),
            o => o.to_string(),
        };
        match &self.venv {
            Some(v) => format!("the venv {} (Python {}, {why})", v.display(), self.version),
            None => format!("{} (Python {}, {why})", self.python.display(), self.version),
        }
    }
}

/// The folders the `.pth` files of a package folder add to `sys.path` (lines that are paths).
fn pth_folders(site: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(site) else {
        return vec![];
    };
    let mut out = vec![];
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "pth") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with("import") {
                continue;
            }
            out.push(site.join(line));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_venv_without_running_it() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::write(d.path().join("bin/python"), "").unwrap();
        std::fs::write(
            d.path().join("pyvenv.cfg"),
            "home = /opt/py/3.12.1/bin\ninclude-system-site-packages = false\nversion = 3.12.1\n",
        )
        .unwrap();
        let env = describe(d.path(), "test").unwrap();
        assert_eq!(env.version, "3.12");
        assert_eq!(env.base_prefix, PathBuf::from("/opt/py/3.12.1"));
        assert!(env.site_packages[0].ends_with("lib/python3.12/site-packages"));
        // No /opt/py here: no libpython to embed.
        let (rt, _, why) = super::super::worker::choose(&env);
        assert_eq!(rt, Runtime::Subprocess);
        assert!(why.unwrap().contains("no shared libpython3.12"));
    }

    #[test]
    fn torch_is_looked_up_without_starting_python() {
        let d = tempfile::tempdir().unwrap();
        let site = d.path().join("lib/python3.12/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        let env = PythonEnv {
            python: d.path().join("bin/python"),
            venv: Some(d.path().to_path_buf()),
            version: "3.12".into(),
            base_prefix: PathBuf::new(),
            site_packages: vec![site.clone()],
            origin: "--python".into(),
        };
        assert!(!env.finds_module("torch"));
        assert!(
            env.describe().starts_with("the venv "),
            "{}",
            env.describe()
        );
        assert!(env.describe().ends_with("(Python 3.12, set by --python)"));
        // A develop install: a .pth file names the source tree.
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("torch")).unwrap();
        std::fs::write(src.join("torch/__init__.py"), "").unwrap();
        std::fs::write(
            site.join("easy-install.pth"),
            format!("import sys\n{}\n", src.display()),
        )
        .unwrap();
        assert!(env.finds_module("torch"));
        std::fs::remove_file(site.join("easy-install.pth")).unwrap();
        // A regular install: its dist-info (or its package folder).
        std::fs::create_dir_all(site.join("torch-2.15.0.dist-info")).unwrap();
        assert!(env.finds_module("torch"));
        assert!(!env.finds_module("torch_tpu"));
    }

    #[test]
    fn a_missing_interpreter_is_explained() {
        let e = describe(Path::new("/nonexistent/python9"), "--python").unwrap_err();
        assert!(format!("{e:#}").contains("pass --python"), "{e:#}");
    }
}
