//! Programs, judged whole (issue 25): an entry script and the project modules it imports are
//! ported together; a program the migration leaves blocked on a TPU gets one PRG001 finding on
//! its entry script naming the places, and the summary counts the programs.

use std::fs;

use assert_cmd::Command;
use serde_json::Value;

/// The findings of `migrate --isolated --output-format json` over a tree of `files` (relative
/// path, text) written into a fresh folder.
fn findings_of_tree(files: &[(&str, &str)]) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (rel, text) in files {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["migrate", "--isolated", "--output-format", "json"])
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A two-file program whose model module keeps a CUDA stream (left for manual work), and a
/// program that ports whole: the first is reported as blocked, with the module's line.
#[test]
fn a_blocked_program_is_named_once_on_its_entry_script() {
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("blocked");
    let whole = dir.path().join("whole");
    for d in [&blocked, &whole] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(
        blocked.join("train.py"),
        "import torch\nfrom model import Net\n\nif __name__ == \"__main__\":\n    net = Net()\n    torch.cuda.synchronize()\n",
    )
    .unwrap();
    fs::write(
        blocked.join("model.py"),
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        s = torch.cuda.Stream()\n        with torch.cuda.stream(s):\n            return x * 2\n",
    )
    .unwrap();
    fs::write(
        whole.join("train.py"),
        "import torch\n\nif __name__ == \"__main__\":\n    torch.cuda.synchronize()\n",
    )
    .unwrap();
    let out = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["migrate", "--isolated", "--output-format", "json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let findings: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let programs: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "PRG001").collect();
    assert_eq!(programs.len(), 1, "{findings:#?}");
    let p = programs[0];
    assert!(
        p["path"].as_str().unwrap().ends_with("blocked/train.py"),
        "{p:#}"
    );
    let message = p["message"].as_str().unwrap();
    assert!(
        message.starts_with("this program is partly ported: on a TPU it still meets")
            && message.contains("model.py:"),
        "{message}"
    );
    assert_eq!(p["fix_class"], "manual");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("programs: 2 entry scripts: 1 ported whole, 1 partly ported and blocked on a TPU (PRG001), 0 left for manual work, 0 with nothing to port"),
        "{stderr}"
    );
    // --statistics counts it like any finding (found = left).
    let stats = Command::cargo_bin("tpuport")
        .unwrap()
        .args(["migrate", "--isolated", "--statistics"])
        .arg(dir.path())
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&stats.stdout);
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("PRG001") && l.split_whitespace().nth(1) == Some("1")),
        "{table}"
    );
}

/// A script kept inside a package folder (it puts the project on sys.path) that reaches a CUDA
/// extension the project compiles (set D's models/butterfly/benchmark.py): the extension's
/// import is a finding (KRN005), and the script, a program, is reported blocked by it.
#[test]
fn a_program_reaching_a_cuda_extension_of_the_project_is_blocked_by_it() {
    let findings = findings_of_tree(&[
        (
            "models/ops/ext/setup.py",
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\nsetup(ext_modules=[CUDAExtension('fused_mult', ['mult.cpp', 'mult_cuda.cu'])])\n",
        ),
        ("models/ops/__init__.py", ""),
        (
            "models/ops/mult.py",
            "import torch\n\ntry:\n    from fused_mult import forward\nexcept ImportError:\n    forward = None\n\n\ndef mult(x):\n    return forward(x)\n",
        ),
        (
            "models/ops/benchmark.py",
            "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n\nimport torch\nfrom ops.mult import mult\n\nx = torch.randn(4, 4).to('cuda')\nfor _ in range(10):\n    mult(x)\n",
        ),
    ]);
    let ext: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "KRN005").collect();
    assert_eq!(ext.len(), 1, "{findings:#?}");
    assert!(ext[0]["path"].as_str().unwrap().ends_with("ops/mult.py"));
    assert!(
        ext[0]["message"].as_str().unwrap().contains(
            "imports `fused_mult` (ops/ext/setup.py:3), a CUDA extension this project compiles"
        ),
        "{:#}",
        ext[0]
    );
    let blocked: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "PRG001").collect();
    assert_eq!(blocked.len(), 2, "{findings:#?}");
    // The extension's build script is a program nothing ported: PRG001 says so too.
    let path = |f: &Value| f["path"].as_str().unwrap_or("").to_string();
    let setup = blocked.iter().find(|f| path(f).ends_with("ext/setup.py"));
    assert!(
        setup.is_some_and(|f| f["message"]
            .as_str()
            .unwrap_or("")
            .contains("is not ported")),
        "{findings:#?}"
    );
    let blocked: Vec<&Value> = blocked
        .into_iter()
        .filter(|f| path(f).ends_with("ops/benchmark.py"))
        .collect();
    assert_eq!(blocked.len(), 1, "{findings:#?}");
    assert!(
        blocked[0]["message"]
            .as_str()
            .unwrap()
            .contains("mult.py:4 KRN005"),
        "{:#}",
        blocked[0]
    );
}

