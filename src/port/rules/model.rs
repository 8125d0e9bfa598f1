//! The compiled rule model: what a loaded rule matches ([`Matcher`]), what its fix does
//! ([`Action`]), the [`Rule`] itself, and the [`RuleSet`] with its position classes and helpers.

use std::collections::{BTreeMap, HashMap, HashSet};

use anyhow::{Result, bail};
use regex::Regex;

use super::schema::{ConvertDef, Example, FixClass, RemoveKind, StringForm, Target};

/// A helper function that fixes may call (inserted and removed by `port::helpers`).
#[derive(Debug, Clone)]
pub struct Helper {
    pub name: String,
    pub code: String,
    pub imports: Vec<String>,
}

/// A comment that a fix leaves in the code.
#[derive(Debug, Clone)]
pub struct Note {
    pub text: String,
    pub only_in_loop: bool,
}

/// A syntax-tree analysis built into tpuport, named by a rule file (`match.lint = "NAME"`): the
/// file gives the id, message and advice, `port::rewrite::lints` finds the places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lint {
    /// Device-to-host copies (`.item()`, `.cpu()`, `print(loss)`) in a training loop.
    HostSyncInLoop,
    /// A program building 2-D/3-D convolutions with no `channels_last` anywhere (once per
    /// program, or per package for library modules no entry script imports).
    ConvWithoutChannelsLast,
    /// A program that trains in float32 and sets no matmul precision (once per program).
    Fp32Training,
    /// `nonzero`, `argwhere`, one-argument `where` in compiled code.
    NonzeroInCompiled,
    /// Boolean-mask reads and `masked_select` in compiled code.
    MaskReadInCompiled,
    /// `unique`, `bincount` without `minlength`, `repeat_interleave` by a tensor, in compiled code.
    UniqueInCompiled,
    /// `.item()`, `.tolist()` and tensor truth tests in compiled code.
    HostValueInCompiled,
    /// Rank-dependent branches in compiled or `spmd_safe` code.
    RankBranchInCompiled,
    /// Padding to the longest sequence of each batch.
    VariablePadding,
    /// A shuffled training loader that keeps its last, smaller batch.
    PartialLastBatch,
    /// float16 casts: `.half()`, `dtype=torch.float16`.
    HalfPrecision,
    /// A program that moves modules and shares weights between them (TorchTPU unties them).
    SharedWeightsMove,
    /// A program that builds its optimizer before its model moves to the device.
    OptimizerBeforeMove,
    /// `DistributedDataParallel(m, device_ids=[i])` with an index a TPU process does not have.
    DdpDeviceIndex,
    /// A program (entry script and its project modules) that the migration left blocked on a
    /// TPU: judged over the whole run by `port::program`, not per file.
    ProgramBlocked,
    /// An import of a CUDA extension the project's own `setup.py` compiles.
    CudaExtensionImport,
    /// `m.load_state_dict(torch.load(path))` with no `map_location`.
    StateLoadWithoutMapLocation,
    /// safetensors' `load_file`/`safe_open` onto a device other than the literal "cpu".
    SafetensorsDevice,
    /// `hydra.utils.instantiate(cfg.trainer)` where a project config builds a Lightning Trainer.
    TrainerFromConfig,
    /// A model an entry script builds, calls and never moves, in a program that uses CUDA.
    ModelNeverMoved,
    /// A config file of the project sets a CUDA device, and this module loads a config.
    DeviceFromConfig,
    /// A notebook installs the project's own package from PyPI and imports it.
    InstalledProjectPackage,
}

/// Words a module that builds a convolutional network spells (`nn.Conv2d`, `torchvision`'s or
/// `timm`'s models): PERF001's text scan of a module (`lints::conv_text`) looks no further in
/// a file without one, and the prefilter turns PERF001 off there outside programs.
pub const NETWORK_WORDS: &[&str] = &["Conv", "torchvision", "timm"];

impl Lint {
    /// Whether the lint brings its own fix (the rest report only: their rules are manual).
    pub fn fixes(self) -> bool {
        matches!(
            self,
            Lint::SharedWeightsMove
                | Lint::OptimizerBeforeMove
                | Lint::DdpDeviceIndex
                | Lint::StateLoadWithoutMapLocation
                | Lint::SafetensorsDevice
        )
    }

