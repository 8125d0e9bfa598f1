"""A slow loop of marked steps (no torch), for the dashboard's real-terminal test."""
import sys
import time

import tpuport

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
for i in range(steps):
    time.sleep(0.1)
    tpuport.step(samples=8)
    if i % 10 == 0:
        print(f"tick {i}", flush=True)
