//! Weights shared by two modules, moved to the TPU: TorchTPU unties them.
//!
//! `nn.Module._apply` keeps a moved parameter the same object only where the new tensor is
//! shallow-copy compatible with the old one (CPU and CUDA are); TorchTPU's tensors are not, so a
//! move to the TPU gives every holder of a shared weight its own new Parameter. nanoGPT's
//! `wte`/`lm_head`, Hugging Face's `tie_word_embeddings`, opacus's DP RNNs (each weight under two
//! names): the first loss is the same, then the gradients split. An optimizer made before the
//! move holds the old CPU parameters for the same reason.
//!
//! The fix, in the program's entry script (after its imports): on a TPU, `.to()` swaps
//! parameters in place (`torch.__future__.set_swap_module_params_on_conversion(True)`), which
//! keeps every parameter the same object, so ties and optimizers survive the move. Off a TPU it
//! does nothing, so the program runs on its original machine exactly as before.
//!
//! The lint fires on programs (entry scripts) that move modules and share weights, in their own
//! code or in the project modules they import ([`TIE`]), or through libraries that do
//! ([`TYING_IMPORT`]).

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{AnyNodeRef, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

use super::super::Checker;
use super::Found;
use crate::port::edit::{Edit, Fix};
use crate::port::imports::after_imports;
use crate::port::program::imports::module_within_that;
use crate::port::rules::FixClass;

/// A tie written in the program's own code: a module's weight assigned from another's
/// (`self.transformer.wte.weight = self.lm_head.weight`), or the tie helpers of Hugging Face.
static TIE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)\.weight\s*=\s*[\w.\[\]]+\.weight\s*(#.*)?$|\btie_weights\s*\(|\btie_word_embeddings\b|\b_tied_weights_keys\b",
    )
    .unwrap()
});

/// Libraries whose modules share a weight between two holders: opacus's DP RNNs register each
/// weight under two names; Hugging Face models tie their input and output embeddings.
static TYING_IMPORT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?m)^\s*(from opacus\.layers(\.\w+)? import [^\n]*\bDP(LSTM|GRU|RNN)\b|from transformers import [^\n]*\b(AutoModel\w*|\w+ForCausalLM|\w+LMHeadModel|\w+ForMaskedLM|\w+ForSeq2SeqLM|\w+ForConditionalGeneration)\b|import transformers\b)",
    )
    .unwrap()
});

/// The statement already in the port (a second run changes nothing).
pub const SWAP: &str = "set_swap_module_params_on_conversion";

/// What the fix inserts after the imports.
pub const KEEP_TIES: &str = "# TorchTPU unties weights that two modules share when .to() moves them (its tensors are\n\
# not shallow-copy compatible with CPU ones); swapping parameters in place keeps them shared.\n\
if getattr(torch.accelerator.current_accelerator(), \"type\", None) == \"tpu\":\n    \
torch.__future__.set_swap_module_params_on_conversion(True)";

/// What DEV020's fix inserts after the imports (the same switch, for an optimizer).
pub const KEEP_OPTIMIZED: &str = "# TorchTPU gives a module new parameters when .to() moves it (its tensors are not\n\
# shallow-copy compatible with CPU ones), so an optimizer built before the move would step the\n\
# old ones; swapping parameters in place keeps them.\n\
if getattr(torch.accelerator.current_accelerator(), \"type\", None) == \"tpu\":\n    \
torch.__future__.set_swap_module_params_on_conversion(True)";

/// A module moved in a project module's text.
static MOVE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.(?:to|cuda)\(").unwrap());

/// How many project modules away a tie may be (the script, the model file, its layers).
const HOPS: usize = 2;

/// Module file → whether it builds an optimizer before moving its module (kept per run).
static TRAINERS: crate::port::program::tree::Kept<bool> = LazyLock::new(Default::default);

/// How many project modules away a trainer may be (a package `__init__`, its registry, the
/// trainer module).
const TRAINER_HOPS: usize = 3;

/// An optimizer built over a module's parameters: `torch.optim.Adam(self.model.parameters()`
/// (the module's spelling in group 1).
static OPTIMIZER_OVER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\boptim\.[A-Z]\w*\(\s*(?:params\s*=\s*)?([\w.]+)\.parameters\(\)").unwrap()
});

