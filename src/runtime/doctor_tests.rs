//! `tpuport doctor`'s checks, each against a faked machine (sysfs, /dev/vfio, /proc, /tmp,
//! /dev/shm, variables) and faked venvs (dist-info folders).

use super::*;

struct Fake {
    root: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let root = tempfile::tempdir().unwrap();
        for d in [
            "sys/bus/pci/devices",
            "dev/vfio",
            "proc",
            "tmp",
            "shm",
            "venv",
        ] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        Fake { root }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }

    /// A v5e (PCI 0x1ae0:0x0063) in IOMMU group 10, bound to VFIO.
    fn with_tpu(self) -> Fake {
        let d = self.path("sys/bus/pci/devices/0000:00:04.0");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("vendor"), "0x1ae0\n").unwrap();
        std::fs::write(d.join("device"), "0x0063\n").unwrap();
        let g = self.path("sys/kernel/iommu_groups/10");
        std::fs::create_dir_all(&g).unwrap();
        std::os::unix::fs::symlink(&g, d.join("iommu_group")).unwrap();
        std::fs::write(self.path("dev/vfio/10"), "").unwrap();
        self
    }

    fn with_dists(self, dists: &[&str]) -> Fake {
        for d in dists {
            std::fs::create_dir_all(self.path("venv").join(format!("{d}.dist-info"))).unwrap();
        }
        self
    }

    fn machine(&self, vars: &[(&str, &str)]) -> Machine {
        Machine {
            sys: self.path("sys"),
            dev: self.path("dev"),
            proc: self.path("proc"),
            tmp: self.path("tmp"),
            shm: self.path("shm"),
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            xla_cpu: self.path("xla-cpu").exists().then(|| self.path("xla-cpu")),
            platform: ("linux", "x86_64"),
        }
    }

    /// A complete xla-cpu install for Python 3.11 (what scripts/bootstrap-xla-cpu leaves).
    fn with_xla_cpu(self) -> Fake {
        let x = self.path("xla-cpu");
        std::fs::create_dir_all(x.join("site/torch_tpu")).unwrap();
        std::fs::create_dir_all(x.join("plugin/p")).unwrap();
        // A real PJRT library for both (this workspace's shim, as cargo built it): doctor loads
        // them to check they are usable.
        let lib = shim_library().expect("cargo builds pjrt-shim with the workspace");
        std::fs::copy(&lib, x.join("plugin/p/pjrt_c_api_cpu_plugin.so")).unwrap();
        std::fs::copy(&lib, x.join("libtpuport_pjrt_shim.so")).unwrap();
        std::fs::write(
            x.join("xla-cpu.json"),
            r#"{"python": "3.11", "torch_tpu": "0.2.0", "libtpu": "0.0.52", "site": "site",
                "shim": "libtpuport_pjrt_shim.so", "plugin": {"dist": "lammps-jax-pjrt-cpu",
                "version": "0.11.2", "pjrt_api": "0.115", "path": "plugin/p/pjrt_c_api_cpu_plugin.so"}}"#,
        )
        .unwrap();
        std::fs::write(x.join(".complete"), "").unwrap();
        self
    }

    fn env(&self, version: &str) -> Environment {
        Environment {
            python: "/venv/bin/python".into(),
            version: version.into(),
            site_packages: vec![self.path("venv")],
        }
    }

    fn run(&self, version: &str, vars: &[(&str, &str)]) -> Vec<Check> {
        run_checks(&self.machine(vars), Some(&self.env(version)))
    }
}