    /// Where the lint can report: only in a file that runs as a program
    /// ([`crate::port::facts::runs_as_program`], an entry script), or also in one whose text
    /// spells one of these words; None where anywhere. The prefilter turns it off elsewhere.
    pub fn program_gate(self) -> Option<&'static [&'static str]> {
        match self {
            // The tie fix goes into programs only; PRC008 is said on entry scripts.
            Lint::SharedWeightsMove
            | Lint::OptimizerBeforeMove
            | Lint::Fp32Training
            | Lint::ModelNeverMoved => Some(&[]),
            // On entry scripts, and on library modules that build a network.
            Lint::ConvWithoutChannelsLast => Some(NETWORK_WORDS),
            _ => None,
        }
    }

    /// Whether the lint reads notebooks only: the prefilter turns it off in any other file.
    pub fn notebooks_only(self) -> bool {
        matches!(self, Lint::InstalledProjectPackage)
    }

    /// Whether, off programs, the lint reports once per package, on its first module that builds
    /// a network ([`crate::port::program::networks::reports_for_package`]): the prefilter turns
    /// it off in the package's other modules.
    pub fn once_per_package(self) -> bool {
        matches!(self, Lint::ConvWithoutChannelsLast)
    }

    /// Every lint: its name in rule files and what it finds.
    pub const ALL: [(&'static str, Lint, &'static str); 22] = [
        (
            "host-sync-in-loop",
            Lint::HostSyncInLoop,
            "device-to-host copies in a loop that calls .backward() (not under a periodic `if step % N` test)",
        ),
        (
            "conv-without-channels-last",
            Lint::ConvWithoutChannelsLast,
            "classes building 2-D/3-D convolutions, and torchvision/timm models, in a program that never uses channels_last: once per program, on its entry script (for the project modules it imports too), or once per package for library modules no entry script imports",
        ),
        (
            "fp32-training",
            Lint::Fp32Training,
            "a program (entry script and the project modules it imports) that steps an optimizer after .backward(), uses CUDA or the TPU, and neither sets a float32 matmul precision nor computes in a lower one (autocast, half or bfloat16 models): once, on its entry script",
        ),
        (
            "nonzero-in-compiled",
            Lint::NonzeroInCompiled,
            "nonzero/argwhere/one-argument where in functions compiled with torch.compile",
        ),
        (
            "mask-read-in-compiled",
            Lint::MaskReadInCompiled,
            "boolean-mask reads and masked_select in compiled functions",
        ),
        (
            "unique-in-compiled",
            Lint::UniqueInCompiled,
            "unique, bincount without minlength, repeat_interleave by a tensor, in compiled functions",
        ),
        (
            "host-value-in-compiled",
            Lint::HostValueInCompiled,
            ".item()/.tolist() and tensor truth tests in compiled functions",
        ),
        (
            "rank-branch-in-compiled",
            Lint::RankBranchInCompiled,
            "branches on the process rank in compiled or spmd_safe functions",
        ),
        (
            "variable-padding",
            Lint::VariablePadding,
            "tokenizer calls padding to the longest sequence, and pad_sequence",
        ),
        (
            "partial-last-batch",
            Lint::PartialLastBatch,
            "shuffled DataLoaders without drop_last=True in files with a training loop",
        ),
        (
            "half-precision",
            Lint::HalfPrecision,
            ".half() and float16 dtypes given to .to(), dtype= or torch_dtype=",
        ),
        (
            "shared-weights-move",
            Lint::SharedWeightsMove,
            "a program that moves modules with .to()/.cuda() and shares a weight between modules (a tie in its own code, tie_weights, opacus's DP RNNs)",
        ),
        (
            "optimizer-before-move",
            Lint::OptimizerBeforeMove,
            "a program whose entry script builds a torch.optim optimizer before it moves a module with .to()/.cuda(), or before it moves the very module whose parameters the optimizer takes (`decoder.parameters()` … `decoder.to(device)`), or moves none itself while a project module it imports does",
        ),
        (
            "ddp-device-index",
            Lint::DdpDeviceIndex,
            "the device index given to DistributedDataParallel's device_ids (not 0, None, or already taken modulo the device count): ints get `% torch.accelerator.device_count()`, torch.device values are reported",
        ),
        (
            "program-blocked",
            Lint::ProgramBlocked,
            "a program (an entry script and the project modules it imports) that still meets CUDA references left for manual work (judged over the whole run)",
        ),
        (
            "cuda-extension-import",
            Lint::CudaExtensionImport,
            "imports (anywhere in a module) of an extension module that a setup.py of the project builds with CUDAExtension",
        ),
        (
            "state-load-without-map-location",
            Lint::StateLoadWithoutMapLocation,
            "`m.load_state_dict(torch.load(path))` with no map_location (and no `assign=`): the fix loads onto the CPU, which load_state_dict copies onto the module's own devices; `x = torch.load(path)` moved by `x.to(device)` soon after (a device name bound before to torch.device(...), a string or the accelerator): the fix loads onto that device",
        ),
        (
            "safetensors-device",
            Lint::SafetensorsDevice,
            "safetensors' load_file/safe_open given a device that is not the literal \"cpu\" (safetensors knows no \"tpu\")",
        ),
        (
            "trainer-from-config",
            Lint::TrainerFromConfig,
            "a Hydra `instantiate` that builds a trainer where a YAML config under the script's folder names a Lightning Trainer as its `_target_`",
        ),
        (
            "model-never-moved",
            Lint::ModelNeverMoved,
            "a model an entry script builds (`m = Class(...)`), calls and never moves (every use known: its forward and module methods such as eval/load_state_dict/parameters), in a program whose own code or project modules use CUDA",
        ),
        (
            "device-from-config",
            Lint::DeviceFromConfig,
            "a config load (`yaml.safe_load`, `OmegaConf.load`, `json.load`) in a project whose YAML/JSON configs set a device to CUDA (`device: cuda`)",
        ),
        (
            "installed-project-package",
            Lint::InstalledProjectPackage,
            "a notebook that installs the project's own package from PyPI (`!pip install <its name>`) and imports it: it runs the published release, not the ported tree",
        ),
    ];

    pub fn from_name(name: &str) -> Option<Lint> {
        Lint::ALL
            .iter()
            .find(|(n, ..)| *n == name)
            .map(|(_, l, _)| *l)
    }

    pub fn name(self) -> &'static str {
        Lint::ALL
            .iter()
            .find(|(_, l, _)| *l == self)
            .map(|(n, ..)| *n)
            .unwrap_or("")
    }

    pub fn describe(self) -> &'static str {
        Lint::ALL
            .iter()
            .find(|(_, l, _)| *l == self)
            .map(|(.., d)| *d)
            .unwrap_or("")
    }
}

