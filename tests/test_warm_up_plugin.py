"""clgpu_delegate.warm_up() followed by the plugin library, as the README puts them side by side:
the warm-up lists the devices on a thread of its own while load_delegate() creates the plugin's
delegate, and the two copies of the code (the extension and the plugin) once started the ICD
loader at the same time: a crash in 9 of 10 runs on PoCL, or no platform found
(common/process_lock.h). Fresh processes, since only a process's first OpenCL use races."""

from __future__ import annotations

import os

import pytest

import clgpu_delegate

CHILD = """
import clgpu_delegate
clgpu_delegate.warm_up()
from {module} import load_delegate
d = load_delegate(clgpu_delegate.plugin_path(), {{"precision": "fp32"}})
print("created")
"""
MODULES = {
    "tflite_runtime": "tflite_runtime.interpreter",
    "ai_edge_litert": "ai_edge_litert.interpreter",
}
# Under the sanitizers (ASAN_OPTIONS set by .ci/sanitize.sh) each start is slower.
STARTS = 10 if os.environ.get("ASAN_OPTIONS") else 50


def test_warm_up_then_plugin_in_fresh_processes(runtime: str, run_python) -> None:
    try:
        clgpu_delegate.plugin_path()
    except FileNotFoundError:
        pytest.skip("the package was built without the plugin")
    code = CHILD.format(module=MODULES[runtime])
    for i in range(STARTS):
        p = run_python(code, timeout=120)
        assert p.returncode == 0 and "created" in p.stdout, (i, p.returncode, p.stderr[-2000:])