/// A Lightning Trainer that a Hydra config builds (set N's image-classification framework): no
/// Python line names the Trainer, so the `instantiate` that builds it is the finding (LIB025),
/// naming the config's line and accelerator, on the entry script (whose program has nothing
/// else to port: it is left for manual work, not partly ported).
#[test]
fn a_trainer_a_hydra_config_builds_is_reported_with_its_config() {
    let findings = findings_of_tree(&[
        (
            "conf/train.yaml",
            "model:\n  _target_: models.Net\ntrainer:\n  _target_: lightning.pytorch.Trainer\n  max_epochs: 3\n  accelerator: 'gpu'\n  devices: 1\n",
        ),
        (
            "main.py",
            "import hydra\nfrom hydra.utils import instantiate\n\n\n@hydra.main(config_path='conf', config_name='train')\ndef main(cfg):\n    model = instantiate(cfg.model)\n    trainer = instantiate(cfg.trainer)\n    trainer.fit(model)\n\n\nif __name__ == '__main__':\n    main()\n",
        ),
        (
            "other.py",
            "from hydra.utils import instantiate\n\n\ndef build(cfg):\n    return instantiate(cfg.model)\n",
        ),
    ]);
    let found: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "LIB025").collect();
    assert_eq!(found.len(), 1, "{findings:#?}");
    assert!(found[0]["path"].as_str().unwrap().ends_with("main.py"));
    assert_eq!(found[0]["line"], 8, "{:#}", found[0]);
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("(conf/train.yaml:4, accelerator: gpu)"),
        "{:#}",
        found[0]
    );
}

/// A device a YAML config sets to CUDA (set W): the load that reads it is the finding (DEV022),
/// naming the config's line; the program counts as blocked, not ported whole.
#[test]
fn a_cuda_device_a_config_sets_is_reported_on_the_load() {
    let files = [
        (
            "configs/train.yaml",
            "model:\n  channels: 64\ndevice: cuda\nepochs: 3\n",
        ),
        (
            "train.py",
            "import torch\nimport yaml\n\n\ndef main():\n    with open('configs/train.yaml') as f:\n        cfg = yaml.safe_load(f)\n    device = torch.device(cfg['device'] if torch.cuda.is_available() else 'cpu')\n    model = torch.nn.Linear(2, 2).to(device)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    loss = model(torch.ones(2, device=device)).sum()\n    loss.backward()\n    opt.step()\n\n\nif __name__ == '__main__':\n    main()\n",
        ),
    ];
    let findings = findings_of_tree(&files);
    let found: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "DEV022").collect();
    assert_eq!(found.len(), 1, "{findings:#?}");
    assert_eq!(found[0]["line"], 7, "{:#}", found[0]);
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("(configs/train.yaml:3: `device: cuda`)"),
        "{:#}",
        found[0]
    );
    // A config that says `auto` (or another device) says nothing.
    let auto = [(files[0].0, "device: auto\n"), files[1]];
    let findings = findings_of_tree(&auto);
    assert!(
        !findings.iter().any(|f| f["rule"] == "DEV022"),
        "{findings:#?}"
    );
}

