//! The torch a project supports, read from its files, and the fixes kept within it.

use crate::port::diagnostic::UNDECLARED_TORCH;
use crate::port::test_support::{migrate_all_at, write};

const SRC: &str =
    "import torch\nstates = torch.cuda.get_rng_state_all()\nn = torch.cuda.device_count()\n";

/// The port of [`SRC`] as `name` in a fresh folder holding `pin` (a file name and its text).
fn port_beside(name: &str, text: &str, pin: Option<(&str, &str)>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, text);
    if let Some((file, pin)) = pin {
        write(dir.path(), file, pin);
    }
    migrate_all_at(text, &path)
}

#[test]
fn a_form_newer_than_the_oldest_supported_torch_is_unsafe() {
    let out = port_beside(
        "train.py",
        SRC,
        Some(("requirements.txt", "torch==2.7.1\n")),
    );
    assert!(out.contains("torch.cuda.get_rng_state_all()"), "{out}");
    assert!(out.contains("torch.accelerator.device_count()"), "{out}");
    let out = port_beside("train.py", SRC, Some(("requirements.txt", "torch>=2.13\n")));
    assert!(
        out.contains("torch.accelerator.random.get_rng_state_all()"),
        "{out}"
    );
    // A library declaring an older minimum keeps its CUDA calls.
    let out = port_beside(
        "lib.py",
        SRC,
        Some(("pyproject.toml", "dependencies = [\"torch>=2.0\"]\n")),
    );
    assert!(out.contains("torch.cuda.device_count()"), "{out}");
    // A README that says so in prose.
    let out = port_beside(
        "train.py",
        SRC,
        Some(("README.md", "Requirements: PyTorch 1.12+ or 2.x\n")),
    );
    assert!(out.contains("torch.cuda.device_count()"), "{out}");
    // With neither, the forms are torch 2.15's.
    let out = port_beside("train.py", SRC, None);
    assert!(out.contains("torch.accelerator.device_count()"), "{out}");
}

#[test]
fn a_new_run_reads_a_changed_pin() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", SRC);
    write(dir.path(), "requirements.txt", "torch==2.7.1\n");
    assert!(migrate_all_at(SRC, &path).contains("torch.cuda.get_rng_state_all()"));
    // `migrate --watch` runs again after the pin changed: the folder is read afresh.
    std::fs::write(dir.path().join("requirements.txt"), "torch>=2.13\n").unwrap();
    super::super::forget();
    assert!(migrate_all_at(SRC, &path).contains("torch.accelerator.random.get_rng_state_all()"));
}

#[test]
fn torchtext_anywhere_in_the_project_bounds_its_torch() {
    // The data loader imports torchtext.legacy (torchtext 0.9-0.11: torch 1.10 at most); the
    // device is chosen in the config module beside it, which imports no torchtext.
    let src =
        "import torch\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "conf.py", src);
    write(
        dir.path(),
        "utils/data_loader.py",
        "from torchtext.legacy.data import Field\n",
    );
    let out = migrate_all_at(src, &path);
    assert!(
        out.contains("if hasattr(torch, \"accelerator\"):")
            && out.contains("torch.cuda.is_available() else \"cpu\")"),
        "{out}"
    );
}

#[test]
fn a_conda_environment_under_any_name_is_read() {
    let env = "name: Pytorch-Transformer\ndependencies:\n  - python=3.6.15=hb7a2778_0_cpython\n  - pytorch=1.10.2=py3.6_cuda10.2_cudnn7.6.5_0\n";
    let out = port_beside("train.py", SRC, Some(("Pytorch-Transformer.yaml", env)));
    assert!(out.contains("torch.cuda.device_count()"), "{out}");
    // Other YAML (a model config) says nothing about torch: the project declares none.
    let config = "model:\n  name: pytorch=1.10\n";
    let notes = notes_beside("train.py", SRC, ("config.yaml", config));
    assert!(
        notes.iter().all(|n| !n.contains("1.10"))
            && notes.iter().any(|n| n.contains(UNDECLARED_TORCH)),
        "{notes:?}"
    );
}

/// The notes of every finding of `text` at `name`, beside the file `pin`.
fn notes_beside(name: &str, text: &str, pin: (&str, &str)) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, text);
    write(dir.path(), pin.0, pin.1);
    let rules = crate::port::RuleSet::builtin();
    let index = crate::port::RuleIndex::new(&rules);
    let settings = crate::port::Settings::default();
    crate::port::migrate_source_at(text, Some(&path), &rules, &index, settings)
        .diagnostics
        .into_iter()
        .filter_map(|d| d.note)
        .collect()
}

