"""The real-code harness: does a real training script, migrated with default settings, train on
a TPU target: the sim, and TorchTPU itself on XLA:CPU (xla-cpu)? Driven by bench/realcode.sh
(which prepares the sdists, the libraries and the binary).

For each script of scripts.toml: a fresh copy of its folder from the pinned sdist; first the
script as written on the host (`tpuport run --target host --cuda-on-cpu`: its CUDA runs on the
CPU where there is none; `host_args`: the baseline);
then `tpuport migrate` (findings as JSON, then `--write`, default settings: safe fixes only); the
port where the original ran, the host (`--target host --cuda-on-cpu --losses`, `host_args`, from a
copy of the migrated folder: the "original machine"), whose losses must be the baseline's bit for
bit; and the port on each target (`tpuport run --target T --losses --no-tui --max-steps N`), all through a
driver that sets up synthetic data (synthetic.py) and runs the script as __main__, with the same
seeds, so that each target's losses can be compared with the host's step by step (`losses`: the
worst relative difference). Each target's run is classified:

  ran        the port exited 0 with at least one training step recorded (on xla-cpu: with the
             optimizer's parameters on the tpu device)
  on-cpu     xla-cpu only: it trained, but the optimizer's parameters are not tpu tensors: the
             model trained on the CPU, which a TPU VM would do silently. A failure
  broken     the script fails as written on the host too: not a porting question, left out of
             the rate (the reason is recorded). A baseline that fails only because this machine
             has no CUDA (the error, or the failing line or its test, names CUDA) is not broken:
             the script was written for CUDA, and the port decides
  tpu-gap    the port met TorchTPU's own error for an op it lacks ("operator 'aten::X' is not
             implemented for TPU. Please file a feature request"), even if the script caught it
             and went on: what a TPU would do, reported correctly; the port is run again with
             --cpu-fallback (TorchTPU's enable_cpu_fallback) and that outcome recorded too
  flagged    the port failed at a line where `tpuport migrate` left a finding for manual work:
             the migration told the user (a port gap it reports)
  failed     anything else: the exception's last line is recorded
The port on the original machine is recorded apart, as `original_machine`:

  identical  it ran, and every step's loss is the baseline's, bit for bit (same seeds, same
             arguments, same driver): the migration kept what the script does where it ran
  differs    a step's loss is not the baseline's (or only one run recorded it): the first such
             step and both values
  failed     the port fails where the original runs: the exception's last line and the line
  n/a        not compared: the baseline does not run here (broken, or it needs a GPU or
             PyTorch/XLA that this machine lacks), or neither run recorded a loss
It counts in the exit status: a port that differs or fails where the original ran must be
explained by scripts.toml's `expect_original` (the default port is portable: it keeps what the
script does on its machine).

A script with `nproc = N` (a DDP script) runs as N ranks (`--nproc N`: torchrun) on the host,
for the baseline and the original machine, and on the sim; xla-cpu runs one process (TorchTPU's
tpu_dist needs one PJRT client with a global view, which no CPU PJRT plugin offers), so there the
N ranks run on the sim (tpuport says so) and, in addition, one rank of the same job (`--nproc
1`: RANK, WORLD_SIZE=1, the script's DDP path) runs on TorchTPU itself, whose optimizer's
parameters must be tpu tensors; xla-cpu's outcome is the worse of the two. Steps and losses are
rank 0's; a failing rank's exception is the job's.

Every outcome other than "ran" must be explained by scripts.toml's `expect` (`expect_xla_cpu` where
xla-cpu's outcome differs from the sim's), and every original machine other than identical or n/a
by `expect_original`, or the harness exits 1 (as it does when a script with an `expect` runs).

Writes OUT/results.jsonl (one record per script), OUT/results.md (the table the README quotes),
OUT/<id>/ (the migrated copy, the events file, the run's output) and prints the table.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
TPU_GAP = re.compile(r"operator '[^']+' is not implemented for TPU\. Please file a feature request")


def sdist_path(sdists, spec):
    name, version = spec.split("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    for f in os.listdir(sdists):
        low = re.sub(r"[-_.]+", "_", f).lower()
        if low.startswith(stem + "_" + version.replace(".", "_")) and f.endswith(".tar.gz"):
            return os.path.join(sdists, f)
    raise SystemExit("error: no sdist for %s in %s (run bench/realcode.sh, which downloads it)" % (spec, sdists))


def unpack(archive, root, dest):
    """The sdist's `root` folder (relative to its top folder) into dest."""
    with tarfile.open(archive) as t:
        for m in t.getmembers():
            if not m.isfile() or "/" not in m.name:
                continue
            rel = os.path.normpath(m.name.split("/", 1)[1])
            if rel.startswith("..") or os.path.isabs(rel):
                continue
            if root not in (".", ""):
                if not rel.startswith(root.rstrip("/") + "/"):
                    continue
                rel = rel[len(root.rstrip("/")) + 1:]
            out = os.path.join(dest, rel)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with t.extractfile(m) as src, open(out, "wb") as dst:
                dst.write(src.read())


