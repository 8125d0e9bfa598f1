//! The TOML schema of a rule file (`rules/*.toml`) as serde reads it, with the plain enums
//! (fix class, string form, argument kind, removal kind) that the compiled model keeps.

use std::collections::BTreeMap;

use serde::Deserialize;

/// How far a fix may be trusted. Ordered: `Manual < Unsafe < Safe`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FixClass {
    /// Diagnostic only: no rewrite, advice says what to do.
    Manual,
    /// A rewrite that may change meaning; applied only with `--unsafe-fixes`.
    Unsafe,
    /// A rewrite that keeps the program's meaning on TPU; applied by default.
    Safe,
}

/// Which machine a migration writes for (`tpuport migrate --to`, `to =` in the configuration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    /// The default: a fix keeps what the program does on the machine it was written for (CUDA,
    /// or a CPU) and makes it right on a TPU: `torch.accelerator.current_accelerator()`, the
    /// accelerator's default backend, comparisons extended to `"tpu"`.
    #[default]
    Portable,
    /// Literal TorchTPU names (`"tpu"`, `"tpu_dist"`, `.to("tpu")`): for owners who leave CUDA
    /// behind.
    Tpu,
}

impl Target {
    pub fn as_str(self) -> &'static str {
        match self {
            Target::Portable => "portable",
            Target::Tpu => "tpu",
        }
    }
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "portable" => Ok(Target::Portable),
            "tpu" => Ok(Target::Tpu),
            other => Err(format!(
                "`{other}` is not a target: use \"portable\" (the default) or \"tpu\""
            )),
        }
    }
}

/// What a rule does under `--to portable`, in a rule file: `portable = "same"` (its fix keeps
/// CUDA as it was, e.g. `torch.accelerator.*`), `"none"` (no portable form: the fix replaces
/// CUDA, so it is unsafe there), `"device"` / `"backend"` (a CUDA device string or NCCL name
/// becomes the current accelerator's, by where it sits), or a table: another action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PortableKind {
    Same,
    None,
    Device,
    Backend,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum PortableDef {
    Kind(PortableKind),
    Action(Box<ActionDef>),
}

