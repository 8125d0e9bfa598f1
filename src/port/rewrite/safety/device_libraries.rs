//! Libraries that take a device from the program and know no TorchTPU device: SpeechBrain's
//! model loader (1.1 knows "cpu" and "cuda": `run_opts={"device": "tpu"}` fails with
//! AttributeError), SAELens (its loader opens the weights with safetensors on that device, and
//! safetensors refuses "tpu": `device tpu is invalid`), Coqui TTS (its models pick their own
//! device for inner encoders) and SGLang (a device sent to its server is the server's). A device
//! this program hands to them is most likely theirs: in a module that imports one (at any
//! indentation: they are often imported lazily), or that imports a module of its project that
//! does, the device fixes become unsafe, with a note naming the library (set H's speech and
//! interpretability scripts, set G's SGLang client).
//!
//! Under the portable port, also: the switch that keeps shared weights tied on a TPU (DEV018,
//! `set_swap_module_params_on_conversion(True)`) applies to every module of the process, and a
//! module built with the old `torch.nn.utils.weight_norm` cannot be moved or loaded under it
//! (`Couldn't swap Conv1d.weight_g`, measured with torch 2.15): where the module or a project
//! module it imports uses the old `weight_norm`, or a library above builds models with it
//! (SpeechBrain's HiFi-GAN), the switch is unsafe.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use crate::port::diagnostic::Diagnostic;
use crate::port::rules::RuleSet;

/// An import of such a library, at any indentation.
static DEVICE_LIBRARY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*(?:from|import)[ \t]+(speechbrain|sae_lens|TTS|sglang)(?-u:\b)")
        .unwrap()
});

/// The old weight normalisation (`torch.nn.utils.weight_norm`, `from torch.nn.utils import
/// weight_norm`), not `torch.nn.utils.parametrizations.weight_norm`.
static OLD_WEIGHT_NORM: LazyLock<Regex> = LazyLock::new(|| {
    // ASCII word boundaries: a Unicode `\b` keeps the regex off its fast engine.
    Regex::new(
        r"(?m)(?-u:\b)nn\.utils\.weight_norm(?-u:\b)|^[ \t]*from torch\.nn\.utils import [^\n]*(?-u:\b)weight_norm(?-u:\b)",
    )
    .unwrap()
});

/// How many project modules away the library (or old weight_norm) may be.
const HOPS: usize = 2;

/// What in `text` (a module's source) makes its devices another library's, or its swap
/// switch unsafe: (library, old weight_norm).
fn facts_of(text: &str) -> (Option<String>, bool) {
    let library = DEVICE_LIBRARY.captures(text).map(|c| c[1].to_string());
    (library, OLD_WEIGHT_NORM.is_match(text))
}

type Facts = (Option<String>, bool);

/// (File, hops) → its facts, for the files already read.
static SEEN: LazyLock<Mutex<HashMap<(PathBuf, usize), Facts>>> = LazyLock::new(Default::default);

/// The project files the module at `path` imports (at any indentation), packages' `__init__.py`
/// left out (they often import everything).
fn imported_files(path: &Path, src: &str) -> Vec<(String, PathBuf)> {
    crate::port::ignored::imports_of(path, src)
        .into_iter()
        .filter(|(_, file)| file != path && file.file_name().is_none_or(|n| n != "__init__.py"))
        .collect()
}

