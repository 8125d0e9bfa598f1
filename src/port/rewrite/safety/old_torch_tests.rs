//! Tests of `old_torch.rs`: fixes written in two forms for a project on an older torch.

use crate::port::test_support::{migrate_all_at, write};

const SRC: &str = "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\nn = torch.cuda.device_count()\nx = torch.zeros(3).cuda()\ny = torch.ones(1).cuda(); z = 2\nname = f\"{torch.cuda.device_count()} GPUs\"\ntorch.cuda.set_device(0)\nfor _ in range(3 if torch.cuda.device_count() else 0):\n    pass\n";

/// A project supporting torch 1.13 keeps its CUDA forms on that torch and gets the portable
/// ones where torch has `torch.accelerator`; an f-string stays CUDA's.
#[test]
fn a_project_on_an_older_torch_keeps_both_forms() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", SRC);
    write(dir.path(), "requirements.txt", "torch==1.13.1\n");
    let out = migrate_all_at(SRC, &path);
    assert!(
        out.contains("if hasattr(torch, \"accelerator\"):\n    n = torch.accelerator.device_count()\nelse:\n    n = torch.cuda.device_count()\n"),
        "{out}"
    );
    assert!(
        out.contains("else:\n    x = torch.zeros(3).cuda()\n"),
        "{out}"
    );
    // A statement sharing its line: the expression.
    assert!(
        out.contains("y = (torch.ones(1).to(torch.accelerator.current_accelerator()) if hasattr(torch, \"accelerator\") else torch.ones(1).cuda()); z = 2"),
        "{out}"
    );
    // Inside a larger statement, the expression.
    assert!(
        out.contains("for _ in (range(3 if torch.accelerator.device_count() else 0) if hasattr(torch, \"accelerator\") else range(3 if torch.cuda.device_count() else 0)):"),
        "{out}"
    );
    assert!(
        out.contains("f\"{torch.cuda.device_count()} GPUs\""),
        "{out}"
    );
    // A form newer than 2.6 tests for its own addition too.
    assert!(
        out.contains("if hasattr(torch, \"accelerator\") and hasattr(torch.accelerator, \"set_device_index\"):\n    torch.accelerator.set_device_index(0)\nelse:\n    torch.cuda.set_device(0)\n"),
        "{out}"
    );
    assert!(crate::port::parse::is_valid(&out), "{out}");
    // A second run changes nothing.
    let again = dir.path().join("again.py");
    std::fs::write(&again, &out).unwrap();
    assert_eq!(migrate_all_at(&out, &again), out);
}

/// An inserted switch runs only where torch has what it calls; the newlines around it stay.
#[test]
fn an_inserted_switch_is_kept_to_new_torch() {
    use crate::port::edit::{Edit, Fix};
    use ruff_text_size::TextSize;
    let src = "import torch\nfrom model import GPT\n\nx = 1\n";
    let switch = "\n\n# why\nif getattr(torch.accelerator.current_accelerator(), \"type\", None) == \"tpu\":\n    torch.__future__.set_swap_module_params_on_conversion(True)";
    let fix = Fix {
        edits: vec![Edit::insert(TextSize::from(34), switch)],
        applicability: crate::port::rules::FixClass::Safe,
        imports: vec![],
        exclusive: None,
        why_unsafe: None,
    };
    let probe = |_: &str| Some(super::PROBE.to_string());
    let kept = super::inserting_for_new_torch(&fix, src, &probe).unwrap();
    let mut out = src.to_string();
    out.insert_str(34, &kept.edits[0].content);
    assert_eq!(
        out,
        "import torch\nfrom model import GPT\n\nif hasattr(torch, \"accelerator\"):\n    # why\n    if getattr(torch.accelerator.current_accelerator(), \"type\", None) == \"tpu\":\n        torch.__future__.set_swap_module_params_on_conversion(True)\n\nx = 1\n"
    );
}

/// Where no conditional may stand (a target, a decorator before Python 3.9), the fix keeps
/// both forms inside it; a statement continued from the line before is not split.
#[test]
fn targets_decorators_and_continued_lines_stay_valid() {
    let src = "import functools\nimport torch\n\nresults = {}\nresults[torch.cuda.current_device()] = 1\ndel results[torch.cuda.current_device()]\n\n\n@functools.lru_cache(maxsize=torch.cuda.device_count())\ndef f():\n    pass\n\n\nx = 1; \\\nn = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    write(dir.path(), "requirements.txt", "torch==1.13.1\n");
    let out = migrate_all_at(src, &path);
    assert!(crate::port::parse::is_valid(&out), "{out}");
    assert!(!out.contains("@("), "{out}");
    assert!(out.contains("hasattr(torch, \"accelerator\")"), "{out}");
}

