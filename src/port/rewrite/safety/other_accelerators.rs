//! A project that runs on Apple silicon or Intel GPUs too. `torch.accelerator.is_available()`
//! is true on MPS and XPU, and `device_count()` counts them, so a CUDA test ported to those
//! sends a CPU path of such a machine to MPS/XPU (set L: PyG's feature extractors and LLM
//! wrapper moved from the CPU to MPS on a Mac). Where the project selects "mps" or "xpu"
//! somewhere else (its own device helper, anywhere in the project: set S's root scripts beside
//! a `src/` whose helper picks "mps"), that machine is one it was written for, and such fixes
//! become unsafe. A module that names MPS/XPU itself is left to the chain rules, which
//! keep its MPS branch ahead of the accelerator's.

use std::path::Path;

use crate::port::diagnostic::Diagnostic;

/// What a fix writes that is true (or counts one) on MPS and XPU too.
const ASKS_ANY_ACCELERATOR: &[&str] = &[
    "torch.accelerator.is_available",
    "torch.accelerator.device_count",
];

/// What such a test may guard and stay safe: freeing the accelerator's cache moves no work (on
/// a Mac the original's `torch.cuda.empty_cache()` did nothing; the port frees MPS's cache).
const MOVES_NO_WORK: &str = "torch.accelerator.empty_cache()";

/// Whether a fix's text asks `torch.accelerator` whether there is one, for more than freeing
/// its cache.
fn asks_any_accelerator(content: &str) -> bool {
    let asks = ASKS_ANY_ACCELERATOR
        .iter()
        .map(|a| content.matches(a).count())
        .sum::<usize>();
    (asks > 0 && !(asks == 1 && content.contains(MOVES_NO_WORK))) || switches_on_precision(content)
}

/// An autocast or a scaler on the current accelerator: CUDA's switched itself off on a Mac (a
/// warning, then float32), the accelerator's runs on MPS (set W: a speech server's codec on
/// MPS, its autocast excluded from MPS on purpose).
fn switches_on_precision(content: &str) -> bool {
    content.contains("current_accelerator")
        && (content.contains("torch.autocast") || content.contains("GradScaler"))
}

/// Make unsafe the fixes that ask `torch.accelerator` whether there is one, in a project that
/// selects MPS or XPU elsewhere.
pub(in crate::port::rewrite) fn keep_other_accelerators(
    path: Option<&Path>,
    src: &str,
    diags: &mut [Diagnostic],
) {
    // A fix's edits together (an autocast's callee and its arguments are two edits).
    let written = |d: &Diagnostic| -> Option<String> {
        Some(
            d.fix
                .as_ref()?
                .edits
                .iter()
                .map(|e| e.content.as_str())
                .collect(),
        )
    };
    let asks = |d: &Diagnostic| written(d).is_some_and(|w| asks_any_accelerator(&w));
    if !diags.iter().any(asks) {
        return;
    }
    // The module selects MPS/XPU itself: its chains keep their MPS branch ahead of the
    // accelerator's (the chain rules), and a test elsewhere that selects NVML's GPU picker keeps
    // CUDA's (set V; `together`). What they do not see: an autocast or scaler on the current
    // accelerator, which switches float16 on for MPS (set W).
    let own = super::torch_pin::code::selects_other(src);
    let shown = if own {
        "this module".to_string()
    } else {
        let Some(path) = path else { return };
        let Some(file) = super::torch_pin::code::selecting_other(path) else {
            return;
        };
        let project = crate::port::program::tree::project_of(path);
        crate::port::program::tree::shown(&file, &project)
    };
    let asks = |d: &Diagnostic| match own {
        true => written(d).is_some_and(|w| switches_on_precision(&w)),
        false => asks(d),
    };
    let note = format!(
        "unsafe: this project also runs on Apple silicon or Intel GPUs ({shown} selects \"mps\" \
         or \"xpu\"), where torch.accelerator is available too: the ported test would move this \
         CPU path there; extend the test to the TPU by hand (`torch.cuda.is_available() or \
         <the TPU's test>`)"
    );
    for d in diags.iter_mut().filter(|d| asks(d)) {
        d.make_unsafe(&note);
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::{migrate_all_at, write};

    #[test]
    fn a_cpu_path_stays_where_the_project_selects_mps_elsewhere() {
        let src = "import torch\n\n\ndef pick():\n    return torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n";
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "pkg/features.py", src);
        write(dir.path(), "pkg/__init__.py", "");
        write(
            dir.path(),
            "pkg/device.py",
            "import torch\n\n\ndef best():\n    if torch.backends.mps.is_available():\n        return \"mps\"\n    return \"cpu\"\n",
        );
        assert!(migrate_all_at(src, &path).contains("torch.cuda.is_available()"));
        let other = tempfile::tempdir().unwrap();
        let path = write(other.path(), "pkg/features.py", src);
        write(other.path(), "pkg/__init__.py", "");
        assert!(migrate_all_at(src, &path).contains("torch.accelerator.is_available()"));
    }

    /// A module that picks "mps" in `main` keeps the CUDA test of its NVML GPU picker (set V),
    /// and its CUDA autocast (set W).
    #[test]
    fn a_test_stays_where_the_module_selects_mps_in_another_chain() {
        let src = "import pynvml\nimport torch\n\n\ndef pick_gpu():\n    if not torch.cuda.is_available():\n        return None\n    pynvml.nvmlInit()\n    return 0\n\n\ndef main():\n    gpu = pick_gpu()\n    if gpu is not None:\n        device = f\"cuda:{gpu}\"\n    elif torch.backends.mps.is_available():\n        device = \"mps\"\n    else:\n        device = \"cpu\"\n    return device\n";
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "main.py", src);
        write(dir.path(), "requirements.txt", "torch>=2.11\n");
        let out = migrate_all_at(src, &path);
        assert!(out.contains("if not torch.cuda.is_available():"), "{out}");
        // An autocast on the accelerator there switches float16 on for MPS: unsafe.
        let amp = "import torch\n\n\ndef infer(m, x):\n    with torch.cuda.amp.autocast():\n        return m(x)\n\n\nDEVICE = \"mps\" if torch.backends.mps.is_available() else \"cpu\"\n";
        let path = write(dir.path(), "serve.py", amp);
        let out = migrate_all_at(amp, &path);
        assert!(out.contains("torch.cuda.amp.autocast()"), "{out}");
    }

    #[test]
    fn a_root_script_stays_where_a_module_below_it_selects_mps() {
        let src = "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n";
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "train.py", src);
        write(
            dir.path(),
            "src/utils/device.py",
            "import torch\n\n\ndef best():\n    return \"mps\" if torch.backends.mps.is_available() else \"cpu\"\n",
        );
        let out = migrate_all_at(src, &path);
        assert!(out.contains("torch.cuda.is_available()"), "{out}");
    }

    #[test]
    fn freeing_the_cache_is_ported_where_the_project_selects_mps_elsewhere() {
        let src = "import torch\n\n\ndef free():\n    torch.cuda.empty_cache()\n";
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "pkg/memory.py", src);
        write(dir.path(), "pkg/__init__.py", "");
        write(
            dir.path(),
            "pkg/device.py",
            "DEVICES = [\"mps\", \"cpu\"]\n",
        );
        write(dir.path(), "requirements.txt", "torch>=2.11\n");
        let out = migrate_all_at(src, &path);
        assert!(out.contains("torch.accelerator.empty_cache()"), "{out}");
        assert!(!out.contains("torch.cuda.empty_cache()"), "{out}");
    }
}
