"""The bench scripts some tests exercise: bench/ is not a package, so a test loads a script from
its file (a checkout without bench/ skips those tests)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec and spec.loader, name
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
