//! Tests of the import follower ([`super`]).

use super::*;

fn files(found: Vec<Import>) -> Vec<PathBuf> {
    found.into_iter().map(|i| i.file).collect()
}

#[test]
fn folders_a_script_puts_on_sys_path_are_searched() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        "src/pipelines/train/lib.py",
        "experiments/demo.py",
        "train.py",
    ] {
        let p = d.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let script = d.path().join("run.py");
    let text = "import sys\nfrom pathlib import Path\nSRC = Path(__file__).parent / \"src\"\nif str(SRC) not in sys.path:\n    sys.path.insert(0, str(SRC))\nfrom pipelines.train.lib import train\n";
    assert_eq!(
        files(project_imports(&script, text)),
        vec![d.path().join("src/pipelines/train/lib.py")]
    );
    // Without a sys.path edit the folder is not searched.
    let plain = text.replace("sys.path", "other");
    assert!(project_imports(&script, &plain).is_empty());
    // `sys.path.append('..')` from a subfolder: the script above.
    let demo = d.path().join("experiments/demo.py");
    let up = "import sys\nsys.path.append('..')\nimport train\n";
    assert_eq!(
        files(project_imports(&demo, up)),
        vec![d.path().join("train.py")]
    );
}

#[test]
fn names_a_package_re_exports_reach_their_submodule() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("pkg/modules")).unwrap();
    std::fs::write(d.path().join("pkg/__init__.py"), "").unwrap();
    std::fs::write(
        d.path().join("pkg/modules/__init__.py"),
        "from .encoder import (\n    create_encoder,\n    EncoderConfig as Config,\n)\nfrom .other import thing\n",
    )
    .unwrap();
    std::fs::write(d.path().join("pkg/modules/encoder.py"), "").unwrap();
    std::fs::write(d.path().join("pkg/modules/other.py"), "").unwrap();
    let script = d.path().join("train.py");
    let text = "def main():\n    from pkg.modules import (\n        create_encoder,\n        Config,\n    )\n";
    assert_eq!(
        files(imports_at(&script, text, Depth::Anywhere)),
        vec![
            d.path().join("pkg/__init__.py"),
            d.path().join("pkg/modules/__init__.py"),
            d.path().join("pkg/modules/encoder.py"),
        ]
    );
    // At top level only, the lazy import is not read.
    assert!(project_imports(&script, text).is_empty());
}

#[test]
fn imports_resolve_beside_the_script_and_in_packages() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("pkg/sub")).unwrap();
    for f in [
        "pkg/__init__.py",
        "pkg/sub/__init__.py",
        "pkg/sub/net.py",
        "helper.py",
        "other.py",
    ] {
        std::fs::write(d.path().join(f), "").unwrap();
    }
    let script = d.path().join("pkg/sub/train.py");
    let text = "from .net import Net\nimport helper\nfrom pkg.sub import net\nimport torch\n";
    assert_eq!(
        files(project_imports(&script, text)),
        vec![
            d.path().join("pkg/sub/net.py"),
            d.path().join("pkg/__init__.py"),
            d.path().join("pkg/sub/__init__.py"),
        ]
    );
    let top = d.path().join("run.py");
    let text = "import helper, other as o\nfrom pkg.sub.net import Net\nfrom pkg.sub import (\n    net,\n)\n";
    let found = project_imports(&top, text);
    assert_eq!(
        files(found.clone()),
        vec![
            d.path().join("helper.py"),
            d.path().join("other.py"),
            d.path().join("pkg/__init__.py"),
            d.path().join("pkg/sub/__init__.py"),
            d.path().join("pkg/sub/net.py"),
        ]
    );
    // Each with the statement that imports it.
    assert_eq!(&text[found[4].at.clone()], "from pkg.sub.net import Net");
    // A package imported by name is its `__init__.py`, after its parent's.
    assert_eq!(
        files(project_imports(&top, "import pkg.sub\n")),
        vec![
            d.path().join("pkg/__init__.py"),
            d.path().join("pkg/sub/__init__.py")
        ]
    );
    // A subpackage named like a top-level one is not what an absolute import finds.
    std::fs::create_dir_all(d.path().join("pkg/torch")).unwrap();
    std::fs::write(d.path().join("pkg/torch/__init__.py"), "").unwrap();
    assert!(project_imports(&script, "import torch\n").is_empty());
    // A namespace package (no `__init__.py`) at the project's root, reached from a script
    // in a folder beside it (`tools/train.py` after `import _init_paths`): a dotted name
    // whose file is there; a bare name is not looked for above the script.
    std::fs::create_dir_all(d.path().join("lib/core")).unwrap();
    std::fs::create_dir_all(d.path().join("tools")).unwrap();
    std::fs::write(d.path().join("lib/core/function.py"), "").unwrap();
    let tool = d.path().join("tools/train.py");
    assert_eq!(
        files(project_imports(
            &tool,
            "import _init_paths\nfrom lib.core.function import train\nimport lib.core.missing\nimport other\n"
        )),
        vec![d.path().join("lib/core/function.py")]
    );
    // Imports under `try:` or in a function are not the program's for sure: not followed.
    assert!(
        project_imports(
            &top,
            "try:\n    import helper\nexcept ImportError:\n    pass\n"
        )
        .is_empty()
    );
}

