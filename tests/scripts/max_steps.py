"""A loop of 100 marked steps; run with --max-steps 5, it must end cleanly after the fifth, even
through the script's own `except Exception`."""
import tpuport

done = 0
try:
    for i in range(100):
        done += 1
        tpuport.step()
except Exception:
    print("the script caught the stop")
print("after the loop", done)
