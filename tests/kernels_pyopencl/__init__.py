"""Parts of tests/kernels_pyopencl_check.py, the standalone pyopencl check of kernels/*.cl:
the context and numpy references (common), the checks, and the --bench timings."""