/// A checkpoint kept in a variable with no `map_location`, in a module that names no device but
/// that a CUDA training script imports through a folder without `__init__.py` (set W: its
/// failed load, swallowed by a bare `except`, made fine-tuning start from scratch on a TPU):
/// DEV019 is reported there, so the program counts as blocked. Imported by a script that
/// never uses CUDA, the load says nothing.
#[test]
fn a_checkpoint_a_cuda_program_loads_in_its_modules_is_reported() {
    let loader = "import torch\n\n\ndef load(net, path):\n    try:\n        checkpoint = torch.load(path)\n        net.load_state_dict(checkpoint['model'])\n        return checkpoint['epoch']\n    except:\n        return 0\n";
    let train = "import torch\nfrom models import loader\n\n\ndef main():\n    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n    net = torch.nn.Linear(2, 2).to(device)\n    epoch = loader.load(net, 'ckpt.pt')\n    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n    net(torch.ones(2, device=device)).sum().backward()\n    opt.step()\n\n\nif __name__ == '__main__':\n    main()\n";
    let files = [("models/loader.py", loader), ("train.py", train)];
    let findings = findings_of_tree(&files);
    let at: Vec<(&str, &Value)> = findings
        .iter()
        .filter(|f| f["rule"] == "DEV019")
        .map(|f| (f["path"].as_str().unwrap_or(""), &f["line"]))
        .collect();
    assert!(
        at.iter()
            .any(|(p, l)| p.ends_with("models/loader.py") && **l == 6),
        "{findings:#?}"
    );
    assert!(
        findings.iter().any(
            |f| f["rule"] == "PRG001" && f["path"].as_str().unwrap_or("").ends_with("train.py")
        ),
        "{findings:#?}"
    );
    let cpu_only = train.replace("'cuda' if torch.cuda.is_available() else 'cpu'", "'cpu'");
    let findings = findings_of_tree(&[files[0], ("train.py", &cpu_only)]);
    assert!(
        !findings.iter().any(|f| f["rule"] == "DEV019"),
        "{findings:#?}"
    );
}

/// A notebook that installs the project's own package from PyPI and imports it (set X: a Colab
/// demo): it runs the published release, which the port never reaches, so DEV024 is reported
/// on the import and the program counts as blocked. A notebook installing other packages, or
/// one without the project's import, says nothing.
#[test]
fn a_notebook_running_the_published_package_is_reported() {
    let notebook = |pip: &str, import: &str| {
        serde_json::json!({
            "cells": [
                {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null,
                 "source": [format!("!pip install -q \"numpy<2.1\" {pip}\n")]},
                {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": null,
                 "source": [format!("import torch\n{import}\n"), "model = run(torch.ones(2))\n"]}
            ],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5
        })
        .to_string()
    };
    let project = "[project]\nname = \"Depth_Recon\"\nversion = \"0.1\"\n";
    let module = "import torch\n\n\ndef run(x):\n    device = 'cuda' if torch.cuda.is_available() else 'cpu'\n    return x.to(device)\n";
    let own = notebook("depth-recon", "from depth_recon.core import run");
    let files = [
        ("pyproject.toml", project),
        ("depth_recon/__init__.py", ""),
        ("depth_recon/core.py", module),
        ("demo.ipynb", own.as_str()),
    ];
    let findings = findings_of_tree(&files);
    let found: Vec<&Value> = findings.iter().filter(|f| f["rule"] == "DEV024").collect();
    assert_eq!(found.len(), 1, "{findings:#?}");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("`depth-recon`"),
        "{:#}",
        found[0]
    );
    let other = notebook("cmocean", "from depth_recon.core import run");
    let findings = findings_of_tree(&[files[0], files[1], files[2], ("demo.ipynb", &other)]);
    assert!(
        !findings.iter().any(|f| f["rule"] == "DEV024"),
        "{findings:#?}"
    );
}
