#!/usr/bin/env bash
# run_overhead.sh: what `tpuport run --no-tui` costs compared with `python script.py`.
#
#   1. step time: bench/scripts/cpu_train.py (an AdamW MLP loop on CPU, 200 steps) times its own
#      steps; median step time under tpuport / under plain python (goal <= 1.02);
#   2. start-up: wall time of bench/scripts/startup.py (import torch, one op) under each
#      (goal: tpuport adds <= 0.3 s).
# Runs alternate; RUNS=9 by default (this machine's step times drift by +-10% between runs). Uses the project venv (bash scripts/bootstrap).
# Run: bash bench/run_overhead.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
RUNS="${RUNS:-9}"
VENV="$(bash scripts/bootstrap | tail -1)"
PY="$VENV/bin/python"
if [[ -z "${TPUPORT_BIN:-}" ]]; then
  cargo build --release --quiet
  TPUPORT_BIN="$REPO/target/release/tpuport"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export TPUPORT_BIN PY TMP RUNS BENCH_CORE="${BENCH_CORE:-}"
"$PY" - <<'PY'
import json, os, shutil, statistics, subprocess, time
tp, py, tmp, runs = os.environ["TPUPORT_BIN"], os.environ["PY"], os.environ["TMP"], int(os.environ["RUNS"])
# BENCH_CORE=1 pins both to one core (then tpuport's parent shares the script's core); by
# default nothing is pinned. Step times drift between runs on this machine, hence paired runs.
pin = ["taskset", "-c", os.environ["BENCH_CORE"]] if os.environ.get("BENCH_CORE") and shutil.which("taskset") else []
def plain(script, out=None):
    env = dict(os.environ, BENCH_OUT=out or "")
    t = time.perf_counter(); subprocess.run(pin + [py, script], env=env, check=True, stdout=subprocess.DEVNULL); return time.perf_counter() - t
def under(script, out=None):
    env = dict(os.environ, BENCH_OUT=out or "", VIRTUAL_ENV=os.path.dirname(os.path.dirname(py)))
    t = time.perf_counter()
    subprocess.run(pin + [tp, "run", "--no-tui", "--target", "host", "--events", os.path.join(tmp, "ev.jsonl"), script],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t
step = {"python": [], "tpuport": []}
start = {"python": [], "tpuport": []}
plain("bench/scripts/startup.py"); under("bench/scripts/startup.py")  # warm the page cache
for i in range(runs):
    for name, fn in (("python", plain), ("tpuport", under)):
        out = os.path.join(tmp, f"{name}{i}.json")
        fn("bench/scripts/cpu_train.py", out)
        step[name].append(statistics.median(json.load(open(out))["steps"]))
        start[name].append(fn("bench/scripts/startup.py"))
ms = lambda v: f"{v * 1e3:8.3f} ms"
sp, st = statistics.median(step["python"]), statistics.median(step["tpuport"])
wp, wt = statistics.median(start["python"]), statistics.median(start["tpuport"])
print(f"cores: {os.cpu_count()}, runs: {runs} alternating")
pairs = statistics.median(t / p for p, t in zip(step["python"], step["tpuport"]))
print(f"median step time  python {ms(sp)}   tpuport {ms(st)}   ratio of medians {st / sp:.3f}")
print(f"median of paired ratios (each tpuport run / the python run just before it): {pairs:.3f}  (goal <= 1.02: {'MET' if pairs <= 1.02 else 'MISSED'})")
print(f"  per-run medians: python {' '.join(f'{v * 1e3:.2f}' for v in step['python'])}")
print(f"                   tpuport {' '.join(f'{v * 1e3:.2f}' for v in step['tpuport'])}")
print(f"start-up (wall)   python {wp:8.3f} s    tpuport {wt:8.3f} s    overhead {wt - wp:+.3f} s  (goal <= 0.3 s: {'MET' if wt - wp <= 0.3 else 'MISSED'})")
PY