/// This workspace's PJRT shim, where cargo built it (target/debug or its deps/).
fn shim_library() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [
        deps.join("libtpuport_pjrt_shim.so"),
        deps.parent()?.join("libtpuport_pjrt_shim.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

fn get<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks.iter().find(|c| c.id == id).unwrap()
}

#[test]
fn versions_parse() {
    assert_eq!(numbers("2.15.0+cu132"), vec![2, 15, 0]);
    assert_eq!(numbers("3.11.9"), vec![3, 11, 9]);
    assert_eq!(numbers("0.0.52"), vec![0, 0, 52]);
}

#[test]
fn python_must_be_3_11_or_newer() {
    let f = Fake::new();
    assert_eq!(get(&f.run("3.10.12", &[]), "DOC001").status, Status::Fail);
    assert_eq!(get(&f.run("3.11.9", &[]), "DOC001").status, Status::Ok);
    let none = run_checks(&f.machine(&[]), None);
    assert_eq!(get(&none, "DOC001").status, Status::Fail);
    assert!(get(&none, "DOC001").fix.as_ref().unwrap().contains("venv"));
}

#[test]
fn torch_must_be_in_torch_tpus_range() {
    let missing = Fake::new();
    assert_eq!(
        get(&missing.run("3.11.9", &[]), "DOC002").status,
        Status::Fail
    );
    for (v, ok) in [
        ("2.10.1", false),
        ("2.11.0", true),
        ("2.15.0+cu132", true),
        ("2.16.0", false),
    ] {
        let f = Fake::new().with_dists(&[&format!("torch-{v}")]);
        let c = f.run("3.11.9", &[]);
        assert_eq!(
            get(&c, "DOC002").status,
            if ok { Status::Ok } else { Status::Fail },
            "{v}"
        );
    }
}

#[test]
fn a_cuda_build_on_a_tpu_vm_is_a_warning() {
    let here = Fake::new().with_dists(&["torch-2.15.0+cu132", "nvidia_cublas-13.1.0"]);
    assert_eq!(get(&here.run("3.11.9", &[]), "DOC003").status, Status::Ok);
    let vm = Fake::new()
        .with_tpu()
        .with_dists(&["torch-2.15.0", "nvidia_cublas-13.1.0"]);
    let c = vm.run("3.11.9", &[]);
    assert_eq!(get(&c, "DOC003").status, Status::Warn);
    assert!(get(&c, "DOC003").fix.as_ref().unwrap().contains("whl/cpu"));
    let cpu = Fake::new().with_tpu().with_dists(&["torch-2.15.0+cpu"]);
    assert_eq!(get(&cpu.run("3.11.9", &[]), "DOC003").status, Status::Ok);
}

#[test]
fn torch_tpu_and_libtpu() {
    let sim = Fake::new().with_dists(&["torch-2.15.0"]);
    assert_eq!(get(&sim.run("3.11.9", &[]), "DOC004").status, Status::Skip);
    let vm = Fake::new().with_tpu().with_dists(&["torch-2.15.0"]);
    assert_eq!(get(&vm.run("3.11.9", &[]), "DOC004").status, Status::Fail);
    let old =
        Fake::new()
            .with_tpu()
            .with_dists(&["torch-2.15.0", "torch_tpu-0.2.0", "libtpu-0.0.49"]);
    assert_eq!(get(&old.run("3.11.9", &[]), "DOC004").status, Status::Fail);
    let good =
        Fake::new()
            .with_tpu()
            .with_dists(&["torch-2.15.0", "torch_tpu-0.2.0", "libtpu-0.0.52"]);
    let c = good.run("3.11.9", &[]);
    assert_eq!(get(&c, "DOC004").status, Status::Ok);
    assert_eq!(get(&c, "DOC005").status, Status::Ok);
    assert!(get(&c, "DOC005").detail.contains("TPU v5e at 0000:00:04.0"));
}

#[test]
fn a_tpu_held_by_another_process_or_a_stale_lock_file() {
    let f = Fake::new().with_tpu();
    assert_eq!(get(&f.run("3.11.9", &[]), "DOC006").status, Status::Ok);
    std::fs::write(f.path("tmp/libtpu_lockfile"), "").unwrap();
    let stale = f.run("3.11.9", &[]);
    assert_eq!(get(&stale, "DOC006").status, Status::Warn);
    assert_eq!(
        get(&stale, "DOC006").fix.as_deref(),
        Some("sudo rm /tmp/libtpu_lockfile")
    );
    let p = f.path("proc/4242");
    std::fs::create_dir_all(p.join("fd")).unwrap();
    std::fs::write(p.join("comm"), "python3\n").unwrap();
    std::os::unix::fs::symlink("/dev/vfio/10", p.join("fd/7")).unwrap();
    let held = f.run("3.11.9", &[]);
    let c = get(&held, "DOC006");
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.detail.contains("pid 4242 (python3) holds /dev/vfio/10"),
        "{}",
        c.detail
    );
    // No TPU: nothing to hold.
    assert_eq!(
        get(&Fake::new().run("3.11.9", &[]), "DOC006").status,
        Status::Skip
    );
}

