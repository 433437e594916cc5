"""Child process of the string fuzzer (strings.py): reads one JSON case per line on stdin, runs it
and prints one JSON line: {"outcome": "accepted"} or {"outcome": "refused", "kind": ...,
"message": ...}. Surfaces: "python" (clgpu_delegate.load), "plugin" (the plugin library's
tflite_plugin_create_delegate called through ctypes with raw bytes), "run" (load, then a small
model through the interpreter, so the program cache writes), "library" (the parent set
CLGPU_OPENCL_LIBRARY and CLGPU_PLUGIN_PATH to the fuzzed path)."""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

REPORT = ctypes.CFUNCTYPE(None, ctypes.c_char_p)


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and "bytes" in v:
        return bytes(v["bytes"])
    if isinstance(v, dict) and "str" in v:
        return "".join(chr(c) for c in v["str"])
    return v


def _raw(v: Any) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return str(v).encode("utf-8", "surrogatepass")  # a lone surrogate: bytes that are no UTF-8


def _plugin(opts: list[tuple[Any, Any]]) -> dict[str, Any]:
    import clgpu_delegate

    lib = ctypes.CDLL(clgpu_delegate.plugin_path())
    lib.tflite_plugin_create_delegate.restype = ctypes.c_void_p
    lib.tflite_plugin_destroy_delegate.argtypes = [ctypes.c_void_p]
    n = len(opts)
    keys = (ctypes.c_char_p * n)(*[_raw(k) for k, _ in opts])
    values = (ctypes.c_char_p * n)(*[_raw(v) for _, v in opts])
    reports: list[str] = []
    cb = REPORT(lambda m: reports.append(m.decode("utf-8", "replace")))
    d = lib.tflite_plugin_create_delegate(keys, values, ctypes.c_size_t(n), cb)
    if d:
        lib.tflite_plugin_destroy_delegate(d)
        return {"outcome": "accepted"}
    msg = reports[0] if len(reports) == 1 else f"{len(reports)} reports: {reports}"
    return {"outcome": "refused", "kind": "plugin", "message": msg}


def _model() -> bytes:
    from clgpu_delegate.modelgen import ModelBuilder

    b = ModelBuilder(seed=3)
    x = b.input("x", (1, 6, 6, 3))
    b.output(b.conv2d(x, b.rand((4, 3, 3, 3)), b.rand((4,)), activation="RELU"))
    return b.build()


def _run(opts: dict[str, Any]) -> None:
    import clgpu_delegate
    from clgpu_delegate.runtime import make_interpreter

    d = clgpu_delegate.load(**(opts | {"partitioning": "all"}))
    it = make_interpreter(_model(), [d])
    it.allocate_tensors()
    it.invoke()


def one(case: dict[str, Any]) -> dict[str, Any]:
    opts = [(_decode(k), _decode(v)) for k, v in case["options"]]
    surface = case["surface"]
    try:
        if surface == "plugin":
            return _plugin(opts)
        import clgpu_delegate

        kwargs = {str(k): v for k, v in opts}
        if surface == "library":
            clgpu_delegate.plugin_path()
        if surface in ("run", "library"):
            _run(kwargs)
        else:
            clgpu_delegate.load(**kwargs).close()
        return {"outcome": "accepted"}
    except Exception as e:  # noqa: BLE001 - every refusal is an outcome the parent judges
        return {"outcome": "refused", "kind": type(e).__name__, "message": str(e)}


def main() -> None:
    for line in sys.stdin:
        print(json.dumps(one(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()