/// Only `hasattr` tests mark an old-torch branch: another operand makes the `else` run on
/// a new torch too, so its code is ported.
#[test]
fn a_test_with_another_operand_is_not_an_old_torch_branch() {
    let src = "import torch\n\nif hasattr(torch, \"accelerator\") and use_acc:\n    n = 0\nelse:\n    n = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    assert!(migrate_all_at(src, &path).contains("n = torch.accelerator.device_count()"));
}

/// Each form runs where it should: the old one on a torch without `torch.accelerator`.
#[test]
fn the_old_branch_is_left_alone() {
    let src = "import torch\n\nif hasattr(torch, \"accelerator\"):\n    n = torch.accelerator.device_count()\nelse:\n    n = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    assert_eq!(migrate_all_at(src, &path), src);
}

/// torch 2.6 has `torch.accelerator`, but its `current_accelerator()` raises without an
/// accelerator (2.7 answers None): a project pinning 2.6 keeps its original beside a form
/// that counts on the None, tested by 2.7's rename; a form asking `is_available()` first
/// is ported as on a newer torch (set P's translation Transformer).
#[test]
fn torch_2_6_keeps_forms_that_count_on_none() {
    let src = "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\nwith torch.cuda.amp.autocast(dtype=torch.bfloat16):\n    n = torch.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    write(dir.path(), "requirements.txt", "torch==2.6.0\n");
    let out = migrate_all_at(src, &path);
    assert!(out.contains("device = torch.device(torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else \"cpu\")\n"), "{out}");
    assert!(out.contains("if hasattr(torch, \"accelerator\") and hasattr(torch.accelerator, \"current_device_index\") else torch.cuda.amp.autocast(dtype=torch.bfloat16)):"), "{out}");
    assert!(
        out.contains("    n = torch.accelerator.device_count()\n"),
        "{out}"
    );
}

/// A module importing torch under another name gets its probes in that name, and a second
/// run finds its old branches.
#[test]
fn an_aliased_torch_is_probed_by_its_name() {
    let src = "import torch as th\n\nn = th.cuda.device_count()\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "train.py", src);
    write(dir.path(), "requirements.txt", "torch==1.13.1\n");
    let out = migrate_all_at(src, &path);
    assert!(
        out.contains("if hasattr(th, \"accelerator\"):\n    n = th.accelerator.device_count()\nelse:\n    n = th.cuda.device_count()\n"),
        "{out}"
    );
    std::fs::write(&path, &out).unwrap();
    assert_eq!(migrate_all_at(&out, &path), out);
}

/// A device chain that also tests another backend, in a project that declares no torch: the
/// CUDA branch keeps both forms, and the branch the chain gains (which runs only where torch
/// has `torch.accelerator`) takes the current accelerator alone. Before, the CUDA branch's two
/// forms hid its device from the library check, which then left the gained branch's `"cuda"`
/// unported: a TPU VM took that branch and asked for CUDA (torchtune's `_device.py`).
#[test]
fn the_branch_a_chain_gains_is_ported_beside_a_two_form_cuda_branch() {
    let src = "import torch\n\n\ndef get_device():\n    if torch.cuda.is_available():\n        device = \"cuda\"\n    elif torch.xpu.is_available():\n        device = \"xpu\"\n    else:\n        device = \"cpu\"\n    return device\n";
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "device.py", src);
    let out = migrate_all_at(src, &path);
    assert!(
        out.contains("    if torch.cuda.is_available():\n        if hasattr(torch, \"accelerator\"):\n            device = torch.accelerator.current_accelerator().type\n        else:\n            device = \"cuda\"\n"),
        "{out}"
    );
    assert!(
        out.contains("    elif hasattr(torch, \"accelerator\") and torch.accelerator.is_available():\n        device = torch.accelerator.current_accelerator().type\n    else:\n        device = \"cpu\"\n"),
        "{out}"
    );
    assert_eq!(out.matches("device = \"cuda\"").count(), 1, "{out}");
    let again = dir.path().join("again.py");
    std::fs::write(&again, &out).unwrap();
    assert_eq!(migrate_all_at(&out, &again), out);
}
