def inner():
    raise ValueError("bad value in the script")
inner()
