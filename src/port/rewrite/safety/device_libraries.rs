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
//! (SpeechBrain's HiFi-GAN), the switch is unsafe. So it is where the program wraps a model in
//! DDP or FSDP and loads a state dict: under the switch `load_state_dict` swaps the parameters
//! it loads, and one that DDP's reducer already holds cannot be swapped ("Expected use_count of
//! t1 to be 1 or 2 ... got 4", set J's resumed DDP training).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use crate::port::diagnostic::Diagnostic;
use crate::port::program::imports::{Depth, imports_at};
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

/// A wrapper that holds its own references to the parameters (DDP's reducer, FSDP): a
/// parameter swap, as `load_state_dict` does under the switch, refuses a tensor held there.
static PARAMETER_HOLDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)(?:DistributedDataParallel|DDP|FullyShardedDataParallel|FSDP|fully_shard)[ \t]*\(")
        .unwrap()
});

/// A state restore: under the switch `load_state_dict` swaps every parameter it loads.
static STATE_LOAD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\.load_state_dict[ \t]*\(").unwrap());

/// How many project modules away the library (or old weight_norm) may be.
const HOPS: usize = 2;

/// What a module, with the project modules it imports, does that makes its devices another
/// library's or its weight-tie switch unsafe.
#[derive(Debug, Clone, Default)]
struct Facts {
    /// A library that knows no TorchTPU device, and the project module it was imported in
    /// (None: this module itself).
    library: Option<(String, Option<String>)>,
    /// The old `torch.nn.utils.weight_norm`.
    old_weight_norm: bool,
    /// DDP or FSDP wraps a model.
    holds_parameters: bool,
    /// A state dict is loaded after such a wrap in the same module, or in a module that wraps
    /// nothing (where the order cannot be read); a load written before the wrap (nanoGPT's
    /// resume, then `DDP(model)`) is fine.
    loads_state: bool,
}

impl Facts {
    /// The facts of one module's source, alone.
    fn of(text: &str) -> Facts {
        // The substring tests first: the anchored patterns have no literal for the regex
        // engine to skip ahead with, and most modules name none of these.
        let named = ["speechbrain", "sae_lens", "TTS", "sglang"]
            .iter()
            .any(|l| text.contains(l));
        let wrap = PARAMETER_HOLDER.find(text);
        Facts {
            library: named
                .then(|| DEVICE_LIBRARY.captures(text))
                .flatten()
                .map(|c| (c[1].to_string(), None)),
            old_weight_norm: text.contains("weight_norm") && OLD_WEIGHT_NORM.is_match(text),
            holds_parameters: wrap.is_some(),
            loads_state: match wrap {
                Some(wrap) => STATE_LOAD.is_match(&text[wrap.end()..]),
                None => STATE_LOAD.is_match(text),
            },
        }
    }

    fn complete(&self) -> bool {
        self.library.is_some() && self.old_weight_norm && self.holds_parameters && self.loads_state
    }

    /// Add what an imported project module (`module`, as imported) brings.
    fn absorb(&mut self, other: Facts, module: &str) {
        if self.library.is_none() {
            self.library = other
                .library
                .map(|(lib, via)| (lib, Some(via.unwrap_or_else(|| module.to_string()))));
        }
        self.old_weight_norm |= other.old_weight_norm;
        self.holds_parameters |= other.holds_parameters;
        self.loads_state |= other.loads_state;
    }

    /// The library, in words: `speechbrain` or `speechbrain (through `pkg.voice`)`.
    fn library_named(&self) -> Option<String> {
        self.library.as_ref().map(|(lib, via)| match via {
            Some(via) => format!("{lib} (through `{via}`)"),
            None => lib.clone(),
        })
    }
}

/// (File, hops) → its facts, for the files already read.
static SEEN: LazyLock<Mutex<HashMap<(PathBuf, usize), Facts>>> = LazyLock::new(Default::default);

/// Forget the files read (the start of a run: [`super::forget`]).
pub(super) fn forget() {
    if let Ok(mut s) = SEEN.lock() {
        s.clear();
    }
}

/// The project files the module at `path` imports (at any indentation), packages' `__init__.py`
/// left out (they often import everything).
fn imported_files(path: &Path, src: &str) -> Vec<(String, PathBuf)> {
    imports_at(path, src, Depth::Anywhere)
        .into_iter()
        .filter(|i| i.file.file_name().is_none_or(|n| n != "__init__.py"))
        .map(|i| (i.name, i.file))
        .collect()
}

/// The same for the module and the project modules it imports, within `hops`.
fn facts_around(path: Option<&Path>, src: &str, hops: usize) -> Facts {
    let mut facts = Facts::of(src);
    let Some(path) = path else {
        return facts;
    };
    if hops == 0 {
        return facts;
    }
    for (module, file) in imported_files(path, src) {
        if facts.complete() {
            break;
        }
        let key = (file.clone(), hops - 1);
        let known = SEEN.lock().ok().and_then(|s| s.get(&key).cloned());
        let found = match known {
            Some(f) => f,
            None => {
                let f = crate::port::texts::text(&file)
                    .map(|t| facts_around(Some(&file), &t, hops - 1))
                    .unwrap_or_default();
                if let Ok(mut s) = SEEN.lock() {
                    s.insert(key, f.clone());
                }
                f
            }
        };
        facts.absorb(found, &module);
    }
    facts
}

/// Make the device fixes unsafe where the devices most likely go to a library that knows no
/// TorchTPU device, and the weight-tie switch where old weight_norm modules would not move or a
/// DDP/FSDP-wrapped model loads a state dict.
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
    let facts = facts_around(path, src, HOPS);
    let library = facts.library_named();
    if let Some(library) = &library {
        let note = format!(
            "unsafe: this module hands devices to {library}, which knows no TorchTPU device \
             (\"tpu\" fails there): load that library's models on the CPU, or check that this \
             device is not the one it receives"
        );
        super::scope::keep_module_devices(rules, &note, diags);
    }
    // The switch runs when this module is imported too: an entry script of the tree that
    // imports it (a trainer importing a model file that has its own `__main__`) counts.
    let mut facts = facts;
    let switch = |id: &str| matches!(id, "DEV018" | "DEV020");
    if diags.iter().any(|d| switch(&rules.rules[d.rule].id))
        && let Some(entry) = path.and_then(crate::port::program::imports::entry_importing)
        && let Some(text) = crate::port::texts::text(&entry)
    {
        let importer = facts_around(Some(&entry), &text, HOPS);
        facts.old_weight_norm |= importer.old_weight_norm;
        facts.holds_parameters |= importer.holds_parameters;
        facts.loads_state |= importer.loads_state;
    }
    let switch_note = if facts.old_weight_norm
        || library
            .as_deref()
            .is_some_and(|l| l.starts_with("speechbrain"))
    {
        Some(
            "unsafe: parameter swapping, which this fix turns on for the whole process, \
             cannot move a module built with the old torch.nn.utils.weight_norm (\"Couldn't \
             swap ... weight_g\"), which this program (or a library it loads) uses: switch \
             those to torch.nn.utils.parametrizations.weight_norm, or re-tie the weights after \
             the move instead",
        )
    } else if facts.holds_parameters && facts.loads_state {
        Some(
            "unsafe: under parameter swapping, which this fix turns on for the whole process, \
             load_state_dict swaps the parameters it loads, and a parameter that DDP or FSDP \
             already holds cannot be swapped (\"Expected use_count of t1 to be 1 or 2\"); this \
             program wraps a model in one and loads a state dict: load the state before the \
             wrap, or re-tie the weights after the move instead",
        )
    } else {
        None
    };
    if let Some(note) = switch_note {
        for d in diags.iter_mut().filter(|d| switch(&rules.rules[d.rule].id)) {
            d.make_unsafe(note);
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
    fn the_weight_tie_switch_is_unsafe_where_ddp_holds_parameters_and_a_state_is_loaded() {
        let src = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nfrom transformers import AutoModelForCausalLM\n\n\ndef main():\n    device = \"cuda\" if torch.cuda.is_available() else \"cpu\"\n    model = AutoModelForCausalLM.from_pretrained(\"gpt2\").to(device)\n    model = DDP(model)\n    model.module.load_state_dict(torch.load(\"ckpt.pt\"))\n\n\nif __name__ == \"__main__\":\n    main()\n";
        assert!(!ported(src).contains("set_swap_module_params_on_conversion"));
        // A load before the wrap (nanoGPT's resume) swaps parameters nothing holds yet.
        let early = src
            .replace(
                "    model.module.load_state_dict(torch.load(\"ckpt.pt\"))\n",
                "",
            )
            .replace(
                "    model = DDP(model)\n",
                "    model.load_state_dict(torch.load(\"ckpt.pt\"))\n    model = DDP(model)\n",
            );
        assert!(
            ported(&early).contains("set_swap_module_params_on_conversion"),
            "{early}"
        );
        // Either alone leaves it safe.
        for (from, to) in [
            ("model = DDP(model)", "pass"),
            (
                "model.module.load_state_dict(torch.load(\"ckpt.pt\"))",
                "pass",
            ),
        ] {
            let one = src.replace(from, to);
            assert!(
                ported(&one).contains("set_swap_module_params_on_conversion"),
                "{one}"
            );
        }
    }

    #[test]
    fn the_switch_in_a_model_file_counts_the_trainer_that_imports_it() {
        let model = "import torch\nfrom torch import nn\n\n\nclass GPT(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a = nn.Linear(2, 2)\n        self.b = nn.Linear(2, 2)\n        self.a.weight = self.b.weight\n\n\nif __name__ == \"__main__\":\n    GPT().to(\"cuda\")\n";
        let train = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nfrom model import GPT\n\nif __name__ == \"__main__\":\n    m = DDP(GPT().to(\"cuda\"))\n    m.module.load_state_dict(torch.load(\"c.pt\"))\n";
        let switch = |train: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = crate::port::test_support::write(dir.path(), "model.py", model);
            crate::port::test_support::write(dir.path(), "train.py", train);
            crate::port::test_support::migrate("DEV018", model, Some(&path))
                .output
                .is_some_and(|o| o.contains("set_swap_module_params_on_conversion"))
        };
        assert!(!switch(train));
        assert!(switch(&train.replace(
            "m.module.load_state_dict(torch.load(\"c.pt\"))",
            "pass"
        )));
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