/// Does a module's text build an optimizer over a module it moves afterwards
/// (`self.model.to(self.device)` below `Adam(self.model.parameters(), ...)`)?
fn optimizer_then_move(text: &str) -> bool {
    if !text.contains("optim.") {
        return false;
    }
    OPTIMIZER_OVER.captures_iter(text).any(|c| {
        let (Some(all), Some(model)) = (c.get(0), c.get(1)) else {
            return false;
        };
        // In the function that builds it: moved after, and not before (set AA: a training
        // function that moved its extractor first, and an evaluation function moving it again).
        let (start, end) = function_around(text, all.start());
        !moved_in(&text[start..all.start()], model.as_str())
            && moved_in(&text[all.end()..end], model.as_str())
    })
}

/// The byte range of the function whose body holds `at` (the whole text outside one): from its
/// `def` line to the next `def` or `class` line indented no deeper.
fn function_around(text: &str, at: usize) -> (usize, usize) {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let opens = |line: &str| {
        let t = line.trim_start();
        t.starts_with("def ") || t.starts_with("async def ")
    };
    let mut start = None;
    let mut offset = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let here = indent(&text[offset..text[offset..].find('\n').map_or(text.len(), |n| offset + n)]);
    // The nearest `def` above, indented less than the line that builds the optimizer.
    while offset > 0 {
        let prev = text[..offset - 1].rfind('\n').map_or(0, |i| i + 1);
        let line = &text[prev..offset - 1];
        if opens(line) && indent(line) < here {
            start = Some((prev, indent(line)));
            break;
        }
        offset = prev;
    }
    let Some((start, depth)) = start else {
        return (0, text.len());
    };
    let mut end = text.len();
    let mut pos = text[at..].find('\n').map_or(text.len(), |n| at + n + 1);
    while pos < text.len() {
        let next = text[pos..].find('\n').map_or(text.len(), |n| pos + n);
        let line = &text[pos..next];
        let t = line.trim_start();
        if !t.is_empty() && indent(line) <= depth && (opens(line) || t.starts_with("class ")) {
            end = pos;
            break;
        }
        pos = next + 1;
    }
    (start, end)
}