#[derive(Debug)]
pub enum Matcher {
    /// A built-in syntax-tree analysis ([`Lint`]).
    Lint(Lint),
    /// A call whose callee resolves to one of these qualified names.
    Call(Vec<String>),
    /// A reference (name or attribute chain) resolving to one of these; `prefix.*` matches any
    /// chain under the prefix (and the prefix itself) and is a fallback.
    Reference {
        exact: Vec<String>,
        prefixes: Vec<String>,
    },
    /// `<value>.name(...)` where the receiver is not an imported module.
    Method(Vec<String>),
    /// `<value>.name` (not called) where the receiver is not an imported module.
    Attribute(Vec<String>),
    /// A keyword argument, optionally only in calls to these qualified names.
    Keyword {
        names: Vec<String>,
        calls: Vec<String>,
    },
    /// A string literal whose static text matches, in one of these position classes.
    String {
        regex: Regex,
        /// None = any position (a fallback rule).
        positions: Option<Vec<String>>,
        forms: Vec<StringForm>,
    },
}

#[derive(Debug)]
pub enum Action {
    /// Replace the matched expression (for calls: the callee) with a qualified name; a map
    /// chooses by the matched qualified name.
    Rename(BTreeMap<String, String>),
    /// Replace the `with` statement opened by the matched call with its body, dedented.
    Unwrap,
    /// Replace the whole matched expression with a template.
    Replace(String),
    /// Rewrite a call: new callee (qualified name, or `.method` on the same receiver) and
    /// argument list built from the source parameters.
    Call {
        to: Option<String>,
        args: Vec<String>,
    },
    /// Rewrite the static text of a string with a regex replacement.
    String(String),
    Remove(RemoveKind),
    /// Replace the assignment `match = value` by a template (`{param}` = the value).
    Assign(String),
}

/// What a rule's fix does in one mode: its class, its action and what the action binds.
#[derive(Debug)]
pub struct Variant {
    pub fix: FixClass,
    pub action: Option<Action>,
    pub params: Vec<String>,
    pub pass_rest: bool,
    pub convert: BTreeMap<String, ConvertDef>,
    /// A comment the fix leaves at the statement.
    pub note: Option<Note>,
    /// Why the fix is unsafe: the note of every finding whose fix is unsafe by the rule.
    pub fix_safety: Option<String>,
    /// The fix extends a CUDA test to the TPU; kept off where the code the test selects is not
    /// right on a TPU (`rewrite/portable.rs`).
    pub extends: bool,
}