/// A project that declares no torch keeps both forms (sets S-U); `--min-torch` declares one
/// over the pins.
#[test]
fn a_project_that_declares_no_torch_keeps_both_forms_until_one_is_declared() {
    let src = "import torch\n\nn = torch.cuda.device_count()\nfree = torch.cuda.mem_get_info()\n";
    let out = port_beside("train.py", src, None);
    assert!(
        out.contains("if hasattr(torch, \"accelerator\"):\n    n = torch.accelerator.device_count()\nelse:\n    n = torch.cuda.device_count()\n"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    write(dir.path(), "requirements.txt", "torch==1.13.1\n");
    let rules = crate::port::RuleSet::builtin();
    let index = crate::port::RuleIndex::new(&rules);
    let declared = crate::port::Settings {
        min_torch: Some((2, 11)),
        ..Default::default()
    };
    let out = crate::port::migrate_source_at(src, Some(&path), &rules, &index, declared);
    let text = out.output.unwrap_or_default();
    assert!(
        text.contains("\nn = torch.accelerator.device_count()\n"),
        "{text}"
    );
    assert!(!text.contains("hasattr"), "{text}");
    // Declared older than a form needs: the form that no test finds stays unsafe, named.
    let old = crate::port::Settings {
        min_torch: Some((2, 6)),
        ..Default::default()
    };
    let out = crate::port::migrate_source_at(src, Some(&path), &rules, &index, old);
    assert!(
        out.diagnostics
            .iter()
            .filter_map(|d| d.note.as_deref())
            .any(|n| n.contains("--min-torch")),
        "{:?}",
        out.diagnostics
    );
}

#[test]
fn an_accelerator_branch_added_to_a_chain_asks_for_torch_accelerator_on_old_torch() {
    let src = "import torch\n\n\ndef get_device():\n    if torch.cuda.is_available():\n        return \"cuda\"\n    elif torch.backends.mps.is_available():\n        return \"mps\"\n    else:\n        return \"cpu\"\n";
    let out = port_beside("dev.py", src, Some(("requirements.txt", "torch>=2.0.0\n")));
    assert!(
        out.contains(
            "    elif hasattr(torch, \"accelerator\") and torch.accelerator.is_available():\n"
        ),
        "{out}"
    );
    let out = port_beside("dev.py", src, None);
    assert!(
        out.contains(
            "    elif hasattr(torch, \"accelerator\") and torch.accelerator.is_available():\n"
        ),
        "{out}"
    );
    let out = port_beside("dev.py", src, Some(("requirements.txt", "torch>=2.11\n")));
    assert!(
        out.contains("    elif torch.accelerator.is_available():\n"),
        "{out}"
    );
}

#[test]
fn a_notebook_cell_keeps_showing_its_last_value() {
    // A notebook's code, as its cells give it to the rules.
    let cell = "import torch\ntorch.cuda.is_available()\nprint(torch.cuda.device_count())\n";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "requirements.txt", "torch==2.3.0\n");
    let out = migrate_all_at(cell, &dir.path().join("check.ipynb"));
    assert!(
        out.contains("\n(torch.accelerator.is_available() if hasattr(torch, \"accelerator\") else torch.cuda.is_available())\n"),
        "{out}"
    );
    // `print` shows nothing either way: the plainer `if` statement.
    assert!(
        out.contains("\nif hasattr(torch, \"accelerator\"):\n    print("),
        "{out}"
    );
    // A script shows nothing: the `if` statement.
    let out = migrate_all_at(cell, &dir.path().join("check.py"));
    assert!(
        out.contains(
            "\nif hasattr(torch, \"accelerator\"):\n    torch.accelerator.is_available()\n"
        ),
        "{out}"
    );
}

#[test]
fn an_environment_beside_the_code_counts() {
    // `Docker/Dockerfile` at the project's top level, beside the package that is fixed.
    let src = "import torch\nn = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "Docker/Dockerfile",
        "FROM pytorch/pytorch:1.0.1-cuda10.0-cudnn7-runtime\n",
    );
    write(dir.path(), "models/__init__.py", "");
    let path = write(dir.path(), "models/count.py", src);
    let out = migrate_all_at(src, &path);
    assert!(
        out.contains("else:\n    n = torch.cuda.device_count()"),
        "{out}"
    );
}

