//! DEV021: a model an entry script builds, calls and never moves, in a program that uses CUDA.
//!
//! `classify_net = Classify(...)` (or a whole model loaded onto the CPU, `torch.load(p,
//! map_location="cpu")`), then `classify_net(x)`, with no `.to()`/`.cuda()` and the name
//! never handed to anything that could move it (a helper, a wrapper, a trainer), while the
//! program uses CUDA: its own code or a project module it imports puts tensors on a GPU. On the
//! GPU machine the model ran on the CPU (or failed where it met a CUDA tensor); after the port
//! the same happens on a TPU, where nothing says so: the forward runs on the CPU of the TPU VM,
//! or meets a TPU tensor and fails. Set R's drug-target inference script: its positional
//! encoding went to the accelerator, its model stayed behind.
//!
//! Every use of the name must be known for the finding to be given: a call (the forward), a
//! module method that does not move it (`eval`, `load_state_dict`, `parameters`...). Any other
//! use (an argument, an attribute, a second assignment) may move the model, and silences it.

use std::sync::LazyLock;

use regex::Regex;
use ruff_python_ast::{AnyNodeRef, Expr, ExprContext};
use ruff_text_size::{Ranged, TextRange};

use super::super::Checker;
use super::Found;
use crate::port::program::{imports::module_within_that, tree};

/// CUDA in a program's text: a `.cuda()` move, a "cuda" device string, a `torch.cuda` call.
static CUDA: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"\.cuda\(|["']cuda\b|torch\.cuda\."#).unwrap());

/// A module that moves itself (`self.to(device)`, `self.cuda()` in its constructor).
static SELF_MOVE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bself\.(?:to|cuda|tpu)\(").unwrap());

/// How many project modules away the CUDA use may be (the script, its model file, its blocks,
/// their layers: set R's encoding sat three imports down).
const HOPS: usize = 4;

/// Methods that move a module.
const MOVES: &[&str] = &["to", "cuda", "tpu", "to_empty", "xpu", "mps", "npu"];

/// Methods of a module that leave it where it is (and show it is a module).
const STAYS: &[&str] = &[
    "eval",
    "train",
    "load_state_dict",
    "state_dict",
    "parameters",
    "named_parameters",
    "buffers",
    "named_buffers",
    "modules",
    "named_modules",
    "children",
    "zero_grad",
    "requires_grad_",
    "float",
    "double",
    "half",
    "bfloat16",
];

/// A model built by a class call into a plain name: the name, where it is bound.
struct Built<'a> {
    name: &'a str,
    target: TextRange,
}

impl Checker<'_> {
    /// DEV021 (see the module doc): on entry scripts only.
    pub(super) fn models_never_moved(&self) -> Vec<Found> {
        if !self.facts.program
            || self.src.contains("set_default_device")
            || self.src.contains("with torch.device")
            || SELF_MOVE.is_match(self.src)
        {
            return vec![];
        }
        let unmoved: Vec<Built> = self
            .models_built()
            .into_iter()
            .filter(|b| self.never_moved(b))
            .collect();
        if unmoved.is_empty() {
            return vec![];
        }
        let Some(cuda) = self.cuda_in_program() else {
            return vec![];
        };
        unmoved
            .into_iter()
            .map(|b| Found::with(b.target, cuda.clone()))
            .collect()
    }

    /// Names bound once, by `name = Class(...)` (a capitalised callee, no device among its
    /// arguments).
    fn models_built(&self) -> Vec<Built<'_>> {
        let mut built: Vec<Built> = vec![];
        let mut stores: std::collections::HashMap<&str, usize> = Default::default();
        super::walk(&self.parsed.module.body, true, &mut |node, _| {
            if let AnyNodeRef::ExprName(n) = node
                && n.ctx == ExprContext::Store
            {
                *stores.entry(n.id.as_str()).or_default() += 1;
            }
            let AnyNodeRef::StmtAssign(a) = node else {
                return;
            };
            let ([Expr::Name(target)], Expr::Call(call)) = (a.targets.as_slice(), a.value.as_ref())
            else {
                return;
            };
            let class = match call.func.as_ref() {
                Expr::Name(n) => n.id.as_str(),
                Expr::Attribute(x) => x.attr.as_str(),
                _ => return,
            };
            // A whole model loaded onto the CPU counts too (`model = torch.load(p,
            // map_location="cpu")`, set T), not one loaded onto a device.
            let loaded = class == "load" && self.src[call.func.range()].ends_with("torch.load");
            let args = &self.src[call.arguments.range()];
            if !(loaded || class.starts_with(|c: char| c.is_ascii_uppercase()))
                || args.contains("device")
                || args.contains("cuda")
                || (loaded && !(args.contains("\"cpu\"") || args.contains("'cpu'")))
            {
                return;
            }
            built.push(Built {
                name: target.id.as_str(),
                target: target.range,
            });
        });
        built.retain(|b| stores.get(b.name) == Some(&1));
        built
    }

    /// Every use of the name is known, none moves it, one calls it and one is a module method.
    fn never_moved(&self, b: &Built) -> bool {
        let (mut called, mut module, mut unknown) = (false, false, false);
        super::walk(&self.parsed.module.body, true, &mut |node, stack| {
            if unknown {
                return;
            }
            let AnyNodeRef::ExprName(n) = node else {
                // `global model` / `nonlocal model`: another scope may move it.
                if let AnyNodeRef::StmtGlobal(_) | AnyNodeRef::StmtNonlocal(_) = node
                    && self.src[node.range()].contains(b.name)
                {
                    unknown = true;
                }
                return;
            };
            if n.id != b.name || n.range == b.target {
                return;
            }
            if n.ctx != ExprContext::Load {
                unknown = true;
                return;
            }
            match stack.last() {
                Some(AnyNodeRef::ExprCall(c)) if c.func.range() == n.range => called = true,
                Some(AnyNodeRef::ExprAttribute(a)) if a.value.range() == n.range => {
                    let attr = a.attr.as_str();
                    if STAYS.contains(&attr) && !MOVES.contains(&attr) {
                        module = true;
                    } else {
                        unknown = true;
                    }
                }
                _ => unknown = true,
            }
        });
        called && module && !unknown
    }

    /// Where the program uses CUDA, in words (" (CUDA in model/block.py)"), or None.
    /// None too where a project module moves itself: the model may be one of its classes.
    fn cuda_in_program(&self) -> Option<String> {
        let path = self.facts.path.as_deref();
        if let Some(path) = path
            && module_within_that(path, self.src, HOPS, &|t| SELF_MOVE.is_match(t)).is_some()
        {
            return None;
        }
        if CUDA.is_match(self.src) {
            return Some(String::new());
        }
        let path = path?;
        let file = module_within_that(path, self.src, HOPS, &|t| CUDA.is_match(t))?;
        let base = path.parent().unwrap_or(path);
        Some(format!(" (in {})", tree::shown(&file, base)))
    }
}

