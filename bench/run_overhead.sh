#!/usr/bin/env bash
# run_overhead.sh: what `tpuport run --no-tui` costs compared with `python script.py`.
#
#   1. step time: bench/scripts/cpu_train.py (an AdamW MLP loop on CPU) times its own steps. Each
#      round starts one copy under plain python and one under `tpuport run --no-tui`; they take
#      turns through FIFOs (blocks of 10 steps, 15 blocks each), so the machine's drift between
#      runs (+-15-25 % here) hits both alike. Goal: median step time under tpuport / under python
#      <= 1.02 (the median over rounds of each round's ratio of medians).
#   2. start-up: wall time of bench/scripts/startup.py (import torch, one op) under each, runs
#      alternating (goal: tpuport adds <= 0.3 s).
# ROUNDS=20, BENCH_BLOCKS=15 (blocks per copy) and RUNS=5 (start-up pairs) by default; TPUPORT_ARGS adds `tpuport run` options
# (e.g. --subprocess); BENCH_AA=1 runs plain python in both seats (the harness's own bias). Uses the project venv (bash scripts/bootstrap).
# Run: bash bench/run_overhead.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
RUNS="${RUNS:-5}"
ROUNDS="${ROUNDS:-20}"
export BENCH_BLOCKS="${BENCH_BLOCKS:-15}"
VENV="$(bash scripts/bootstrap | tail -1)"
PY="$VENV/bin/python"
if [[ -z "${TPUPORT_BIN:-}" ]]; then
  cargo build --release --quiet
  TPUPORT_BIN="$REPO/target/release/tpuport"
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export TPUPORT_BIN PY TMP RUNS ROUNDS
"$PY" - <<'PY'
import json, os, random, select, statistics, subprocess, time
tp, py, tmp = os.environ["TPUPORT_BIN"], os.environ["PY"], os.environ["TMP"]
runs, rounds = int(os.environ["RUNS"]), int(os.environ["ROUNDS"])
venv_env = dict(os.environ, VIRTUAL_ENV=os.path.dirname(os.path.dirname(py)))
def cmd(who, script, events):
    if who == "python" or os.environ.get("BENCH_AA"):  # BENCH_AA=1: python against python
        return [py, script]
    return [tp, "run", "--no-tui", "--target", "host", "--events", events, *os.environ.get("TPUPORT_ARGS", "").split(), script]
def wall(who, script):
    t = time.perf_counter()
    subprocess.run(cmd(who, script, os.path.join(tmp, "startup.jsonl")), env=venv_env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t
med = statistics.median
# 1. step time, baton-interleaved rounds
round_ratio, block_ratio, all_steps = [], [], {"python": [], "tpuport": []}
for r in range(rounds):
    fifos = {k: os.path.join(tmp, f"{k}{r}") for k in ("python", "tpuport", "ready")}
    for p in fifos.values():
        os.mkfifo(p)
    fds = {k: os.open(p, os.O_RDWR) for k, p in fifos.items()}
    procs, outs = {}, {}
    for who, other in (("python", "tpuport"), ("tpuport", "python")):
        outs[who] = os.path.join(tmp, f"{who}{r}.json")
        env = dict(venv_env, BENCH_OUT=outs[who], BENCH_BATON=f"{fifos[who]}:{fifos[other]}:{fifos['ready']}")
        procs[who] = subprocess.Popen(cmd(who, "bench/scripts/cpu_train.py", os.path.join(tmp, f"ev{r}.jsonl")),
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = b""
    while len(got) < 2:
        if not select.select([fds["ready"]], [], [], 300)[0] or any(p.poll() is not None for p in procs.values()):
            raise SystemExit(f"round {r}: a copy exited or hung before it was ready; run it by hand to see why")
        got += os.read(fds["ready"], 2 - len(got))
    os.write(fds["python" if r % 2 == 0 else "tpuport"], b"t")  # who goes first alternates
    for who, p in procs.items():
        if p.wait(timeout=600) != 0:
            raise SystemExit(f"round {r}: {who} copy exited with {p.returncode}")
    for fd in fds.values():
        os.close(fd)
    data = {who: json.load(open(outs[who])) for who in procs}
    for who in procs:
        all_steps[who] += data[who]["steps"]
    round_ratio.append(med(data["tpuport"]["steps"]) / med(data["python"]["steps"]))
    block_ratio += [med(t) / med(p) for p, t in zip(data["python"]["blocks"], data["tpuport"]["blocks"])]
# 2. start-up, alternating runs
start = {"python": [], "tpuport": []}
wall("python", "bench/scripts/startup.py"); wall("tpuport", "bench/scripts/startup.py")  # page cache
for i in range(runs):
    for who in ("python", "tpuport"):
        start[who].append(wall(who, "bench/scripts/startup.py"))
ratio = med(round_ratio)
sp, st = med(all_steps["python"]), med(all_steps["tpuport"])
wp, wt = med(start["python"]), med(start["tpuport"])
print(f"cores: {os.cpu_count()}; step time: {rounds} rounds, python and tpuport taking turns by blocks of 10 steps")
print(f"median step time  python {sp * 1e3:.3f} ms   tpuport {st * 1e3:.3f} ms   (all rounds pooled: ratio {st / sp:.3f})")
print(f"per-round ratios (tpuport median / python median): {' '.join(f'{v:.3f}' for v in round_ratio)}")
# A round's copies differ by more than the machine's drift (memory placement), so the spread
# between rounds is the noise; a bootstrap over rounds gives the median's 90 % interval.
rng = random.Random(0)
boot = sorted(med(rng.choices(round_ratio, k=len(round_ratio))) for _ in range(2000))
print(f"median per-round ratio {ratio:.3f}, 90 % bootstrap interval [{boot[100]:.3f}, {boot[1899]:.3f}]")
print(f"goal: median per-round ratio <= 1.02: {'MET' if ratio <= 1.02 else 'MISSED'}")
print(f"median paired-block ratio {med(block_ratio):.3f} over {len(block_ratio)} block pairs")
print(f"start-up (wall, {runs} alternating pairs)  python {wp:.3f} s   tpuport {wt:.3f} s   overhead {wt - wp:+.3f} s"
      f"  (goal <= 0.3 s: {'MET' if wt - wp <= 0.3 else 'MISSED'})")
PY