impl Checker<'_> {
    /// The first module move of a program that shares weights, with the fix.
    pub(super) fn shared_weights_moves(&self) -> Vec<Found> {
        if !self.facts.program || self.src.contains(SWAP) {
            return vec![];
        }
        let Some(first_move) = self.first_move() else {
            return vec![];
        };
        let Some(why) = self.ties_in_program() else {
            return vec![];
        };
        let Some(at) = torch_imported_at(&self.parsed.module.body) else {
            return vec![];
        };
        if !self.sem.import_names().contains("torch") {
            return vec![];
        }
        vec![Found {
            range: first_move,
            detail: why,
            fix: Some(switch_after_imports(at, KEEP_TIES)),
        }]
    }

    /// DEV020: the first `torch.optim` optimizer an entry script builds before its first module
    /// move (or where it moves none and a project module it imports does), with the switch that
    /// keeps the parameters the optimizer holds. Not where DEV018 writes the same switch.
    pub(super) fn optimizer_before_move(&self) -> Vec<Found> {
        if !self.facts.program || self.src.contains(SWAP) {
            return vec![];
        }
        let first_move = self.first_move();
        if first_move.is_some() && self.ties_in_program().is_some() {
            return vec![];
        }
        // Every optimizer with the modules whose parameters it takes (`decoder.parameters()`),
        // and every move with what it moves.
        let mut optimizers: Vec<(TextRange, Vec<&str>)> = vec![];
        let mut moves: Vec<(TextRange, &str)> = vec![];
        // Optimizers built from a function's argument that the function never moves: its caller
        // moved the module before the call, if at all (set V: `train_classifier(model, ...)`
        // called with a model already on the device; the switch there broke TorchScript moves).
        let mut from_arguments: Vec<TextRange> = vec![];
        super::walk(&self.parsed.module.body, true, &mut |node, stack| {
            let AnyNodeRef::ExprCall(call) = node else {
                return;
            };
            if let Some(q) = self.sem.qualified_name(&call.func)
                && let Some(class) = q.strip_prefix("torch.optim.")
                && !class.contains('.')
                && class.starts_with(|c: char| c.is_ascii_uppercase())
            {
                let mut models = vec![];
                for arg in call.arguments.iter_source_order() {
                    super::any_in(arg.value(), &mut |e| {
                        if let Expr::Call(c) = e
                            && let Expr::Attribute(a) = c.func.as_ref()
                            && matches!(a.attr.as_str(), "parameters" | "named_parameters")
                        {
                            models.push(self.text(a.value.range()));
                        }
                        false
                    });
                }
                let function = stack.iter().rev().find_map(|n| match n {
                    AnyNodeRef::StmtFunctionDef(f) => Some(*f),
                    _ => None,
                });
                if let Some(f) = function
                    && !models.is_empty()
                    && models.iter().all(|m| {
                        f.parameters.iter().any(|p| p.name().as_str() == *m)
                            && !moved_in(self.text(f.range()), m)
                    })
                {
                    from_arguments.push(call.range());
                }
                optimizers.push((call.range(), models));
            } else if let Expr::Attribute(a) = call.func.as_ref()
                && matches!(self.method_name(call), Some("to" | "cuda" | "tpu"))
                && !casts_only(call)
            {
                moves.push((call.range(), self.text(a.value.range())));
            }
        });
        // An optimizer whose own module moves after it is built, wherever the script first
        // moves a tensor (set U: embeddings moved first, the decoder after its Adam).
        let late = optimizers.iter().find(|(at, models)| {
            moves
                .iter()
                .any(|(m, what)| m.start() > at.start() && models.contains(what))
        });
        let first = optimizers
            .iter()
            .find(|(at, _)| !from_arguments.contains(at));
        let Some(built) = late.or(first).map(|(r, _)| *r) else {
            return self.optimizer_before_move_in_modules();
        };
        match first_move {
            _ if late.is_some() => {}
            Some(m) if m.start() < built.start() => return vec![],
            Some(_) => {}
            None => {
                let Some(path) = self.facts.path.as_deref() else {
                    return vec![];
                };
                if module_within_that(path, self.src, HOPS, &|t| MOVE.is_match(t)).is_none() {
                    return vec![];
                }
            }
        }
        let Some(at) = torch_imported_at(&self.parsed.module.body) else {
            return vec![];
        };
        vec![Found {
            range: built,
            detail: String::new(),
            fix: Some(switch_after_imports(at, KEEP_OPTIMIZED)),
        }]
    }

    /// DEV020 for an entry script that builds no optimizer itself, where a project module of
    /// its program (within [`TRAINER_HOPS`]) builds one and then moves the module it optimizes
    /// (set AC: trainer classes whose `__init__` built Adam over `self.model.parameters()`, then
    /// called `self.model.to(self.device)`); the finding sits on the import that reaches it.
    fn optimizer_before_move_in_modules(&self) -> Vec<Found> {
        // A script that trains through a project's trainer names it (`Trainer(...)`,
        // `trainer.fit()`, `train(...)`); a CLI or conversion script is not walked.
        let Some(path) = self.facts.path.as_deref().filter(|_| {
            ["train", "Train", ".fit("]
                .iter()
                .any(|w| self.src.contains(w))
        }) else {
            return vec![];
        };
        let Some(member) =
            crate::port::program::imports::modules_anywhere_within(path, self.src, TRAINER_HOPS)
                .into_iter()
                .find(|m| {
                    crate::port::program::tree::fact(&TRAINERS, &m.file, optimizer_then_move)
                        .unwrap_or(false)
                })
        else {
            return vec![];
        };
        let Some(at) = torch_imported_at(&self.parsed.module.body) else {
            return vec![];
        };
        let name = member
            .file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let range = TextRange::new(
            TextSize::try_from(member.via.start).unwrap_or_default(),
            TextSize::try_from(member.via.end).unwrap_or_default(),
        );
        vec![Found {
            range,
            detail: format!(" (in {name}, which this import reaches)"),
            fix: Some(switch_after_imports(at, KEEP_OPTIMIZED)),
        }]
    }

    /// The first `.to(...)`, `.cuda(...)` or `.tpu(...)` called on a value.
    fn first_move(&self) -> Option<TextRange> {
        let mut found: Option<TextRange> = None;
        super::walk(&self.parsed.module.body, true, &mut |node, _| {
            if found.is_some() {
                return;
            }
            if let AnyNodeRef::ExprCall(call) = node
                && matches!(self.method_name(call), Some("to" | "cuda" | "tpu"))
                && !casts_only(call)
            {
                found = Some(call.range());
            }
        });
        found
    }

    /// Where the program shares weights: this file or a project module it imports, in words.
    fn ties_in_program(&self) -> Option<String> {
        if let Some(m) = TYING_IMPORT.find(self.src) {
            return Some(format!("it imports `{}`", m.as_str().trim()));
        }
        if TIE.is_match(self.src) {
            return Some("it ties weights".into());
        }
        let path = self.facts.path.as_deref()?;
        let file = module_within_that(path, self.src, HOPS, &|text| {
            TIE.is_match(text) || TYING_IMPORT.is_match(text)
        })?;
        Some(format!(
            "{} ties weights",
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ))
    }
}