/// What a rule does under `--to portable` (the default).
#[derive(Debug)]
pub enum Portable {
    /// The literal fix keeps CUDA as it was (`torch.cuda.synchronize` →
    /// `torch.accelerator.synchronize`): the same in both modes.
    Same,
    /// No portable form: the literal fix replaces CUDA, so it is unsafe under `--to portable`.
    Replaces,
    /// A CUDA device string becomes the current accelerator's, by where it sits
    /// (`rewrite/portable.rs`).
    Device,
    /// An NCCL backend name becomes the current accelerator's default backend.
    Backend,
    /// Another fix.
    Own(Box<Variant>),
}

/// The note of a fix that only `--to tpu` makes safe.
pub const REPLACES_CUDA: &str = "replaces CUDA: the program would no longer run on the machine it was written for; --to tpu ports literally";

#[derive(Debug)]
pub struct Rule {
    pub id: String,
    pub family: String,
    pub name: String,
    pub message: String,
    pub advice: Option<String>,
    pub matcher: Matcher,
    /// The fix under `--to tpu` (and under `--to portable` where [`Portable::Same`] or
    /// [`Portable::Replaces`]).
    pub literal: Variant,
    pub portable: Portable,
    pub receiver: Option<Regex>,
    pub min_args: Option<usize>,
    /// Calls match only where each of these parameters is one of the listed string literals.
    pub when: BTreeMap<String, Vec<String>>,
    pub example: Option<Example>,
    /// The fix is unsafe in files that use one of these names and none of `unless_uses`.
    pub unsafe_if_uses: Vec<String>,
    pub unless_uses: Vec<String>,
    /// The rule applies only in files that use one of these (empty: any file)...
    pub only_if_uses: Vec<String>,
    /// ...and none of these.
    pub not_if_uses: Vec<String>,
    /// Where the statement next to it calls one of these with the same arguments, the fix
    /// removes the statement (safe): the call is a duplicate.
    pub remove_after: Vec<String>,
    /// The fix is safe only where every path of the program to the finding first calls one of
    /// these (same function, module level, or each caller in the file: `rewrite/safety/group.rs`).
    pub safe_after: Vec<String>,
    /// The fix is safe only where every call of these in the file is ported by a safe fix too:
    /// the PyTorch/XLA device that a step or sync rewrite assumes is TorchTPU's (`check/group.rs`).
    pub safe_if_ported: Vec<String>,
    /// Substrings that must all occur in a file for this rule to possibly fire (ASCII
    /// case-insensitive; `a|b` = either); empty = always check.
    pub needles: Vec<String>,
    /// Where the rule came from (for messages).
    pub origin: String,
    pub line: usize,
}

impl Rule {
    /// The fix in mode `to`.
    pub fn variant(&self, to: Target) -> &Variant {
        match (to, &self.portable) {
            (Target::Portable, Portable::Own(v)) => v,
            _ => &self.literal,
        }
    }

    /// The class of the rule's fix in mode `to` (a finding's may be lower).
    pub fn fix_class(&self, to: Target) -> FixClass {
        match (to, &self.portable) {
            (Target::Portable, Portable::Replaces) => self.literal.fix.min(FixClass::Unsafe),
            _ => self.variant(to).fix,
        }
    }

    /// Does the portable mode rewrite this rule's matches differently from `--to tpu`?
    pub fn portable_differs(&self) -> bool {
        !matches!(self.portable, Portable::Same)
            && (self.literal.fix != FixClass::Manual
                || self.variant(Target::Portable).fix != FixClass::Manual)
    }