impl FixClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FixClass::Manual => "manual",
            FixClass::Unsafe => "unsafe",
            FixClass::Safe => "safe",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StringForm {
    /// `"cuda:0"`
    Plain,
    /// `f"cuda:{rank}"`
    Fstring,
    /// `"cuda:{}".format(rank)`
    Format,
    /// `"cuda:%d" % rank`
    Percent,
    /// `"cuda:" + str(rank)`
    Concat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgKind {
    Missing,
    None,
    Int,
    String,
    /// `True` (falls back to `other` where no `true` template is given).
    True,
    /// `False` (falls back to `other`).
    False,
    Other,
}

impl ArgKind {
    /// Whether a list of kinds (`unsafe = [...]`, `manual = [...]`) covers this kind; booleans
    /// are also covered by `other`.
    pub fn listed_in(self, list: &[ArgKind]) -> bool {
        list.contains(&self)
            || (matches!(self, ArgKind::True | ArgKind::False) && list.contains(&ArgKind::Other))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoveKind {
    /// The statement that holds the match (an expression statement, or an assignment that binds
    /// no name).
    Statement,
    /// The matched keyword argument.
    Keyword,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleFileDef {
    pub(super) family: String,
    pub(super) title: String,
    #[serde(default)]
    pub(super) about: Option<String>,
    #[serde(default)]
    pub(super) positions: BTreeMap<String, Vec<String>>,
    /// Key words for the file pre-filter of every rule here that names none itself (instead of
    /// the segments of its qualified names): `["torch_xla"]`.
    #[serde(default)]
    pub(super) needles: Option<Vec<String>>,
    /// The default `portable` of the file's rules (`"same"` for the PyTorch/XLA families: their
    /// programs run on a TPU already).
    #[serde(default)]
    pub(super) portable: Option<PortableKind>,
    #[serde(default, rename = "rule")]
    pub(super) rules: Vec<RuleDef>,
    /// Helper definitions that fixes may call (`_tpuport_rank()`), inserted once per file.
    #[serde(default)]
    pub(super) helpers: BTreeMap<String, HelperDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HelperDef {
    /// The top-level definition, as Python source (`def NAME(...): ...`).
    pub(super) code: String,
    /// Modules the code needs imported (`os`, `torch`).
    #[serde(default)]
    pub(super) imports: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleDef {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) message: String,
    #[serde(default)]
    pub(super) advice: Option<String>,
    pub(super) fix: FixClass,
    /// Why the fix is unsafe (required with `fix = "unsafe"` in the built-in rules): the note
    /// every unsafe finding of the rule carries.
    #[serde(default)]
    pub(super) fix_safety: Option<String>,
    #[serde(rename = "match")]
    pub(super) matcher: MatchDef,
    #[serde(default)]
    pub(super) action: Option<ActionDef>,
    /// The fix under `--to portable` (the default); absent: `"same"`, or `"none"` where the
    /// action writes a TorchTPU name (`"tpu"`, `tpu_dist`, `torch.tpu.*`) and the file sets no
    /// other default.
    #[serde(default)]
    pub(super) portable: Option<PortableDef>,
    #[serde(default)]
    pub(super) example: Option<Example>,
    #[serde(default)]
    pub(super) needles: Option<Vec<String>>,
    /// The fix is shown as unsafe when the file (as given) uses one of these qualified names...
    #[serde(default)]
    pub(super) unsafe_if_uses: Vec<String>,
    /// ...and none of these.
    #[serde(default)]
    pub(super) unless_uses: Vec<String>,
    /// The rule only applies in files that use one of these qualified names...
    #[serde(default)]
    pub(super) only_if_uses: Vec<String>,
    /// ...and never in files that use one of these.
    #[serde(default)]
    pub(super) not_if_uses: Vec<String>,
    /// The fix removes the statement instead (safe) where the statement next to it calls one of
    /// these with the same arguments (`torch.manual_seed(s)` next to a CUDA seed).
    #[serde(default)]
    pub(super) remove_after: Vec<String>,
    /// The fix is safe only where the program calls one of these first, on every path to the
    /// finding (`torch.distributed.barrier()` needs `init_process_group`); elsewhere it is unsafe.
    #[serde(default)]
    pub(super) safe_after: Vec<String>,
    /// The fix is safe only where every call of these in the file is ported by a safe fix too
    /// (`opt.step()` for `xm.optimizer_step` is right on TorchTPU's device, not on a PyTorch/XLA
    /// device the file keeps); elsewhere it is unsafe.
    #[serde(default)]
    pub(super) safe_if_ported: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MatchDef {
    /// A built-in syntax-tree analysis by name (`"host-sync-in-loop"`): manual rules only.
    pub(super) lint: Option<String>,
    pub(super) call: Option<Vec<String>>,
    pub(super) reference: Option<Vec<String>>,
    pub(super) method: Option<Vec<String>>,
    pub(super) attribute: Option<Vec<String>>,
    pub(super) keyword: Option<Vec<String>>,
    pub(super) string: Option<String>,
    #[serde(rename = "in")]
    pub(super) positions: Option<Vec<String>>,
    pub(super) forms: Option<Vec<StringForm>>,
    pub(super) receiver: Option<String>,
    pub(super) min_args: Option<usize>,
    /// For `call` rules: match only calls whose argument (a parameter of the action) is one
    /// of these string literals (`when = { device_type = ["cuda", "cuda:*"] }`; a trailing
    /// `*` matches any rest; `"<missing>"` matches an argument not given; `"<unknown>"`, in a rule
    /// without a fix, one whose value is not written in the call (a name, an attribute); other arguments by
    /// their source text, e.g. `enabled = ["False"]`; `"!text"` leaves out a call whose source
    /// holds `text`, `"!<cuda test>"` one whose argument is false on a TPU (`device.type ==
    /// "cuda"`, written there or as the value of the name given); a list of exclusions only
    /// takes any other value, or none).
    #[serde(default)]
    pub(super) when: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ActionDef {
    pub(super) rename: Option<RenameDef>,
    pub(super) replace: Option<String>,
    pub(super) to: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) params: Option<Vec<String>>,
    #[serde(default)]
    pub(super) pass_rest: bool,
    #[serde(default)]
    pub(super) convert: BTreeMap<String, ConvertDef>,
    pub(super) string: Option<String>,
    pub(super) remove: Option<RemoveKind>,
    /// `assign = "template"`: replace the assignment whose single target is the match by the
    /// template, the assigned value bound to the first of `params`.
    pub(super) assign: Option<String>,
    /// `unwrap = "with"`: replace the `with` statement the matched call opens by its body.
    pub(super) unwrap: Option<UnwrapKind>,
    /// A one-line comment left where the statement was rewritten or removed.
    pub(super) note: Option<String>,
    /// Where the note is left: `"always"` (default) or only `"loop"` (inside a for/while).
    pub(super) note_in: Option<NoteWhere>,
    /// `[rule.portable]` only: the portable fix's class (default: the rule's `fix`)...
    pub(super) fix: Option<FixClass>,
    /// ...why it is unsafe...
    pub(super) fix_safety: Option<String>,
    /// ...and whether it extends a CUDA test to the TPU (`x.device.type in ("cuda", "tpu")`):
    /// such a fix is kept off where the code the test selects is not right on a TPU (a float16
    /// GradScaler, CUDA streams, Triton).
    #[serde(default)]
    pub(super) extends: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnwrapKind {
    With,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteWhere {
    Always,
    Loop,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RenameDef {
    One(String),
    Map(BTreeMap<String, String>),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvertDef {
    pub missing: Option<String>,
    pub none: Option<String>,
    pub int: Option<String>,
    pub string: Option<String>,
    #[serde(rename = "true")]
    pub true_: Option<String>,
    #[serde(rename = "false")]
    pub false_: Option<String>,
    pub other: Option<String>,
    /// A template per literal value (a string's text or an int), tried before the kind's.
    #[serde(default)]
    pub literal: BTreeMap<String, String>,
    /// Argument kinds for which the fix is only unsafe.
    #[serde(default, rename = "unsafe")]
    pub unsafe_for: Vec<ArgKind>,
    /// Argument kinds for which no fix is offered.
    #[serde(default, rename = "manual")]
    pub manual_for: Vec<ArgKind>,
    /// A regex: an argument whose source text matches gets no fix (`'(?i)device'`: a
    /// `torch.device` where an index is wanted).
    #[serde(default)]
    pub manual_text: Option<String>,
}

impl ConvertDef {
    /// Every template the conversion holds.
    pub fn templates(&self) -> impl Iterator<Item = &String> {
        [
            &self.missing,
            &self.none,
            &self.int,
            &self.string,
            &self.true_,
            &self.false_,
            &self.other,
        ]
        .into_iter()
        .flatten()
        .chain(self.literal.values())
    }

    pub fn template(&self, kind: ArgKind) -> Option<&str> {
        match kind {
            ArgKind::Missing => self.missing.as_deref(),
            ArgKind::None => self.none.as_deref(),
            ArgKind::Int => self.int.as_deref(),
            ArgKind::String => self.string.as_deref(),
            ArgKind::True => self.true_.as_deref().or(self.other.as_deref()),
            ArgKind::False => self.false_.as_deref().or(self.other.as_deref()),
            ArgKind::Other => self.other.as_deref(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub before: String,
    /// `before` migrated with `--to tpu --unsafe-fixes`.
    pub after: String,
    /// `before` migrated with `--unsafe-fixes` under the default `--to portable`, where that
    /// differs from `after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub portable: Option<String>,
}