/// The fix of DEV018 and DEV020: `switch` (the swap switch with its comment) inserted at `at`,
/// after the imports ([`torch_imported_at`]).
/// Does this function's text move `name` (`name.to(`, `name.cuda(`, `name.tpu(`)?
fn moved_in(text: &str, name: &str) -> bool {
    regex::Regex::new(&format!(
        r"\b{}\s*\.\s*(to|cuda|tpu)\(",
        regex::escape(name)
    ))
    .is_ok_and(|re| re.is_match(text))
}

fn switch_after_imports(at: TextSize, switch: &str) -> Fix {
    Fix {
        edits: vec![Edit::replace(TextRange::empty(at), format!("\n\n{switch}"))],
        applicability: FixClass::Safe,
        imports: vec!["torch".into()],
        exclusive: None,
        why_unsafe: None,
    }
}

/// Where the fix goes: after the block of top-level imports that binds `torch` (`import
/// torch`, `import torch.nn as nn` does not), else after the module's leading imports (the
/// import pass then adds `import torch` there). A program that sets things up before it imports
/// torch (`os.environ[...] = ...` first) gets it after that later import, not above it.
fn torch_imported_at(body: &[Stmt]) -> Option<TextSize> {
    let binds_torch = |s: &Stmt| {
        matches!(s, Stmt::Import(i) if i.names.iter().any(|a| {
            let bound = a.asname.as_ref().map_or_else(
                || a.name.as_str().split('.').next().unwrap_or(""),
                |n| n.as_str(),
            );
            bound == "torch" && (a.name.as_str() == "torch" || a.name.as_str().starts_with("torch."))
        }))
    };
    let Some(first) = body.iter().position(binds_torch) else {
        return after_imports(body);
    };
    let mut end = first;
    while matches!(
        body.get(end + 1),
        Some(Stmt::Import(_) | Stmt::ImportFrom(_))
    ) {
        end += 1;
    }
    let at = body[end].end();
    Some(after_imports(body).map_or(at, |a| a.max(at)))
}

