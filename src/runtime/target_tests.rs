//! Tests of [`super::target::plan`]: the exact environment and calls per target.

use super::*;

fn tpu() -> Vec<TpuDevice> {
    vec![TpuDevice {
        pci_address: "0000:00:04.0".into(),
        chip: chip_by_name("v6e").unwrap(),
        iommu_group: "3".into(),
    }]
}

/// A machine without xla-cpu.
fn plan_on(req: &Request, tpus: &[TpuDevice], installed: bool) -> Result<Plan> {
    let none = Err("xla-cpu is not installed".to_string());
    plan(
        req,
        &Machine {
            tpus,
            torch_tpu_installed: installed,
            xla_cpu: &none,
            world_size: 1,
        },
    )
}

fn xla_install() -> XlaCpu {
    XlaCpu {
        root: "/x".into(),
        manifest: super::super::xla_cpu::Manifest {
            python: "3.11".into(),
            torch_tpu: "0.2.0".into(),
            libtpu: "0.0.52".into(),
            plugin: super::super::xla_cpu::PluginInfo {
                dist: "lammps-jax-pjrt-cpu".into(),
                version: "0.11.2".into(),
                pjrt_api: "0.115".into(),
                path: "plugin/p.so".into(),
            },
            site: "site".into(),
            shim: "shim.so".into(),
        },
        site: "/x/site".into(),
        plugin: "/x/plugin/p.so".into(),
        shim: "/x/shim.so".into(),
    }
}

fn env(p: &Plan) -> Vec<String> {
    p.env
        .iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => format!("-{k}"),
        })
        .collect()
}

/// The exact environment and calls for the tpu target, for every combination of mode,
/// precision, excess precision, debug checks and caches.
#[test]
fn cpu_fallback_sets_torch_tpus_switch_on_a_tpu_and_is_ignored_on_the_host() {
    let req = Request {
        cpu_fallback: true,
        ..Request::default()
    };
    let p = plan_on(&req, &tpu(), true).unwrap();
    assert!(
        p.calls
            .iter()
            .any(|c| c.contains("enable_cpu_fallback = True")),
        "{:?}",
        p.calls
    );
    let host = Request {
        target: TargetRequest::Host,
        cpu_fallback: true,
        ..Request::default()
    };
    let p = plan_on(&host, &[], false).unwrap();
    assert!(p.calls.is_empty());
    assert!(
        p.notes.iter().any(|n| n.contains("--cpu-fallback ignored")),
        "{:?}",
        p.notes
    );
}