def migrate(tpuport, folder, script):
    found = subprocess.run([tpuport, "migrate", "--isolated", "--output-format", "json", "--exit-zero", "."],
                           cwd=folder, capture_output=True, text=True)
    if found.returncode != 0:
        return None, "migrate failed (exit %d): %s" % (found.returncode, found.stderr.strip()[-500:])
    findings = json.loads(found.stdout or "[]")
    wrote = subprocess.run([tpuport, "migrate", "--isolated", "--write", "--quiet", "--exit-zero", "."],
                           cwd=folder, capture_output=True, text=True)
    if wrote.returncode != 0:
        return None, "migrate --write failed (exit %d): %s" % (wrote.returncode, wrote.stderr.strip()[-500:])
    fixed, left, manual_lines = {}, {}, []
    for f in findings:
        bucket = fixed if f["fix_class"] == "safe" and f["edits"] else left
        if bucket is left:
            manual_lines.append([os.path.normpath(f["path"]), f["line"], f["rule"]])
        if os.path.normpath(f["path"]) != os.path.normpath(script):
            continue  # counted for the script itself; the rest of its folder is migrated too
        bucket[f["rule"]] = bucket.get(f["rule"], 0) + 1
    return {"fixed": fixed, "left": left, "manual_lines": manual_lines}, None


def events_summary(path):
    steps, exception, logs, losses, devices = 0, None, [], {}, {}
    try:
        with open(path) as f:
            for line in f:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e.get("type") == "step":
                    steps = max(steps, int(e.get("step", 0)))
                    if isinstance(e.get("loss"), (int, float)):
                        losses[int(e["step"])] = float(e["loss"])
                    for d, n in (e.get("param_devices") or {}).items():
                        devices[d] = devices.get(d, 0) + int(n)
                elif e.get("type") in ("exception", "run_end") and e.get("exception"):
                    exception = e.get("exception")
                elif e.get("type") == "log" and e.get("stream") == "tpuport":
                    logs.append(e.get("line", ""))
    except OSError:
        pass
    return steps, exception, logs, losses, devices


def loss_agreement(host, port):
    """The worst relative difference between two runs' losses over the steps both recorded."""
    common = sorted(set(host) & set(port))
    if not common:
        return None
    return max(abs(port[s] - host[s]) / max(abs(host[s]), 1e-12) for s in common)


def one_line(exception, output):
    if exception:
        msg = (exception.get("message") or "").strip().splitlines()
        return "%s: %s" % (exception.get("type"), msg[0] if msg else "")
    # The script's last words, before tpuport's summary.
    summary = ("tpuport", "steps:", "compiles:", "memory:", "host syncs:", "events:", "$ ")
    lines = [l for l in output.strip().splitlines() if l.strip() and not l.lstrip().startswith(summary)]
    return lines[-1].strip() if lines else ""