/// `.to(torch.int8)`, `.to(x.dtype)`, `.to(dtype=...)`, `.to(memory_format=...)`: a cast, not a
/// move.
fn casts_only(call: &ruff_python_ast::ExprCall) -> bool {
    let dtype = |name: &str| {
        name.ends_with("dtype")
            || ["float", "int", "uint", "bfloat", "complex"]
                .iter()
                .any(|p| name.starts_with(p))
            || matches!(name, "half" | "double" | "long" | "short" | "bool")
    };
    let args = &call.arguments;
    match args.args.first() {
        Some(Expr::Attribute(a)) => dtype(a.attr.as_str()),
        Some(Expr::Name(n)) => n.id.as_str().ends_with("dtype"),
        Some(_) => false,
        None => {
            !args.keywords.is_empty()
                && args.keywords.iter().all(|k| {
                    k.arg
                        .as_ref()
                        .is_some_and(|n| matches!(n.as_str(), "dtype" | "memory_format" | "copy"))
                })
        }
    }
}

#[cfg(test)]
mod tests {

    /// The file after a default migration with DEV018 alone, if it changed.
    fn port(src: &str, path: Option<&std::path::Path>) -> Option<String> {
        crate::port::test_support::migrate("DEV018", src, path).output
    }

    const MAIN: &str = "import torch\nfrom model import GPT\n\nif __name__ == \"__main__\":\n    model = GPT().to(\"cuda\")\n";