#[cfg(test)]
mod tests {
    use crate::port::test_support::{findings, write};

    const SCRIPT: &str = "import torch\nfrom model.net import Net\n\nnet = Net()\nnet.load_state_dict(torch.load('best.pth', map_location='cpu'))\nwith torch.no_grad():\n    print(net(torch.ones(2, 4)))\n";

    fn dev021(root: &std::path::Path, script: &str) -> Vec<String> {
        let path = write(root, "infer.py", script);
        findings("DEV021", script, Some(&path))
    }

    #[test]
    fn a_model_left_behind_by_a_program_that_uses_cuda_deep_down_is_reported() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        write(root, "model/__init__.py", "");
        write(
            root,
            "model/net.py",
            "from model.blocks import *\n\nclass Net(Block):\n    pass\n",
        );
        write(
            root,
            "model/blocks.py",
            "from model.layers import *\n\nclass Block(Layer):\n    pass\n",
        );
        let layers = "import torch\n\nclass Layer(torch.nn.Module):\n    def forward(self, x):\n        return x + self.pe.to('cuda:0')\n";
        write(root, "model/layers.py", layers);
        assert_eq!(
            dev021(root, SCRIPT),
            [
                "4: `net` is a model this script builds, calls and never moves to a device, while the program uses CUDA (in model/layers.py): on a TPU its parameters stay on the CPU"
            ]
        );
        // A whole model loaded onto the CPU is one too.
        let loaded = SCRIPT.replace(
            "net = Net()\n",
            "net = torch.load('m.pt', map_location='cpu')\n",
        );
        assert_eq!(dev021(root, &loaded).len(), 1);
        // A model that moves itself, a script that moves it, hands it on or binds it twice.
        let own = layers.replace(
            "    def forward",
            "    def setup(self):\n        self.cuda()\n\n    def forward",
        );
        write(root, "model/layers.py", &own);
        assert!(dev021(root, SCRIPT).is_empty());
        write(root, "model/layers.py", layers);
        for other in [
            SCRIPT.replace("net.load_state_dict", "net.to('cuda')\nnet.load_state_dict"),
            SCRIPT.replace("print(net(", "print(run(net, "),
            SCRIPT.replace("net = Net()\n", "net = Net()\nnet = Net()\n"),
            SCRIPT.replace("net = Net()\n", "net = Net(device='cuda')\n"),
            SCRIPT.replace("net.load_state_dict", "net.fc.load_state_dict"),
            SCRIPT.replace(
                "net = Net()\n",
                "torch.set_default_device('cuda')\nnet = Net()\n",
            ),
        ] {
            assert!(dev021(root, &other).is_empty(), "{other}");
        }
        // No CUDA anywhere in the program: a CPU program, nothing to say.
        write(
            root,
            "model/layers.py",
            &layers.replace(".to('cuda:0')", ""),
        );
        assert!(dev021(root, SCRIPT).is_empty());
    }
}