def run_one(entry, a):
    sid = entry["id"]
    work = os.path.join(a.out, sid)
    shutil.rmtree(work, ignore_errors=True)
    folder = os.path.join(work, "src")
    os.makedirs(folder)
    unpack(sdist_path(a.sdists, entry["sdist"]), entry.get("root", "."), folder)
    script = os.path.join(folder, entry["script"])
    rec = {"id": sid, "sdist": entry["sdist"], "script": os.path.join(entry.get("root", "."), entry["script"]),
           "expect": entry.get("expect")}
    if not os.path.isfile(script):
        rec.update(outcome="failed", why="harness: %s is not in the sdist" % rec["script"])
        return rec
    steps_limit = int(entry.get("steps", a.steps))
    host_args = entry.get("host_args", [re.sub(r"^tpu(?=$|:\d+$)", "cuda", x) for x in entry.get("args", [])])
    # The baseline: the script as written, on the host, from a copy of its folder.
    base = os.path.join(work, "host")
    shutil.copytree(folder, base)
    host = launch(a, entry, base, host_args, "host", steps_limit, os.path.join(work, "host"),
                  flags=["--cuda-on-cpu"], nproc=entry.get("nproc"))
    rec["host"] = {k: host[k] for k in ("exit", "steps", "seconds")}
    port, err = migrate(a.tpuport, folder, entry["script"])
    if err:
        rec.update(outcome="failed", why="port: " + err)
        return rec
    manual_lines = port.pop("manual_lines")
    rec["migrate"] = port
    needs_cuda = host["exit"] != 0 and asks_for_cuda(host["exception"], base)
    if needs_cuda:
        rec["host"]["needs_cuda"] = True  # written for CUDA, and this machine has none: the port decides
    broken = not needs_cuda and (host["exit"] != 0 or host["steps"] == 0)
    if broken or needs_cuda:
        rec["original_machine"] = {"outcome": "n/a", "why": "the original does not run here (%s)" % (
            "it needs a GPU or PyTorch/XLA" if needs_cuda else "it fails as written")}
    else:
        rec["original_machine"] = original_machine(a, entry, folder, work, host_args, steps_limit, host)
    rec["targets"] = {}
    for target in a.targets:
        t = on_target(a, entry, folder, work, target, steps_limit, manual_lines)
        if broken:
            t.update(outcome="broken", why="as written, on the host: " + (
                one_line(host["exception"], host["output"]) if host["exit"] != 0 else "no training step"))
        t["losses"] = loss_agreement(host["losses"], t.pop("loss_values"))
        rec["targets"][target] = t
    return rec


def original_machine(a, entry, folder, work, host_args, steps_limit, host):
    """The port where the original ran (the host, its CUDA on the CPU), from a copy of the migrated
    folder (files one run writes must not reach another), with the baseline's arguments, driver
    and seeds: identical, differs (the first step and both values) or failed (why)."""
    copy = os.path.join(work, "port-host")
    shutil.copytree(folder, copy)
    run = launch(a, entry, copy, host_args, "host", steps_limit, os.path.join(work, "port-on-host"),
                 flags=["--cuda-on-cpu"], nproc=entry.get("nproc"))
    m = {"exit": run["exit"], "steps": run["steps"], "seconds": run["seconds"]}
    if run["exit"] == 124:
        m.update(outcome="failed", why="timed out after %ss (steps: %d)" % (a.timeout, run["steps"]))
    elif run["exit"] != 0 or run["steps"] == 0:
        why = one_line(run["exception"], run["output"]) if run["exit"] != 0 else "exited 0 without a training step"
        at = frames_in(run["exception"], copy)[-1:]
        if at:
            why += " (at %s:%d)" % (os.path.relpath(at[0][0], copy), at[0][1])
        m.update(outcome="failed", why=why)
    elif not host["losses"] and not run["losses"]:
        m.update(outcome="n/a", why="neither run recorded a loss")
    else:
        diff = first_difference(host["losses"], run["losses"])
        if diff is None:
            m.update(outcome="identical", steps_compared=len(host["losses"]))
        else:
            step, o, p = diff
            m.update(outcome="differs", step=step, original=o, port=p,
                     why="step %d: original %s, port %s" % (step, _loss(o), _loss(p)))
    return m


