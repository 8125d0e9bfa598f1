//! DEV019/DEV010 checkpoint loads: the unit tests of `checkpoint.rs`.

use crate::port::test_support::ported as portable;

#[test]
fn torch_load_imported_by_name_or_alias_is_read() {
    let src = "import torch\nimport torch as th\nfrom torch import load\n\n\ndef build(model, p):\n    model.cuda()\n    model.load_state_dict(load(p))\n    model.load_state_dict(th.load(p))\n";
    let out = portable(src);
    assert!(
        out.contains("load(p, map_location=\"cpu\"))\n    model"),
        "{out}"
    );
    assert!(out.contains("th.load(p, map_location=\"cpu\"))"), "{out}");
}

#[test]
fn a_safetensors_load_stays_one_safetensors_knows() {
    let src = "import torch\nfrom safetensors.torch import load_file\n\n\ndef build(model, path, device):\n    model.load_state_dict(load_file(path, device=str(device)))\n    other = load_file(path, device=\"cuda\")\n    return other\n";
    let out = portable(src);
    assert!(
        out.contains("model.load_state_dict(load_file(path, device=str(device)) if str(device).split(\":\")[0] != \"tpu\" else {k: v.to(str(device)) for k, v in load_file(path).items()})"),
        "{out}"
    );
    // A literal device handed to safetensors is not made the accelerator's.
    assert!(
        out.contains("other = load_file(path, device=\"cuda\")"),
        "{out}"
    );
    // The port is stable.
    assert_eq!(portable(&out), out);
}

/// A whole object loaded and moved soon after is loaded onto that device; one moved to a
/// device bound after the load, or not moved, is left alone.
#[test]
fn a_whole_load_moved_soon_after_loads_onto_that_device() {
    let src = "import torch\n\nDEVICE = torch.device(\"cpu\")\n\n\ndef run(path, args):\n    model = torch.load(path)\n    model.eval()\n    model.to(DEVICE)\n    device = \"cuda\"\n    net = torch.load(path)\n    net = net.to(device=device)\n    n2 = torch.load(path)\n    n2.to(args.device)\n    m3 = torch.load(\n        path  # c\n    )\n    m3.to(DEVICE)\n    by_rank = torch.load(path)\n    by_rank.to(args.rank)\n    ckpt = torch.load(path)\n    later = torch.load(path)\n    d = DEVICE\n    later.to(d)\n    return model, net, ckpt, later\n";
    let out = portable(src);
    assert!(
        out.contains("model = torch.load(path, map_location=DEVICE)\n"),
        "{out}"
    );
    assert!(
        out.contains("net = torch.load(path, map_location=device)\n"),
        "{out}"
    );
    assert!(out.contains("n2 = torch.load(path)\n"), "{out}");
    assert!(out.contains("path, map_location=DEVICE  # c\n"), "{out}");
    assert!(out.contains("ckpt = torch.load(path)\n"), "{out}");
    assert!(out.contains("by_rank = torch.load(path)\n"), "{out}");
    assert!(out.contains("later = torch.load(path)\n"), "{out}");
    assert_eq!(portable(&out), out);
}

#[test]
fn an_entry_of_a_checkpoint_kept_in_a_cuda_module_is_reported() {
    let src = "import torch\n\n\ndef build(model, path):\n    sd = torch.load(path)['state_dict']\n    sd = {k[6:]: v for k, v in sd.items()}\n    model.load_state_dict(sd)\n    return model.cuda()\n";
    let found = crate::port::test_support::findings("DEV019", src, None);
    assert_eq!(found.len(), 1, "{found:?}");
    let cpu = src.replace("model.cuda()", "model");
    assert!(crate::port::test_support::findings("DEV019", &cpu, None).is_empty());
}

/// A checkpoint returned to the caller (`return torch.load(path)`) is reported as one kept.
#[test]
fn a_checkpoint_returned_by_a_cuda_module_is_reported() {
    let src = "import torch\n\n\ndef load(path):\n    try:\n        return torch.load(path)\n    except:\n        return None\n\n\ndef move(m):\n    return m.cuda()\n";
    let found = crate::port::test_support::findings("DEV019", src, None);
    assert_eq!(found.len(), 1, "{found:?}");
    let placed = src.replace("torch.load(path)", "torch.load(path, map_location=\"cpu\")");
    assert!(crate::port::test_support::findings("DEV019", &placed, None).is_empty());
}

/// A file cut off inside a `torch.load(` call (the fuzz harness's input) is reported, not a
/// panic: the call has no `)` to write `map_location` before.
#[test]
fn a_load_cut_off_at_the_end_of_the_file_does_not_panic() {
    let src = "import torch\n\n\ndef load(path, rank):\n    loc = f\"cuda:{rank}\"\n    return torch.load(p";
    let _ = crate::port::test_support::findings("DEV019", src, None);
    let _ = portable(src);
}
