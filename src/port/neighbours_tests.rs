//! Tests of `neighbours.rs`: which project modules are CUDA-only, read from disk.

use super::*;

#[test]
fn an_optional_triton_path_taken_without_a_device_test_binds_the_importers() {
    let dir = std::env::temp_dir().join(format!("tpuport-optional-{}", std::process::id()));
    let pkg = dir.join("apt");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    std::fs::write(
        pkg.join("lin_triton.py"),
        "import triton\n\n\ndef fused(x):\n    return x\n",
    )
    .unwrap();
    // The layer takes the Triton path wherever Triton imports.
    std::fs::write(
        pkg.join("lin.py"),
        "import torch\ntry:\n    from .lin_triton import fused\n    HAS_TRITON = True\nexcept ImportError:\n    HAS_TRITON = False\n\n\ndef forward(x):\n    return fused(x) if HAS_TRITON else x\n",
    )
    .unwrap();
    // This one asks for a CUDA tensor first.
    std::fs::write(
        pkg.join("guarded.py"),
        "import torch\ntry:\n    from .lin_triton import fused\n    HAS_TRITON = True\nexcept ImportError:\n    HAS_TRITON = False\n\n\ndef forward(x):\n    return fused(x) if HAS_TRITON and x.is_cuda else x\n",
    )
    .unwrap();
    let script = "import torch\nfrom apt.lin import forward\n\ndevice = \"cuda\" if torch.cuda.is_available() else \"cpu\"\nprint(forward(torch.ones(2, device=device)))\n";
    let at = dir.join("bench.py");
    let via = triton_import_in(&at, script, HOPS, true).unwrap();
    assert!(via.ends_with("lin.py"), "{via:?}");
    // Names taken from a package whose `__init__.py` re-exports them from such a module.
    std::fs::create_dir_all(pkg.join("perf")).unwrap();
    std::fs::write(
        pkg.join("perf/__init__.py"),
        "from .plain import Plain\ntry:\n    from .flash import (\n        Fused,\n        HAS_TRITON,\n    )\nexcept ImportError:\n    pass\n",
    )
    .unwrap();
    std::fs::write(pkg.join("perf/plain.py"), "import torch\n").unwrap();
    std::fs::write(
        pkg.join("perf/flash.py"),
        "try:\n    import triton\n    HAS_TRITON = True\nexcept ImportError:\n    HAS_TRITON = False\n",
    )
    .unwrap();
    let via = triton_import_in(&at, "from apt.perf import (\n    Fused,\n)\n", HOPS, true).unwrap();
    assert!(via.ends_with("perf/flash.py"), "{via:?}");
    assert!(triton_import_in(&at, "from apt.perf import Plain\n", HOPS, true).is_none());
    let guarded = script.replace("apt.lin", "apt.guarded");
    assert!(triton_import_in(&at, &guarded, HOPS, true).is_none());
    assert!(imports_triton_at_top(
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
        true
    ));
    assert!(!imports_triton_at_top(
        "try:\n    import triton\nexcept ImportError:\n    triton = None\nok = x.device.type == \"cuda\"\n",
        true
    ));
    assert!(!imports_triton_at_top(
        "try:\n    import numpy\nexcept ImportError:\n    import triton\n",
        true
    ));
    use crate::port::{RuleIndex, RuleSet, Settings, migrate_source_at};
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let out = migrate_source_at(script, Some(&at), &rules, &index, Settings::default());
    assert!(out.output.is_none(), "{:?}", out.output);
    let out = migrate_source_at(&guarded, Some(&at), &rules, &index, Settings::default());
    assert!(out.output.is_some());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn names_from_triton_modules_of_the_project() {
    let dir = std::env::temp_dir().join(format!("tpuport-neighbours-{}", std::process::id()));
    let pkg = dir.join("pkg");
    std::fs::create_dir_all(pkg.join("kernels")).unwrap();
    std::fs::write(pkg.join("__init__.py"), "").unwrap();
    std::fs::write(pkg.join("kernels/__init__.py"), "").unwrap();
    std::fs::write(
        pkg.join("kernels/fp8.py"),
        "import triton\n\ndef to_fp8(x):\n    pass\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("kernels/ref.py"),
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
    )
    .unwrap();
    let src = "from pkg.kernels.fp8 import to_fp8 as f\nfrom .fp8 import to_fp8\nfrom pkg.kernels.ref import r\nfrom torch import nn\n";
    let parsed = crate::port::parse::parse(src);
    let names = cuda_only_imports(&pkg.join("kernels/test_fp8.py"), &parsed.module.body);
    let mut keys: Vec<&String> = names.keys().collect();
    keys.sort();
    assert_eq!(keys, ["f", "to_fp8"]);

    // A test of those kernels keeps its CUDA check and its device (`--to tpu`: the
    // portable device is CUDA's own under a CUDA test, and is ported).
    use crate::port::{RuleIndex, RuleSet, Settings, Target, migrate_source_at};
    let tpu = Settings {
        to: Target::Tpu,
        ..Settings::default()
    };
    let rules = RuleSet::builtin();
    let index = RuleIndex::new(&rules);
    let test = "import torch\nfrom pkg.kernels.fp8 import to_fp8\n\n\ndef test_fp8():\n    assert torch.cuda.is_available()\n    x = torch.randn(4, device=\"cuda\")\n    to_fp8(x)\n";
    let at = pkg.join("kernels/test_fp8.py");
    let out = migrate_source_at(test, Some(&at), &rules, &index, tpu);
    assert!(out.output.is_none(), "{:?}", out.output);
    // Without the Triton module beside it, the test is ported.
    let out = migrate_source_at(test, None, &rules, &index, tpu);
    assert!(out.output.is_some());

    // Two modules away: `pkg/linear.py` imports the kernels, a helper imports `linear`.
    std::fs::write(
        pkg.join("linear.py"),
        "import torch\nfrom pkg.kernels.fp8 import to_fp8\n\nclass Lin:\n    pass\n",
    )
    .unwrap();
    std::fs::write(pkg.join("plain.py"), "import torch\n").unwrap();
    let helper = "import torch\nfrom pkg.linear import Lin\n\n\ndef make(device=\"cuda\"):\n    return torch.zeros(1, device=device)\n";
    let at = pkg.join("helpers.py");
    let via = triton_import_in(&at, helper, HOPS, true).unwrap();
    assert!(via.ends_with("linear.py"), "{via:?}");
    let out = migrate_source_at(helper, Some(&at), &rules, &index, tpu);
    assert!(out.output.is_none(), "{:?}", out.output);
    let unsafe_note = out.diagnostics.iter().any(|d| {
        d.fix.as_ref().is_some_and(|f| {
            f.applicability == crate::port::rules::FixClass::Unsafe
                && d.note
                    .as_deref()
                    .is_some_and(|n| n.contains("`linear` (which imports Triton)"))
        })
    });
    assert!(unsafe_note, "{:?}", out.diagnostics);
    let names = cuda_only_imports(&at, &crate::port::parse::parse(helper).module.body);
    assert!(names.contains_key("Lin"));
    // A module importing only portable project modules is ported.
    let plain = helper.replace("pkg.linear import Lin", "pkg.plain import torch as t");
    assert!(triton_import_in(&at, &plain, HOPS, true).is_none());
    let out = migrate_source_at(&plain, Some(&at), &rules, &index, tpu);
    assert!(out.output.is_some());

    // A flag another module of the project computes from CUDA selects CUDA code here too.
    std::fs::write(
        pkg.join("guards.py"),
        "import torch\n\nFLEX = (\n    torch.__version__ >= \"2.5\"\n    and torch.cuda.is_available()\n)\nNEW = torch.__version__ >= \"2.5\"\n",
    )
    .unwrap();
    let user = "import torch\nfrom pkg.guards import FLEX\n\n\ndef mask(ids):\n    if FLEX:\n        return ids.to(\"cuda\")\n    return ids\n";
    let at = pkg.join("attention.py");
    let out = migrate_source_at(user, Some(&at), &rules, &index, tpu);
    assert!(out.output.is_none(), "{:?}", out.output);
    let portable = migrate_source_at(user, Some(&at), &rules, &index, Settings::default());
    assert!(
        portable
            .output
            .is_some_and(|o| o.contains("ids.to(torch.accelerator.current_accelerator())"))
    );
    let new = user.replace("FLEX", "NEW");
    let out = migrate_source_at(&new, Some(&at), &rules, &index, tpu);
    assert!(out.output.is_some_and(|o| o.contains("ids.to(\"tpu\")")));
    std::fs::remove_dir_all(&dir).unwrap();
}