def _loss(v):
    return "no loss" if v is None else repr(v)


def first_difference(original, port):
    """The first step whose losses are not the same number, bit for bit, or that only one run
    recorded: (step, original, port), or None."""
    for step in sorted(set(original) | set(port)):
        o, p = original.get(step), port.get(step)
        same = o is not None and p is not None and (o == p or (math.isnan(o) and math.isnan(p)))
        if not same:
            return step, o, p
    return None


def on_target(a, entry, migrated, work, target, steps_limit, manual_lines):
    """The port's run on one target (in its own copy of the migrated folder, so that files one
    run writes do not meet the next), classified. A DDP script (`nproc`) on xla-cpu: its ranks
    run on the sim (xla-cpu runs one process), and one rank of the job runs on TorchTPU itself."""
    t = run_on(a, entry, migrated, work, target, target, steps_limit, manual_lines, entry.get("nproc"))
    if entry.get("nproc") and target == "xla-cpu":
        one = run_on(a, entry, migrated, work, target, target + "-rank", steps_limit, manual_lines, 1)
        t["ranks_on"] = "sim"
        t["one_rank"] = {k: one.get(k) for k in ("outcome", "why", "exit", "steps", "param_devices")}
        # The one-rank job shards the data otherwise than the baseline's N ranks: no loss to compare.
        t["loss_values"] = {}
        note = "%d ranks on the sim (xla-cpu runs one process): %s; one rank (--nproc 1) on TorchTPU: %s" % (
            entry["nproc"], t["outcome"], one["outcome"])
        whys = ["ranks: " + t["why"]] if t.get("why") else []
        whys += ["one rank: " + one["why"]] if one.get("why") else []
        if t["outcome"] == "ran" and one["outcome"] != "ran":
            t["outcome"] = one["outcome"]
        t["why"] = "; ".join([note] + whys)
    return t


def run_on(a, entry, migrated, work, target, name, steps_limit, manual_lines, nproc):
    folder = os.path.join(work, name + "-src")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(migrated, folder)
    run = launch(a, entry, folder, entry.get("args", []), target, steps_limit, os.path.join(work, name), nproc=nproc)
    t = {"exit": run["exit"], "steps": run["steps"], "seconds": run["seconds"], "loss_values": run["losses"],
         "param_devices": run["devices"]}
    exception, output = run["exception"], run["output"]
    if TPU_GAP.search(output) or (exception and TPU_GAP.search(exception.get("message") or "")):
        # Also when the script caught TorchTPU's error and went on (an engine that logs and ends).
        t.update(outcome="tpu-gap", why=TPU_GAP.search(output or exception.get("message")).group(0))
        again = launch(a, entry, folder, entry.get("args", []), target, steps_limit,
                       os.path.join(work, name + "-fallback"), flags=["--cpu-fallback"], nproc=nproc)
        ok = again["exit"] == 0 and again["steps"] > 0 and not TPU_GAP.search(again["output"])
        t["with_cpu_fallback"] = "ran" if ok else "failed"
        t["why"] += "; with --cpu-fallback (TorchTPU's enable_cpu_fallback): %s" % t["with_cpu_fallback"]
    elif run["exit"] == 0 and run["steps"] > 0:
        if target == "xla-cpu" and nproc in (None, 1) and "tpu" not in run["devices"]:
            where = ", ".join("%d on %s" % (n, d) for d, n in sorted(run["devices"].items())) or "no optimizer seen"
            t.update(outcome="on-cpu", why="trained, but the optimizer's parameters are not on tpu (%s)" % where)
        else:
            t["outcome"] = "ran"
    elif run["exit"] == 124:
        t.update(outcome="failed", why="timed out after %ss (steps: %d)" % (a.timeout, run["steps"]))
    elif run["exit"] == 0:
        t.update(outcome="failed", why="exited 0 without a training step")
    else:
        at = flagged_at(exception, folder, manual_lines)
        if at:
            t.update(outcome="flagged", why="%s (at %s:%d, left for manual work: %s)" % (one_line(exception, output), *at))
        else:
            t.update(outcome="failed", why=one_line(exception, output))
    return t