#[test]
fn a_program_is_followed_breadth_first_through_its_modules() {
    let d = tempfile::tempdir().unwrap();
    let w = |name: &str, text: &str| std::fs::write(d.path().join(name), text).unwrap();
    w("model.py", "import torch\nfrom layers import Block\n");
    w("layers.py", "import torch\nfrom model import GPT\n");
    w("data.py", "import os\n");
    let train = d.path().join("train.py");
    let text = "import torch\nfrom model import GPT\nimport data\n";
    let found = modules_of(&train, text);
    let got: Vec<(String, usize, &str)> = found
        .iter()
        .map(|m| {
            (
                m.file.file_name().unwrap().to_string_lossy().into_owned(),
                m.hops,
                &text[m.via.clone()],
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("model.py".into(), 1, "from model import GPT"),
            ("data.py".into(), 1, "import data"),
            ("layers.py".into(), 2, "from model import GPT"),
        ]
    );
}

/// Importing a submodule runs its packages' `__init__.py` first: `from pkg.model.build import
/// f` reaches `pkg/__init__.py` and `pkg/model/__init__.py` (set Y: a package whose
/// `__init__.py` imports every backbone, one of them CuPy at load), `import pkg.util` too.
#[test]
fn a_submodule_import_runs_its_packages_inits() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        "pkg/__init__.py",
        "pkg/model/__init__.py",
        "pkg/model/build.py",
        "pkg/util.py",
    ] {
        let p = d.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    let script = d.path().join("run.py");
    let text = "from pkg.model.build import f\nimport pkg.util\n";
    assert_eq!(
        files(project_imports(&script, text)),
        vec![
            d.path().join("pkg/__init__.py"),
            d.path().join("pkg/model/__init__.py"),
            d.path().join("pkg/model/build.py"),
            d.path().join("pkg/util.py"),
        ]
    );
}

#[test]
fn modules_loaded_at_run_time_are_followed() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        "configs/v3.py",
        "configs/v5.py",
        "models/__init__.py",
        "models/resnet.py",
        "models/vit.py",
        "utils/helpers.py",
        "src/train.py",
    ] {
        let p = d.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    // Set AB: a config module loaded by path from a folder the script names, one level up.
    let script = d.path().join("src/train.py");
    let by_path = "import importlib.util\ndef main():\n    path = Path(__file__).parent.parent / 'configs' / name\n    spec = importlib.util.spec_from_file_location('cfg', path)\n";
    assert_eq!(
        files(imports_at(&script, by_path, Depth::Anywhere)),
        vec![
            d.path().join("configs/v3.py"),
            d.path().join("configs/v5.py")
        ]
    );
    // What importing the module runs does not load them; without a loader, a folder named in
    // a string is only a string.
    assert!(imports_at(&script, by_path, Depth::TopLevel).is_empty());
    let plain = by_path.replace("spec_from_file_location", "open");
    assert!(imports_at(&script, &plain, Depth::Anywhere).is_empty());
    // Only the lines around the load name its folder: a folder named far above it is not it.
    let far = format!(
        "OUT = 'configs'\n{}{}",
        "x = 1\n".repeat(20),
        by_path.replace("'configs' / ", "")
    );
    assert!(imports_at(&script, &far, Depth::Anywhere).is_empty());
    // A registry: a literal package and a module chosen at run time; a literal module.
    let root = d.path().join("main.py");
    let registry = "import importlib\nm = importlib.import_module('models.' + args.arch)\nh = importlib.import_module(\"utils.helpers\")\nt = __import__('torch')\n";
    assert_eq!(
        files(imports_at(&root, registry, Depth::Anywhere)),
        vec![
            d.path().join("models/resnet.py"),
            d.path().join("models/vit.py"),
            d.path().join("utils/helpers.py"),
        ]
    );
    let fstring = "import importlib\nm = importlib.import_module(f\"models.{name}\")\n";
    assert_eq!(
        files(imports_at(&root, fstring, Depth::Anywhere)).len(),
        2,
        "{fstring}"
    );
}

#[test]
fn src_layouts_and_sibling_packages_are_found() {
    let d = tempfile::tempdir().unwrap();
    for f in [
        "src/hyper/__init__.py",
        "src/hyper/device.py",
        "app/__init__.py",
        "app/core/__init__.py",
        "app/core/constants.py",
        "app/modelling/__init__.py",
        "app/modelling/train.py",
        "app/torch/__init__.py",
        "app/torch/nn.py",
    ] {
        let p = d.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }
    // A root script of a src layout (set AC).
    let root = d.path().join("train.py");
    tree::set_run_roots(&[d.path().to_path_buf()]);
    assert_eq!(
        files(project_imports(&root, "from hyper.device import pick\n")),
        vec![
            d.path().join("src/hyper/__init__.py"),
            d.path().join("src/hyper/device.py")
        ]
    );
    // A sibling package of a package run with its folder on PYTHONPATH (set AD); not a
    // name a big library owns.
    let script = d.path().join("app/modelling/train.py");
    assert_eq!(
        files(project_imports(
            &script,
            "from core.constants import DEVICE\nimport torch.nn\n"
        )),
        vec![d.path().join("app/core/constants.py")]
    );
    tree::set_run_roots(&[]);
}