    #[test]
    fn a_tie_in_an_imported_project_module_is_found_beside_the_script() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("train.py");
        std::fs::write(
            dir.path().join("model.py"),
            "from torch import nn\n\nclass GPT(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.transformer.wte.weight = self.lm_head.weight\n",
        )
        .unwrap();
        let out = port(MAIN, Some(&script)).expect("a fix");
        assert!(out.contains(super::SWAP), "{out}");
        // The same program with a model file that ties nothing: no finding.
        std::fs::write(
            dir.path().join("model.py"),
            "from torch import nn\n\nclass GPT(nn.Module):\n    pass\n",
        )
        .unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::copy(dir.path().join("model.py"), other.path().join("model.py")).unwrap();
        assert_eq!(port(MAIN, Some(&other.path().join("train.py"))), None);
    }

    #[test]
    fn the_switch_goes_after_the_import_of_torch_and_casts_are_no_moves() {
        let tie = "\n\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a.weight = self.b.weight\n\n\nif __name__ == '__main__':\n";
        // Set-up before `import torch`: the switch goes after that import, not above it.
        let src = format!(
            "import os\n\nos.environ['TORCH_HOME'] = '/tmp'\n\nimport torch\nimport math\n{tie}    m = M().to('cuda')\n"
        );
        let out = port(&src, None).expect("a fix");
        let import = out.find("import torch\nimport math\n").expect("the import");
        assert!(out.find(super::SWAP).is_some_and(|at| at > import), "{out}");
        // A dtype cast moves nothing.
        let cast = format!("import torch\n{tie}    q = M()\n    x = q.a.weight.to(torch.int8)\n");
        assert_eq!(port(&cast, None), None);
    }

    #[test]
    fn near_misses_are_left_alone() {
        let tie = "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a.weight = self.b.weight\n";
        // A library module (not a program): nothing.
        assert_eq!(port(&format!("{tie}\nm = M().to('cuda')\n"), None), None);
        // A program that never moves a module: nothing.
        assert_eq!(
            port(
                &format!("{tie}\nif __name__ == '__main__':\n    m = M()\n"),
                None
            ),
            None
        );
        // A program that moves but ties nothing: nothing.
        assert_eq!(
            port(
                "import torch\n\nif __name__ == '__main__':\n    m = torch.nn.Linear(2, 2).to('cuda')\n",
                None
            ),
            None
        );
        // A Hugging Face model and opacus's DP RNNs tie inside the library.
        for import in [
            "from transformers import AutoModelForCausalLM",
            "from opacus.layers import DPGRU, DPLSTM",
        ] {
            let src = format!(
                "import torch\n{import}\n\nif __name__ == '__main__':\n    m = load().to('cuda')\n"
            );
            assert!(
                port(&src, None).is_some_and(|o| o.contains(super::SWAP)),
                "{import}"
            );
        }
    }

    #[test]
    fn an_optimizer_built_before_the_move_gets_the_switch() {
        let dev020 = |src: &str, path: Option<&std::path::Path>| {
            crate::port::test_support::migrate("DEV020", src, path).output
        };
        let before = "import torch\n\nif __name__ == \"__main__\":\n    model = torch.nn.Linear(2, 2)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    model.to(\"tpu\")\n";
        let out = dev020(before, None).expect("the switch");
        assert!(out.contains(super::SWAP), "{out}");
        // Built after the move: the optimizer holds the moved parameters.
        let after = "import torch\n\nif __name__ == \"__main__\":\n    model = torch.nn.Linear(2, 2).to(\"tpu\")\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n";
        assert_eq!(dev020(after, None), None);
        // The move is in the trainer module the script imports.
        let d = tempfile::tempdir().unwrap();
        let script = "import torch\nfrom trainer import fit\n\nif __name__ == \"__main__\":\n    model = torch.nn.Linear(2, 2)\n    fit(model, torch.optim.Adam(model.parameters()))\n";
        let path = crate::port::test_support::write(d.path(), "train.py", script);
        crate::port::test_support::write(
            d.path(),
            "trainer.py",
            "def fit(model, opt):\n    model.to(\"tpu\")\n",
        );
        assert!(dev020(script, Some(&path)).is_some_and(|o| o.contains(super::SWAP)));
        // A tensor moved first, the optimizer's own module after it (set U).
        let late = "import torch\n\ndef main():\n    emb = torch.zeros(4).to(\"tpu\")\n    decoder = torch.nn.Linear(2, 2)\n    opt = torch.optim.Adam(params=filter(lambda p: p.requires_grad, decoder.parameters()))\n    decoder = decoder.to(\"tpu\")\n\nmain()\n";
        assert!(dev020(late, None).is_some_and(|o| o.contains(super::SWAP)));
        // A trainer given a model it never moves: its caller moved it first (set V).
        let given = "import torch\n\n\ndef fit(model, loader):\n    opt = torch.optim.Adam(model.parameters())\n    for x in loader:\n        x = x.to(\"tpu\")\n        opt.step()\n\n\nif __name__ == \"__main__\":\n    fit(torch.nn.Linear(2, 2).to(\"tpu\"), [])\n";
        assert_eq!(dev020(given, None), None);
        let moved_inside = given.replace(
            "    for x in loader:",
            "    model.to(\"tpu\")\n    for x in loader:",
        );
        assert!(dev020(&moved_inside, None).is_some_and(|o| o.contains(super::SWAP)));
        // The script builds no optimizer; a trainer class its registry imports lazily builds
        // one, then moves its model (set AC).
        let d = tempfile::tempdir().unwrap();
        let entry = "import torch\nfrom models import build\n\nif __name__ == \"__main__\":\n    build(\"x\").fit()\n";
        let path = crate::port::test_support::write(d.path(), "train.py", entry);
        let w = |f: &str, t: &str| crate::port::test_support::write(d.path(), f, t);
        w("models/__init__.py", "from .registry import build\n");
        w(
            "models/registry.py",
            "def build(name):\n    from models.x.trainer import T\n    return T()\n",
        );
        w("models/x/__init__.py", "");
        let trainer = "import torch\nclass T:\n    def __init__(self, model, device):\n        self.model = model\n        self.optimizer = torch.optim.Adam(\n            self.model.parameters(), lr=1e-3)\n        self.model.to(device)\n";
        w("models/x/trainer.py", trainer);
        assert!(dev020(entry, Some(&path)).is_some_and(|o| o.contains(super::SWAP)));
        // Moved again in another function only: not this optimizer's move.
        let elsewhere = trainer.replace(
            "        self.model.to(device)\n",
            "    def eval(self, device):\n        self.model.to(device)\n",
        );
        w("models/x/trainer.py", &elsewhere);
        crate::port::program::forget();
        assert_eq!(dev020(entry, Some(&path)), None);
        // Moved before the optimizer is built: nothing to keep.
        w(
            "models/x/trainer.py",
            &trainer
                .replace("self.model = model", "self.model = model.to(device)")
                .replace("        self.model.to(device)\n", ""),
        );
        crate::port::program::forget();
        assert_eq!(dev020(entry, Some(&path)), None);
    }
}
