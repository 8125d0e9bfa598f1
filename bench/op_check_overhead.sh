#!/usr/bin/env bash
# op_check_overhead.sh: what the sim's check for ops a TPU lacks costs (issue 13, acceptance 2:
# <= 5 % median step time on the GPT example). Each round runs examples/tpu/train_gpt.py on the
# sim twice, with the check (the default) and without it (TPUPORT_SIM_OP_CHECK=0), in alternating
# order, and compares the median step times the run summary prints (HBM-sampled steps excluded).
# The check replaces the host kernels of the ops a TPU lacks, so ops a TPU runs should pay nothing.
# ROUNDS=6 and STEPS=60 by default. Uses the project venv (bash scripts/bootstrap).
# Run: bash bench/op_check_overhead.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
ROUNDS="${ROUNDS:-6}"
STEPS="${STEPS:-60}"
VENV="$(bash scripts/bootstrap | tail -1)"
if [[ -z "${TPUPORT_BIN:-}" ]]; then
  cargo build --release --quiet
  TPUPORT_BIN="$REPO/target/release/tpuport"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export TPUPORT_BIN ROUNDS STEPS TMP VIRTUAL_ENV="$VENV"
python3 - <<'PY'
import os, re, statistics, subprocess
tp, rounds, steps, tmp = os.environ["TPUPORT_BIN"], int(os.environ["ROUNDS"]), os.environ["STEPS"], os.environ["TMP"]
def median_ms(check):
    env = dict(os.environ, TPUPORT_SIM_OP_CHECK="1" if check else "0")
    out = subprocess.run([tp, "run", "--target", "sim", "--no-tui", "--events", os.path.join(tmp, "ev.jsonl"),
                          "examples/tpu/train_gpt.py", "--steps", steps], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return float(re.search(r"step time: median ([0-9.]+) ms", out.stderr).group(1))
ratios, on, off = [], [], []
for r in range(rounds):
    order = (True, False) if r % 2 == 0 else (False, True)
    got = {c: median_ms(c) for c in order}
    on.append(got[True]); off.append(got[False])
    ratios.append(got[True] / got[False])
med = statistics.median
print(f"median step time (ms)  with the check {med(on):.2f}   without {med(off):.2f}")
print("per-round ratios (with / without): " + " ".join(f"{x:.3f}" for x in ratios))
print(f"median per-round ratio {med(ratios):.3f}   goal <= 1.05: {'MET' if med(ratios) <= 1.05 else 'MISSED'}")
PY