#[test]
fn obsolete_and_ignored_variables() {
    let f = Fake::new();
    assert_eq!(get(&f.run("3.11.9", &[]), "DOC007").status, Status::Ok);
    let c = f.run(
        "3.11.9",
        &[("TPU_LAUNCH_BLOCKING", "1"), ("PJRT_DEVICE", "TPU")],
    );
    let found: Vec<&Check> = c.iter().filter(|c| c.id == "DOC007").collect();
    assert_eq!(found.len(), 2);
    assert!(found.iter().all(|c| c.status == Status::Warn));
    assert!(found.iter().any(|c| {
        c.fix
            .as_ref()
            .unwrap()
            .contains("TORCH_TPU_LAUNCH_BLOCKING=1")
    }));
}

#[test]
fn compilation_cache_variables() {
    let f = Fake::new();
    assert_eq!(get(&f.run("3.11.9", &[]), "DOC008").status, Status::Warn);
    let missing = f.path("nope").display().to_string();
    let c = f.run(
        "3.11.9",
        &[("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", &missing)],
    );
    assert_eq!(get(&c, "DOC008").status, Status::Fail);
    let there = f.path("tmp").display().to_string();
    let ok = f.run(
        "3.11.9",
        &[("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT", &there)],
    );
    assert_eq!(get(&ok, "DOC008").status, Status::Ok);
    let gcs = f.run(
        "3.11.9",
        &[(
            "TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT",
            "gs://bucket/cache",
        )],
    );
    assert_eq!(get(&gcs, "DOC008").status, Status::Ok);
}

#[test]
fn torch_tpu_without_a_tpu_hangs_a_plain_import_unless_switched_off() {
    let f = Fake::new().with_dists(&["torch-2.15.0", "torch_tpu-0.2.0", "libtpu-0.0.52"]);
    let c = f.run("3.11.9", &[]);
    assert_eq!(get(&c, "DOC009").status, Status::Warn);
    assert!(
        get(&c, "DOC009")
            .fix
            .as_ref()
            .unwrap()
            .contains("TPU_SKIP_MDS_QUERY=1")
    );
    let off = f.run(
        "3.11.9",
        &[
            ("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"),
            ("TPU_SKIP_MDS_QUERY", "1"),
        ],
    );
    assert_eq!(get(&off, "DOC009").status, Status::Ok);
    let text = render(&c);
    assert!(
        text.contains("warn DOC009") && text.ends_with("warnings\n"),
        "{text}"
    );
}

/// DOC010: xla-cpu serves an environment with a matching Python and a torch TorchTPU supports;
/// otherwise it says why and how to set it up; with a TPU it does not apply.
#[test]
fn xla_cpu_readiness() {
    if shim_library().is_none() {
        eprintln!("skipped: pjrt-shim is not built (cargo build --workspace)");
        return;
    }
    let f = Fake::new()
        .with_dists(&["torch-2.15.0+cu132"])
        .with_xla_cpu();
    let c = f.run("3.11.7", &[]);
    let d = get(&c, "DOC010");
    assert_eq!(d.status, Status::Ok, "{d:?}");
    assert!(
        d.detail
            .starts_with("TorchTPU 0.2.0 on XLA:CPU (lammps-jax-pjrt-cpu 0.11.2, PJRT API 0.115)"),
        "{d:?}"
    );
    assert!(
        get(&c, "DOC005")
            .detail
            .contains("xla-cpu where it is ready")
    );
    // Another Python than the install's.
    let d = get(&f.run("3.12.1", &[]), "DOC010").clone();
    assert_eq!(d.status, Status::Warn);
    assert!(
        d.detail.contains("installed for Python 3.11") && d.detail.contains("Python 3.12"),
        "{d:?}"
    );
    // Not installed.
    let bare = Fake::new().with_dists(&["torch-2.15.0"]);
    let d = get(&bare.run("3.11.7", &[]), "DOC010").clone();
    assert_eq!(d.status, Status::Warn);
    assert!(d.detail.starts_with("xla-cpu is not installed"), "{d:?}");
    assert!(
        d.fix
            .as_deref()
            .unwrap()
            .contains("scripts/bootstrap-xla-cpu")
    );
    // A torch TorchTPU does not support.
    let old = Fake::new().with_dists(&["torch-2.9.1"]).with_xla_cpu();
    let d = get(&old.run("3.11.7", &[]), "DOC010").clone();
    assert!(d.detail.contains("torch 2.9.1"), "{d:?}");
    // A TPU: not applicable.
    let tpu = Fake::new()
        .with_tpu()
        .with_dists(&["torch-2.15.0"])
        .with_xla_cpu();
    assert_eq!(get(&tpu.run("3.11.7", &[]), "DOC010").status, Status::Skip);
}
