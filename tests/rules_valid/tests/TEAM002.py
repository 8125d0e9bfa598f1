# TEAM002: the launcher's device
import ourlib

ourlib.launch(job, device="gpu")

# OK
ourlib.launch(job, device="cpu")
print("gpu")