    /// What else decides the rule's effect, one line each, for `tpuport rule ID`: the files it
    /// applies to, when its fix is only unsafe, the comment it leaves.
    pub fn conditions(&self) -> Vec<String> {
        let mut out = vec![];
        for (param, values) in &self.when {
            out.push(format!(
                "matches only where `{param}` is {}",
                values
                    .iter()
                    .map(|v| format!("\"{v}\""))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ));
        }
        if !self.only_if_uses.is_empty() {
            out.push(format!(
                "applies only in files that use {}",
                self.only_if_uses.join(", ")
            ));
        }
        if !self.not_if_uses.is_empty() {
            out.push(format!(
                "not in files that use {}",
                self.not_if_uses.join(", ")
            ));
        }
        if !self.unsafe_if_uses.is_empty() {
            let unless = if self.unless_uses.is_empty() {
                String::new()
            } else {
                format!(
                    ", unless every run of the finding calls {} (same function or module level)",
                    self.unless_uses.join(", ")
                )
            };
            out.push(format!(
                "unsafe in files that use {}{unless}",
                self.unsafe_if_uses.join(", ")
            ));
        }
        if !self.safe_after.is_empty() {
            out.push(format!(
                "safe only where every path of the program to it calls {} first (in the same function, at module level, or in each of the file's calls of that function); unsafe elsewhere, library modules included",
                self.safe_after.join(", ")
            ));
        }
        if !self.safe_if_ported.is_empty() {
            out.push(format!(
                "safe only where every call of {} in the file is ported by a safe fix too; unsafe where one is left (the program would keep PyTorch/XLA's device)",
                self.safe_if_ported.join(", ")
            ));
        }
        if !self.remove_after.is_empty() {
            out.push(format!(
                "removes the statement instead (safe) next to a call of {} with the same arguments",
                self.remove_after.join(", ")
            ));
        }
        if let Some(n) = &self.literal.note {
            let place = if n.only_in_loop {
                " (inside loops, and where it leaves a bare `pass`)"
            } else {
                ""
            };
            out.push(format!(
                "leaves the comment{place}: # tpuport {}: {}",
                self.id, n.text
            ));
        }
        out
    }

    /// Does the rule look at what the file uses (`unsafe_if_uses`, `only_if_uses`, `not_if_uses`)?
    pub fn depends_on_uses(&self) -> bool {
        !(self.unsafe_if_uses.is_empty()
            && self.only_if_uses.is_empty()
            && self.not_if_uses.is_empty())
    }

    /// A fallback rule only fires where no other rule matched.
    pub fn is_fallback(&self) -> bool {
        match &self.matcher {
            Matcher::Reference { prefixes, .. } => !prefixes.is_empty(),
            Matcher::String { positions, .. } => positions.is_none(),
            _ => false,
        }
    }
}

/// A position pattern: an identifier glob (`*device*`) or a call slot (`torch.device:0`,
/// `.to:device`).
#[derive(Debug, Clone)]
pub enum PositionPattern {
    Ident(Regex),
    Slot { callee: String, key: String },
}

pub struct RuleFile {
    pub family: String,
    pub title: String,
    pub about: Option<String>,
    pub origin: String,
}

/// All loaded rules, with their position classes.
pub struct RuleSet {
    pub rules: Vec<Rule>,
    /// Helpers fixes may call, sorted by name.
    pub helpers: Vec<Helper>,
    pub files: Vec<RuleFile>,
    pub positions: HashMap<String, Vec<PositionPattern>>,
}

impl RuleSet {
    /// Keep only rules selected by `select` (id prefixes; empty = all) and not in `ignore`.
    pub fn filter(&mut self, select: &[String], ignore: &[String]) -> Result<()> {
        for code in select.iter().chain(ignore) {
            if !self.rules.iter().any(|r| r.id.starts_with(code.as_str())) {
                bail!("no rule matches `{code}`; run `tpuport rule --all` to list the rule ids");
            }
        }
        self.rules.retain(|r| {
            (select.is_empty() || select.iter().any(|s| r.id.starts_with(s.as_str())))
                && !ignore.iter().any(|s| r.id.starts_with(s.as_str()))
        });
        Ok(())
    }

    pub fn get(&self, id: &str) -> Vec<&Rule> {
        self.rules.iter().filter(|r| r.id == id).collect()
    }

    /// Roots of every qualified name the rules mention (`torch`, `torch_xla`, `os`).
    pub fn module_roots(&self) -> HashSet<String> {
        let mut roots: HashSet<String> = ["torch", "os", "sys"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for r in &self.rules {
            let names: Vec<&String> = match &r.matcher {
                Matcher::Call(n) => n.iter().collect(),
                Matcher::Reference { exact, prefixes } => exact.iter().chain(prefixes).collect(),
                Matcher::Keyword { calls, .. } => calls.iter().collect(),
                _ => vec![],
            };
            for n in names {
                if let Some(root) = n.split('.').next() {
                    roots.insert(root.to_string());
                }
            }
        }
        // A string rule's position can name a call (`ourlib.launch:device`) no other rule does.
        for pats in self.positions.values() {
            for p in pats {
                if let PositionPattern::Slot { callee, .. } = p
                    && !callee.starts_with('.')
                    && let Some(root) = callee.split('.').next()
                {
                    roots.insert(root.to_string());
                }
            }
        }
        roots
    }
}