#[test]
fn tpu_plan_for_every_combination() {
    let modes = [
        (Mode::Strict, vec![]),
        (Mode::Debug, vec!["TORCH_TPU_LAUNCH_BLOCKING=1"]),
        (Mode::DeferFuse, vec!["TORCH_TPU_DEFER_AND_FUSE=1"]),
    ];
    let precisions = [
        (None, None),
        (
            Some(Precision::Default),
            Some("torch.set_float32_matmul_precision(\"medium\")"),
        ),
        (
            Some(Precision::High),
            Some("torch.set_float32_matmul_precision(\"high\")"),
        ),
        (
            Some(Precision::Highest),
            Some("torch.set_float32_matmul_precision(\"highest\")"),
        ),
    ];
    let mut checked = 0;
    for (mode, mode_env) in &modes {
        for (prec, prec_call) in &precisions {
            for excess in [false, true] {
                for debug in [false, true] {
                    for cache in [false, true] {
                        let req = Request {
                            target: TargetRequest::Auto,
                            mode: *mode,
                            precision: *prec,
                            excess_precision: excess,
                            debug_checks: debug,
                            cpu_fallback: false,
                            cache_dir: cache.then(|| PathBuf::from("/cache/t3")),
                            cache_name: cache.then(|| "job".to_string()),
                            chip: None,
                        };
                        let p = plan_on(&req, &tpu(), true).unwrap();
                        assert_eq!(p.target, Target::Tpu);
                        let mut want: Vec<String> = vec![];
                        for v in MODE_VARS {
                            let set = mode_env.iter().find(|e| e.starts_with(v));
                            want.push(set.map(|s| s.to_string()).unwrap_or(format!("-{v}")));
                        }
                        if debug {
                            want.push("TORCH_TPU_ENABLE_DEBUG_CHECKS=1".into());
                        }
                        if cache {
                            want.push("TORCH_TPU_TIER2_COMPILATION_CACHE=job".into());
                            want.push("TORCH_TPU_TIER3_COMPILATION_CACHE_ROOT=/cache/t3".into());
                        }
                        want.sort_by(|a, b| {
                            a.trim_start_matches('-').cmp(b.trim_start_matches('-'))
                        });
                        assert_eq!(env(&p), want, "{mode:?} {prec:?} {excess} {debug} {cache}");
                        let mut calls: Vec<&str> = prec_call.iter().copied().collect();
                        if excess {
                            calls.push("torch.tpu.allow_excess_precision = True");
                        }
                        assert_eq!(p.calls, calls);
                        // Never the helpers that are internal on torch >= 2.11.
                        for c in &p.calls {
                            for internal in [
                                "is_available",
                                "device_count",
                                "set_device",
                                "synchronize",
                                "current_device",
                            ] {
                                assert!(!c.contains(&format!("torch.tpu.{internal}")), "{c}");
                            }
                        }
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 3 * 4 * 2 * 2 * 2);
}

#[test]
fn auto_without_a_tpu_is_sim_and_silences_torch_tpu() {
    let p = plan_on(&Request::default(), &[], true).unwrap();
    assert_eq!(p.target, Target::Sim);
    assert_eq!(
        env(&p),
        vec!["TORCH_DEVICE_BACKEND_AUTOLOAD=0", "TPU_SKIP_MDS_QUERY=1"]
    );
    assert!(p.calls.is_empty());
    assert_eq!(p.chip.unwrap().name, "v5e");
    // Without torch_tpu installed there is nothing to silence.
    assert!(
        plan_on(&Request::default(), &[], false)
            .unwrap()
            .env
            .is_empty()
    );
    // Host target on a machine with torch_tpu and a TPU: still no autoload.
    let host = Request {
        target: TargetRequest::Host,
        ..Request::default()
    };
    let p = plan_on(&host, &tpu(), true).unwrap();
    assert_eq!(p.target, Target::Host);
    assert_eq!(
        env(&p),
        vec!["TORCH_DEVICE_BACKEND_AUTOLOAD=0", "TPU_SKIP_MDS_QUERY=1"]
    );
}

#[test]
fn tpu_target_errors_say_what_to_do() {
    let req = Request {
        target: TargetRequest::Tpu,
        ..Request::default()
    };
    let e = plan_on(&req, &[], true).unwrap_err().to_string();
    assert!(
        e.contains("no TPU is visible") && e.contains("--target xla-cpu or sim"),
        "{e}"
    );
    let e = plan_on(&req, &tpu(), false).unwrap_err().to_string();
    assert!(e.contains("pip install torch_tpu"), "{e}");
}

#[test]
fn host_target_notes_ignored_flags() {
    let req = Request {
        target: TargetRequest::Host,
        mode: Mode::Debug,
        ..Request::default()
    };
    let p = plan_on(&req, &[], false).unwrap();
    assert!(
        p.notes[0].contains("--mode debug ignored on the host target"),
        "{:?}",
        p.notes
    );
}

fn plan_xla(
    req: &Request,
    world_size: u32,
    xla: &std::result::Result<XlaCpu, String>,
) -> Result<Plan> {
    plan(
        req,
        &Machine {
            tpus: &[],
            torch_tpu_installed: false,
            xla_cpu: xla,
            world_size,
        },
    )
}

/// Without a TPU, auto picks xla-cpu where it is installed: TorchTPU loads the shim as its TPU
/// plugin, the shim forwards to the CPU plugin with one device, TorchTPU autoloads from its own
/// folder, and nothing asks the metadata server.
#[test]
fn auto_without_a_tpu_is_xla_cpu_where_installed() {
    let x = Ok(xla_install());
    let p = plan_xla(&Request::default(), 1, &x).unwrap();
    assert_eq!(p.target, Target::XlaCpu);
    assert!(
        p.reason.contains("XLA:CPU") && p.reason.contains("lammps-jax-pjrt-cpu 0.11.2"),
        "{}",
        p.reason
    );
    assert_eq!(
        env(&p),
        vec![
            "PJRT_SHIM_REAL=/x/plugin/p.so",
            "PJRT_SHIM_SET=cpu_device_count=1",
            "-TORCH_DEVICE_BACKEND_AUTOLOAD",
            "-TORCH_TPU_DEFER_AND_FUSE",
            "-TORCH_TPU_LAUNCH_BLOCKING",
            "TPU_LIBRARY_PATH=/x/shim.so",
            "TPU_SKIP_MDS_QUERY=1",
        ]
    );
    assert_eq!(p.python_path, vec![PathBuf::from("/x/site")]);
    assert_eq!(p.chip.unwrap().name, "v5e");
    // A TPU wins over xla-cpu.
    let p = plan(
        &Request::default(),
        &Machine {
            tpus: &tpu(),
            torch_tpu_installed: true,
            xla_cpu: &x,
            world_size: 1,
        },
    )
    .unwrap();
    assert_eq!(p.target, Target::Tpu);
    assert!(p.python_path.is_empty());
}

/// xla-cpu takes TorchTPU's own switches, exactly as a TPU does.
#[test]
fn xla_cpu_uses_torch_tpus_own_switches() {
    let x = Ok(xla_install());
    let req = Request {
        target: TargetRequest::XlaCpu,
        mode: Mode::Debug,
        precision: Some(Precision::High),
        debug_checks: true,
        cpu_fallback: true,
        chip: chip_by_name("v6e"),
        ..Request::default()
    };
    let p = plan_xla(&req, 1, &x).unwrap();
    assert_eq!(p.target, Target::XlaCpu);
    let e = env(&p);
    assert!(
        e.contains(&"TORCH_TPU_LAUNCH_BLOCKING=1".to_string()),
        "{e:?}"
    );
    assert!(
        e.contains(&"TORCH_TPU_ENABLE_DEBUG_CHECKS=1".to_string()),
        "{e:?}"
    );
    let on_tpu = plan(
        &Request {
            target: TargetRequest::Tpu,
            ..req.clone()
        },
        &Machine {
            tpus: &tpu(),
            torch_tpu_installed: true,
            xla_cpu: &x,
            world_size: 1,
        },
    )
    .unwrap();
    assert_eq!(p.calls, on_tpu.calls);
    assert_eq!(p.chip.unwrap().name, "v6e");
}

#[test]
fn without_xla_cpu_auto_says_why_and_the_explicit_target_fails_with_it() {
    let missing =
        Err("xla-cpu is not installed (scripts/bootstrap-xla-cpu installs it)".to_string());
    let p = plan_xla(&Request::default(), 1, &missing).unwrap();
    assert_eq!(p.target, Target::Sim);
    assert!(
        p.reason
            .contains("xla-cpu cannot serve: xla-cpu is not installed"),
        "{}",
        p.reason
    );
    let req = Request {
        target: TargetRequest::XlaCpu,
        ..Request::default()
    };
    let e = plan_xla(&req, 1, &missing).unwrap_err().to_string();
    assert!(
        e.starts_with("--target xla-cpu: xla-cpu is not installed"),
        "{e}"
    );
}

/// One rank of several: xla-cpu cannot serve (no CPU plugin gives TorchTPU's tpu_dist a global
/// view), so the rank runs on the sim and says why.
#[test]
fn ranks_run_on_the_sim_with_the_reason() {
    let x = Ok(xla_install());
    let p = plan_xla(&Request::default(), 2, &x).unwrap();
    assert_eq!(p.target, Target::Sim);
    assert!(
        p.reason.contains("one of 2 ranks") && p.reason.contains("global view"),
        "{}",
        p.reason
    );
    let req = Request {
        target: TargetRequest::XlaCpu,
        ..Request::default()
    };
    let p = plan_xla(&req, 4, &x).unwrap();
    assert_eq!(p.target, Target::Sim);
    assert!(
        p.reason.starts_with("--target xla-cpu runs one process"),
        "{}",
        p.reason
    );
}
