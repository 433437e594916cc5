"""What the test_faults*.py tests share: the models, the OpenCL shim (a C file compiled per
test session) and the programs they run in child processes (real files, run by path)."""