def launch(a, entry, folder, args, target, steps_limit, stem, flags=(), nproc=None):
    """Run the script (through a synthetic-data driver) on a target, as `nproc` ranks if given;
    what came of it (rank 0's steps and losses; the first failing rank's exception)."""
    script = os.path.join(folder, entry["script"])
    driver = stem + "-driver.py"
    with open(driver, "w") as f:
        f.write("import sys\nsys.path.insert(0, %r)\nimport synthetic\n" % HERE)
        f.write("synthetic.run(%r, %r, setups=%r)\n" % (script, args, entry.get("setups", [])))
    events = stem + ("-ranks" if nproc else "-events.jsonl")
    shutil.rmtree(events, ignore_errors=True)
    ranks = ["--nproc", str(nproc)] if nproc else []
    cmd = [a.tpuport, "run", "--target", target, *flags, *ranks, "--losses", "--no-tui", "--python", a.python,
           "--events", events, "--max-steps", str(steps_limit), "--timeout", str(a.timeout), driver]
    env = dict(os.environ)
    env["PYTHONPATH"] = a.site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("MPLBACKEND", "agg")
    t = time.time()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    seconds = round(time.time() - t, 1)
    output = proc.stdout + proc.stderr
    with open(stem + "-output.txt", "w") as f:
        f.write("$ %s\n\n%s" % (" ".join(cmd), output))
    if nproc:
        per_rank = [events_summary(os.path.join(events, "rank%d.jsonl" % r)) for r in range(nproc)]
        _, _, _, losses, devices = per_rank[0]
        steps = min(r[0] for r in per_rank)
        exception = next((r[1] for r in per_rank if r[1]), None)
    else:
        steps, exception, _logs, losses, devices = events_summary(events)
    return {"exit": proc.returncode, "steps": steps, "seconds": seconds, "exception": exception, "output": output,
            "losses": losses, "devices": devices}


def frames_in(exception, folder):
    """(file, line) of the traceback's frames in the script's folder."""
    tb = (exception or {}).get("traceback") or ""
    root = os.path.normpath(folder) + os.sep
    return [(os.path.normpath(p), int(n)) for p, n in re.findall(r'File "([^"]+)", line (\d+)', tb)
            if os.path.normpath(p).startswith(root)]


def deciding_lines(path, line):
    """The line, and the lines of the tests of the asserts and the if/while statements whose
    body holds it: what decided that the failing line ran (`if not torch.cuda.is_available():
    raise ...`)."""
    import ast

    lines = {line}
    try:
        with open(path) as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, ValueError):
        return lines
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            inside = node.lineno <= line <= (node.end_lineno or line)
        elif isinstance(node, (ast.If, ast.While)) and node.body:
            # Only the branch the test being true runs (an `else` ran because it was false).
            inside = node.lineno <= line <= (node.body[-1].end_lineno or line)
        else:
            continue
        if inside:
            test = node.test
            lines.update(range(test.lineno, (test.end_lineno or test.lineno) + 1))
    return lines


def flagged_at(exception, folder, manual_lines):
    """A frame of the port's traceback where `tpuport migrate` left a finding for manual work: on
    the failing line, or in the test that decided it ran."""
    left = {(os.path.normpath(os.path.join(folder, p)), line): rule for p, line, rule in manual_lines}
    for path, line in frames_in(exception, folder):
        for n in sorted(deciding_lines(path, line)):
            rule = left.get((path, n))
            if rule:
                return os.path.relpath(path, folder), n, rule
    return None


