# TEAM001: our CUDA sync helper
import ourlib

ourlib.cuda_sync(device=dev)
ourlib.cuda_sync()

# OK
ourlib.accel_sync(dev)
cuda_sync = "not a call"
