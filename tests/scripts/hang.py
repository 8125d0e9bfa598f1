import signal
import sys
import time
# With an argument, ignore SIGINT (a script that will not stop on Ctrl-C).
if sys.argv[1:] == ["ignore-sigint"]:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
print("hanging", flush=True)
while True:
    time.sleep(0.1)