def asks_for_cuda(exception, folder):
    """Whether the baseline failed because this machine has no CUDA (or no PyTorch/XLA, for a
    torch_xla script): the error says so, or the failing line or the test that decided it names
    CUDA (`assert torch.cuda.is_available()`)."""
    msg = ((exception or {}).get("message") or "")
    if re.search(r"NVIDIA driver|not compiled with CUDA|No CUDA GPUs|CUDA driver|PyTorch XLA|torch_xla", msg):
        return True
    for path, line in frames_in(exception, folder)[-1:]:
        try:
            with open(path) as f:
                source = f.read().splitlines()
        except OSError:
            continue
        if any("cuda" in source[n - 1].lower() for n in deciding_lines(path, line) if 0 < n <= len(source)):
            return True
    return False


OUTCOMES = ("ran", "on-cpu", "broken", "tpu-gap", "flagged", "failed")
# Losses within this relative difference of the host's count as agreeing (bf16-class TPU matmuls
# over a few steps; `tpuport check`'s default rtol).
LOSS_RTOL = 1e-2


def expected(r, target):
    """The failure scripts.toml expects on a target (xla-cpu: `expect_xla_cpu` where given, where
    "ran" says it runs there although it fails on the sim), or None."""
    why = r.get("expect_xla_cpu") if target == "xla-cpu" and r.get("expect_xla_cpu") else r.get("expect")
    return None if why == "ran" else why


ORIGINAL_MACHINE = ("identical", "differs", "failed", "n/a")


def original_cell(r):
    m = r.get("original_machine") or {}
    outcome = m.get("outcome")
    if outcome == "differs":
        return "DIFFERS (step %d)" % m["step"]
    if outcome == "failed":
        return "FAILED"
    return outcome or "-"