/// A module importing torchtext runs the torch its last release was built for (2.3), pins
/// or none (set R); a requirement of a companion package names its torch too.
#[test]
fn torchtext_and_companion_pins_bound_the_torch() {
    let src = "import torch\nfrom torchtext.vocab import build_vocab_from_iterator\n\nn = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "requirements.txt", "torch>=2.11\n");
    let path = write(dir.path(), "train.py", src);
    let out = migrate_all_at(src, &path);
    assert!(out.contains("if hasattr(torch, \"accelerator\"):\n    n = torch.accelerator.device_count()\nelse:\n    n = torch.cuda.device_count()\n"), "{out}");
    let plain = "import torch\n\nn = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "other.py", plain);
    write(dir.path(), "requirements.txt", "torch>=2.11\n");
    assert!(migrate_all_at(plain, &path).contains("\nn = torch.accelerator.device_count()\n"));
    let pins = "torch>=2.11\ntorchvision==0.15.2\n";
    write(dir.path(), "requirements.txt", pins);
    super::forget();
    assert!(migrate_all_at(plain, &path).contains("if hasattr(torch, \"accelerator\"):"));
}

/// An edit inside an f-string keeps both forms by writing the f-string (or what holds it)
/// twice, never the test inside it; a string over several lines is written twice as it is,
/// its continuation lines untouched (a memory log over backslash-continued lines).
#[test]
fn edits_inside_f_strings_keep_both_forms_around_the_string() {
    let src = "import torch\nimport logging\n\n\ndef setup(rank):\n    device = torch.device(f\"cuda:{rank % torch.cuda.device_count()}\")\n    return device\n\n\ndef log():\n    logging.warning(\n        f\"Allocated {torch.cuda.memory_allocated()} B \\\n        Reserved {torch.cuda.memory_reserved()} B\"\n    )\n";
    let out = port_beside("train.py", src, None);
    assert!(
        out.contains("    else:\n        device = torch.device(f\"cuda:{rank % torch.cuda.device_count()}\")\n"),
        "{out}"
    );
    assert!(
        out.contains(" else f\"Allocated {torch.cuda.memory_allocated()} B \\\n        Reserved {torch.cuda.memory_reserved()} B\")\n    )\n"),
        "{out}"
    );
    assert!(crate::port::parse::is_valid(&out), "{out}");
    // No test inside an f-string: its quotes would end it before Python 3.12.
    assert!(
        !out.contains("{hasattr") && !out.contains("{(hasattr"),
        "{out}"
    );
}

/// `torch.Event`/`torch.Stream` (torch 2.4) named without a call in the edit (the callee alone
/// is rewritten, `torch.cuda.Event(enable_timing=True)`): a project pinning torch 2.3 keeps
/// CUDA's event beside it (set Z: timing events in a project on torch==2.3.1).
#[test]
fn an_event_callee_keeps_the_cuda_event_below_torch_2_4() {
    let src = "import torch\n\nstart = torch.cuda.Event(enable_timing=True)\n";
    let out = port_beside("cost.py", src, Some(("requirements.txt", "torch==2.3.1\n")));
    assert!(out.contains("torch.Event(enable_timing=True)"), "{out}");
    assert!(
        out.contains("torch.cuda.Event(enable_timing=True)"),
        "{out}"
    );
    let newer = port_beside("cost.py", src, Some(("requirements.txt", "torch==2.5.1\n")));
    assert!(!newer.contains("torch.cuda.Event"), "{newer}");
}

/// `torch.OutOfMemoryError` (torch 2.4) in a handler of a project supporting torch 2.3 (set AC:
/// every `except` clause raised AttributeError there): the CUDA class stays beside it.
#[test]
fn the_generic_out_of_memory_error_keeps_cuda_s_below_torch_2_4() {
    let src = "import torch\n\ntry:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    pass\n";
    let out = port_beside("run.py", src, Some(("requirements.txt", "torch==2.3.1\n")));
    assert!(out.contains("torch.OutOfMemoryError"), "{out}");
    assert!(out.contains("else torch.cuda.OutOfMemoryError"), "{out}");
    assert!(crate::port::parse::is_valid(&out), "{out}");
    let newer = port_beside("run.py", src, Some(("requirements.txt", "torch==2.5.1\n")));
    assert!(!newer.contains("torch.cuda.OutOfMemoryError"), "{newer}");
}
