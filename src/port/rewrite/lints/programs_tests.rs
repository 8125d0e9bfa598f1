//! PERF001 once per program: an entry script reports for the modules it imports, a library's
//! modules once per package.

use std::path::Path;

use crate::port::test_support::write;

/// The PERF001 findings of the file at `path` (read from disk): line and message.
fn perf001(path: &Path) -> Vec<String> {
    let src = std::fs::read_to_string(path).unwrap();
    crate::port::test_support::findings("PERF001", &src, Some(path))
}

const CNN: &str = "import torch.nn as nn\n\n\nclass NAME(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a = nn.Conv2d(3, 8, 3)\n        self.b = nn.Conv2d(8, 8, 3)\n";

#[test]
fn a_library_of_model_files_gets_one_finding_per_package() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    write(root, "lib/__init__.py", "");
    write(root, "lib/models/__init__.py", "");
    let a = write(
        root,
        "lib/models/alexnet.py",
        &CNN.replace("NAME", "AlexNet"),
    );
    let b = write(root, "lib/models/resnet.py", &CNN.replace("NAME", "ResNet"));
    let c = write(root, "lib/models/vgg.py", &CNN.replace("NAME", "VGG"));
    let v = write(root, "lib/models/vit.py", &CNN.replace("NAME", "ViT"));
    let w = write(root, "lib/models/wide.py", &CNN.replace("NAME", "Wide"));
    assert_eq!(
        perf001(&a),
        [
            "7: `nn.Conv2d(3, 8, 3)` builds a convolutional network in channels-first layout (class `AlexNet`; one finding for package `lib`: 4 more of its modules build convolutional networks, lib/models/resnet.py (class `ResNet`), lib/models/vgg.py (class `VGG`), lib/models/vit.py (class `ViT`) and 1 more)"
        ]
    );
    for other in [b, c, v, w] {
        assert!(perf001(&other).is_empty(), "{}", other.display());
    }
}

#[test]
fn a_module_whose_names_do_not_resolve_is_judged_by_its_text() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    // Convolutions imported from torch by name: the text counts them where the syntax tree
    // cannot tell (here it can; the package's other modules are judged the same way).
    let layers = "from torch.nn import (\n    Conv2d,\n    ReLU,\n)\n\nclass Block(Base):\n    def __init__(self):\n        self.inner = Conv2d(3, 3, 1)\n        self.other = Conv2d(3, 3, 1)\n";
    // A wrapper of the same name imported from elsewhere (peft's adapters), a module's own
    // `Conv2d` class, and prose (`Conv2d (and Conv1d)`) are no torch convolutions.
    let wrapper = "from .layer import Conv2d\n\ndef wrap(a, b):\n    return Conv2d(a), Conv2d(b)\n";
    let own = "class Conv2d(Base):\n    \"\"\"For Conv2d (and Conv1d).\"\"\"\n\ndef make():\n    return Conv2d(1), Conv2d(2)\n";
    write(root, "one/__init__.py", "");
    let layers = write(root, "one/b_layers.py", layers);
    let wrapper = write(root, "one/a_wrapper.py", wrapper);
    let own = write(root, "one/a0_own.py", own);
    // A test module is not counted, nor does it report.
    let test = write(root, "one/a_test.py", &CNN.replace("NAME", "T"));
    assert_eq!(
        perf001(&layers),
        [
            "8: `Conv2d(3, 3, 1)` builds a convolutional network in channels-first layout (class `Block`)"
        ]
    );
    for none in [wrapper, own, test] {
        assert!(perf001(&none).is_empty(), "{}", none.display());
    }
}

#[test]
fn an_entry_script_reports_for_the_modules_it_imports() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    write(root, "proj/__init__.py", "");
    let net = write(root, "proj/net.py", &CNN.replace("NAME", "Net"));
    let other = write(root, "proj/other.py", &CNN.replace("NAME", "Other"));
    let train = write(
        root,
        "train.py",
        "import torch\nfrom proj.net import Net\n\nif __name__ == \"__main__\":\n    model = Net().to(\"cuda\")\n",
    );
    assert_eq!(
        perf001(&train),
        [
            "2: `from proj.net import Net` builds a convolutional network in channels-first layout (in the project modules this program imports: proj/net.py (class `Net`))"
        ]
    );
    // The module is the program's: no second finding there. A module no entry script imports
    // is its package's.
    assert!(perf001(&net).is_empty());
    assert_eq!(perf001(&other).len(), 1);
    // A test is no program: what it imports counts with its package.
    let test = write(
        root,
        "test_net.py",
        "import unittest\nfrom proj.net import Net\n\nif __name__ == \"__main__\":\n    Net()\n",
    );
    assert!(perf001(&test).is_empty());
    // The entry script's own network comes first, the modules' are named.
    let own = format!(
        "{}\nfrom proj.net import Net\n\nif __name__ == \"__main__\":\n    Net()\n",
        CNN.replace("NAME", "Head")
    );
    let script = write(root, "own.py", &own);
    assert_eq!(
        perf001(&script),
        [
            "7: `nn.Conv2d(3, 8, 3)` builds a convolutional network in channels-first layout (class `Head`; also in the project modules this program imports: proj/net.py (class `Net`))"
        ]
    );
}

#[test]
fn a_program_that_converts_somewhere_has_nothing_to_report() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    write(root, "proj/__init__.py", "");
    write(root, "proj/net.py", &CNN.replace("NAME", "Net"));
    write(
        root,
        "proj/util.py",
        "import torch\nfmt = torch.channels_last\n",
    );
    let train = write(
        root,
        "train.py",
        "import torch\nfrom proj.net import Net\nfrom proj import util\n\nif __name__ == \"__main__\":\n    model = Net().to(\"cuda\")\n",
    );
    assert!(perf001(&train).is_empty());
}

#[test]
fn a_layer_library_the_program_uses_for_other_names_is_no_cnn_of_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    write(root, "lib/__init__.py", "from .layers import *\n");
    // Conv blocks beside the Linear the program uses; a factory of them.
    write(
        root,
        "lib/layers.py",
        &format!(
            "{}\n\ndef make_cnn():\n    return NAME()\n\n\nclass Dense(nn.Module):\n    pass\n",
            CNN.replace("NAME", "ConvBlock")
        )
        .replace("NAME()", "ConvBlock()"),
    );
    let mlp = write(
        root,
        "examples/mlp.py",
        "import torch\nfrom lib import layers\n\nif __name__ == \"__main__\":\n    net = layers.Dense()\n",
    );
    assert!(perf001(&mlp).is_empty());
    // A program that calls the factory builds the network.
    let cnn = write(
        root,
        "examples/cnn.py",
        "import torch\nfrom lib import layers\n\nif __name__ == \"__main__\":\n    net = layers.make_cnn()\n",
    );
    assert_eq!(
        perf001(&cnn),
        [
            "2: `from lib import layers` builds a convolutional network in channels-first layout (in the project modules this program imports: lib/layers.py (class `ConvBlock`))"
        ]
    );
}