def table(records, targets):
    head = "| script | sdist | port: fixed / left | original machine | " + " | ".join(
        "%s | losses (%s)" % (t, t) for t in targets) + " | s (host / %s) | why |" % " / ".join(targets)
    rows = [head, "|" + " --- |" * (5 + 2 * len(targets) + 1)]
    for r in records:
        m = r.get("migrate") or {}
        fixed = sum((m.get("fixed") or {}).values())
        left = sum((m.get("left") or {}).values())
        cells, whys, secs = [], [], [str((r.get("host") or {}).get("seconds", "-"))]
        for t in targets:
            x = (r.get("targets") or {}).get(t) or {"outcome": r.get("outcome", "failed"), "why": r.get("why")}
            cells.append(x["outcome"])
            cells.append("-" if x.get("losses") is None else "%s %.1e" % (
                "agree" if x["losses"] <= LOSS_RTOL else "DIFFER", x["losses"]))
            secs.append(str(x.get("seconds", "-")))
            why = x.get("why") or ""
            if expected(r, t) and x["outcome"] != "ran":
                why = (why + " — " if why else "") + "expected: " + expected(r, t)
            if why and (t == targets[0] or why != whys[-1][1] if whys else True):
                whys.append((t, why))
        why = "; ".join("%s: %s" % (t, w) for t, w in whys) if len(targets) > 1 else "; ".join(w for _, w in whys)
        om = r.get("original_machine") or {}
        if om.get("outcome") in ("differs", "failed"):
            expect = " — expected: " + r["expect_original"] if r.get("expect_original") else ""
            why = "original machine: %s%s%s" % (om.get("why", ""), expect, "; " + why if why else "")
        rows.append("| %s | %s | %d / %d | %s | %s | %s | %s |" % (
            r["id"], r["sdist"], fixed, left, original_cell(r), " | ".join(cells), " / ".join(secs),
            why.replace("|", "\\|")))
    rows.append("")
    om = [(r.get("original_machine") or {}).get("outcome", "n/a") for r in records]
    om_count = {k: om.count(k) for k in ORIGINAL_MACHINE}
    compared = len(records) - om_count["n/a"]
    rows.append("original machine: %d of the %d scripts compared compute the original's losses bit for bit where "
                "it ran (the host, CUDA on the CPU) after the default migration (%.0f %%); %d compute other "
                "losses, %d fail there; %d not compared (the original does not run here, or no loss was "
                "recorded)." % (om_count["identical"], compared, 100.0 * om_count["identical"] / max(compared, 1),
                                om_count["differs"], om_count["failed"], om_count["n/a"]))
    for t in targets:
        outs = [((r.get("targets") or {}).get(t) or {"outcome": r.get("outcome", "failed")})["outcome"] for r in records]
        count = {k: outs.count(k) for k in OUTCOMES}
        valid = len(records) - count["broken"]
        trained = "trained on the tpu device" if t == "xla-cpu" else "ran"
        rows.append("%s: %d of the %d scripts that run as written on the host %s after the default migration "
                    "(%.0f %%); %d trained on the CPU, %d failed as a TPU would (TorchTPU's error for an op it "
                    "lacks), %d where the migration left manual work, %d otherwise; %d of %d scripts fail as "
                    "written and are left out." % (t, count["ran"], valid, trained, 100.0 * count["ran"] / max(valid, 1),
                                                   count["on-cpu"], count["tpu-gap"], count["flagged"], count["failed"],
                                                   count["broken"], len(records)))
    return "\n".join(rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tpuport", required=True)
    p.add_argument("--python", required=True, help="the torch venv's python")
    p.add_argument("--site", required=True, help="folder with the scripts' other libraries")
    p.add_argument("--sdists", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--targets", default="sim,xla-cpu", help="comma-separated: sim, xla-cpu")
    p.add_argument("ids", nargs="*", help="only these scripts")
    a = p.parse_args()
    a.targets = [t for t in a.targets.split(",") if t]
    with open(os.path.join(HERE, "scripts.toml"), "rb") as f:
        entries = tomllib.load(f)["script"]
    if a.ids:
        unknown = set(a.ids) - {e["id"] for e in entries}
        if unknown:
            raise SystemExit("error: no script %s in scripts.toml" % ", ".join(sorted(unknown)))
        entries = [e for e in entries if e["id"] in a.ids]
    os.makedirs(a.out, exist_ok=True)
    records = []
    for e in entries:
        print("== %s (%s %s)" % (e["id"], e["sdist"], e["script"]), file=sys.stderr, flush=True)
        r = run_one(e, a)
        r["expect_xla_cpu"] = e.get("expect_xla_cpu")
        r["expect_original"] = e.get("expect_original")
        om = r.get("original_machine")
        if om:
            print("   original machine: %s%s" % (om["outcome"], ": " + om["why"] if om.get("why") else ""),
                  file=sys.stderr, flush=True)
        for t, x in (r.get("targets") or {}).items():
            print("   %s: %s%s" % (t, x["outcome"], ": " + x["why"] if x.get("why") else ""), file=sys.stderr, flush=True)
        if not r.get("targets"):
            print("   %s%s" % (r["outcome"], ": " + r["why"] if r.get("why") else ""), file=sys.stderr, flush=True)
        records.append(r)
    with open(os.path.join(a.out, "results.jsonl"), "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    md = table(records, a.targets)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    def outcomes(r):
        ts = r.get("targets") or {t: {"outcome": r.get("outcome", "failed")} for t in a.targets}
        return [(t, x["outcome"]) for t, x in ts.items()]

    unexplained = ["%s (%s)" % (r["id"], t) for r in records for t, o in outcomes(r) if o != "ran" and not expected(r, t)]
    surprising = ["%s (%s)" % (r["id"], t) for r in records for t, o in outcomes(r) if o == "ran" and expected(r, t)]
    # The original machine: a port that differs or fails where the original ran.
    original = [((r.get("original_machine") or {}).get("outcome"), r) for r in records]
    unexplained += ["%s (original machine)" % r["id"] for o, r in original
                    if o in ("differs", "failed") and not r.get("expect_original")]
    surprising += ["%s (original machine)" % r["id"] for o, r in original
                   if o == "identical" and r.get("expect_original")]
    if unexplained:
        print("unexplained failures (say why in scripts.toml `expect`, or fix): %s" % ", ".join(unexplained), file=sys.stderr)
    if surprising:
        print("ran, but scripts.toml expects a failure (drop its `expect`): %s" % ", ".join(surprising), file=sys.stderr)
    return 1 if unexplained or surprising else 0


if __name__ == "__main__":
    sys.exit(main())