/// The same for the module and the project modules it imports, within `hops`.
fn facts_around(path: Option<&Path>, src: &str, hops: usize) -> Facts {
    let (mut library, mut norm) = facts_of(src);
    let Some(path) = path else {
        return (library, norm);
    };
    if hops == 0 {
        return (library, norm);
    }
    for (module, file) in imported_files(path, src) {
        if library.is_some() && norm {
            break;
        }
        let key = (file.clone(), hops - 1);
        let known = SEEN.lock().ok().and_then(|s| s.get(&key).cloned());
        let (l, n) = match known {
            Some(f) => f,
            None => {
                let f = std::fs::read_to_string(&file)
                    .map(|t| facts_around(Some(&file), &t, hops - 1))
                    .unwrap_or((None, false));
                if let Ok(mut s) = SEEN.lock() {
                    s.insert(key, f.clone());
                }
                f
            }
        };
        if library.is_none() {
            library = l.map(|l| match l.split_once(" (through") {
                Some((lib, _)) => format!("{lib} (through `{module}`)"),
                None => format!("{l} (through `{module}`)"),
            });
        }
        norm |= n;
    }
    (library, norm)
}

/// Make the device fixes unsafe where the devices most likely go to a library that knows no
/// TorchTPU device, and the weight-tie switch where old weight_norm modules would not move.
pub(in crate::port::rewrite) fn keep_library_devices(
    path: Option<&Path>,
    src: &str,
    rules: &RuleSet,
    diags: &mut [Diagnostic],
) {
    let devices = |d: &Diagnostic| matches!(rules.rules[d.rule].family.as_str(), "DEV" | "STM");
    if !diags.iter().any(|d| d.fix.is_some() && devices(d)) {
        return;
    }
    // Library modules' imports are followed too: a library module often holds the device
    // default a program hands on (set G's SGLang arguments, set H's speaker encoder batcher).
    let (library, norm) = facts_around(path, src, HOPS);
    if let Some(library) = &library {
        let note = format!(
            "unsafe: this module hands devices to {library}, which knows no TorchTPU device \
             (\"tpu\" fails there): load that library's models on the CPU, or check that this \
             device is not the one it receives"
        );
        super::scope::keep_module_devices(rules, &note, diags);
    }
    if norm
        || library
            .as_deref()
            .is_some_and(|l| l.starts_with("speechbrain"))
    {
        for d in diags
            .iter_mut()
            .filter(|d| rules.rules[d.rule].id == "DEV018")
        {
            d.make_unsafe(
                "unsafe: parameter swapping, which this fix turns on for the whole process, \
                 cannot move a module built with the old torch.nn.utils.weight_norm (\"Couldn't \
                 swap ... weight_g\"), which this program (or a library it loads) uses: switch \
                 those to torch.nn.utils.parametrizations.weight_norm, or re-tie the weights after \
                 the move instead",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::ported;

    #[test]
    fn devices_handed_to_libraries_without_a_tpu_device_are_unsafe() {
        for lib in [
            "    from speechbrain.inference.speaker import EncoderClassifier\n",
            "from sae_lens import SAE\n",
        ] {
            let src = format!(
                "import torch\n\nDEV = \"cuda\"\n\n\ndef load():\n{}    return DEV\n",
                if lib.starts_with(' ') {
                    lib.to_string()
                } else {
                    format!("    {lib}")
                }
            );
            assert_eq!(ported(&src), src, "{lib}");
        }
        let plain = "import torch\n\nDEV = \"cuda\"\nx = torch.zeros(2, device=DEV)\n";
        assert_ne!(ported(plain), plain);
    }

    #[test]
    fn the_weight_tie_switch_is_unsafe_beside_old_weight_norm() {
        let src = "import torch\nfrom transformers import AutoModelForCausalLM\nfrom torch.nn.utils import weight_norm\n\n\ndef main():\n    device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n    conv = weight_norm(torch.nn.Conv1d(2, 2, 3))\n    model = AutoModelForCausalLM.from_pretrained(\"gpt2\").to(device)\n\n\nif __name__ == \"__main__\":\n    main()\n";
        let out = ported(src);
        assert!(
            !out.contains("set_swap_module_params_on_conversion"),
            "{out}"
        );
        let new = src.replace(
            "from torch.nn.utils import weight_norm",
            "from torch.nn.utils.parametrizations import weight_norm",
        );
        assert!(ported(&new).contains("set_swap_module_params_on_conversion"));
    }
}
