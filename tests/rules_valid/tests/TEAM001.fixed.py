# TEAM001: our CUDA sync helper
import ourlib

ourlib.accel_sync(dev)
ourlib.accel_sync()

# OK
ourlib.accel_sync(dev)
cuda_sync = "not a call"
