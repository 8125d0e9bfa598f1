import ctypes
print("about to crash", flush=True)
ctypes.string_at(0)
