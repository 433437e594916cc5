"""The delegate's public surface: options and their errors, the ABI it
observes in each runtime, threads, lifetime and shutdown order, the load_delegate plugin,
and `python -m clgpu_delegate inspect`."""

from __future__ import annotations

import re
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import tflite
from parity import CONV_ALGORITHMS, CPU_OP, check_parity, compare, cpu_op, random_inputs, run

import clgpu_delegate
from clgpu_delegate._native import core
from clgpu_delegate.modelgen import ModelBuilder
from clgpu_delegate.runtime import interpreter_module, make_interpreter

OPTION_KEYS = [
    "device",
    "precision",
    "max_delegated_partitions",
    "profiling",
    "partitioning",
    "conv_algorithm",
]


def conv_model(seed: int = 0, shape: tuple[int, ...] = (1, 9, 9, 3)) -> bytes:
    b = ModelBuilder(seed=seed)
    x = b.input("x", shape)
    y = b.conv2d(x, b.rand((6, 3, 3, shape[-1])), b.rand((6,)), activation="RELU")
    b.output(b.conv2d(y, b.rand((4, 3, 3, 6)), stride=2))
    return b.build()


def reference_outputs(model: bytes, runtime: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    ref = make_interpreter(model, None, runtime=runtime, reference=True)
    ref.allocate_tensors()
    return run(ref, inputs)


# ---- options -------------------------------------------------------------------------------


def test_unknown_option_names_the_valid_keys() -> None:
    with pytest.raises(ValueError) as err:
        clgpu_delegate.load(no_such_option=1)
    assert "no_such_option" in str(err.value)
    for key in OPTION_KEYS:
        assert key in str(err.value)


@pytest.mark.parametrize(
    ("option", "value", "valid"),
    [
        ("precision", "fp64", ["fp32"]),
        ("precision", "", ["fp32"]),
        ("partitioning", "some", ["all"]),
        (
            "conv_algorithm",
            "fft",
            CONV_ALGORITHMS,
        ),
        ("max_delegated_partitions", -1, []),
        ("max_delegated_partitions", "two", []),
        ("profiling", "maybe", []),
        ("device", "", []),
    ],
)
def test_invalid_option_value(option: str, value: object, valid: list[str]) -> None:
    with pytest.raises(ValueError) as err:
        clgpu_delegate.load(**{option: value})
    assert option in str(err.value)
    for v in valid:
        assert v in str(err.value)


@pytest.mark.parametrize(
    "options",
    [
        {"device": "auto"},
        {"device": 0},
        {"device": "cpu"},
        {"profiling": True},
        {"max_delegated_partitions": 3},
        {"partitioning": "all"},
        {"conv_algorithm": "winograd"},
    ],
)
def test_valid_options_work(options: dict, runtime: str) -> None:
    if options.get("device") == "cpu" and not any(
        d.type == "cpu" for d in clgpu_delegate.devices(probe_fp16=False)
    ):
        pytest.skip("no OpenCL CPU device here")
    check_parity(conv_model(), runtime, expect_delegated="all", **options)


def test_device_by_name_substring() -> None:
    dev = clgpu_delegate.devices(probe_fp16=False)[0]
    with clgpu_delegate.load(device=dev.name[:6]) as delegate:
        assert delegate.device.name == dev.name
        assert "device=" in repr(delegate)


def test_unknown_device_lists_the_available_ones() -> None:
    with pytest.raises(clgpu_delegate.NoDeviceError) as err:
        clgpu_delegate.load(device="no-such-device-xyz")
    assert "no-such-device-xyz" in str(err.value)
    for dev in clgpu_delegate.devices(probe_fp16=False):
        assert dev.name in str(err.value)


# Failures at creation, prepare, allocation and invoke: test_faults.py (the driver fails them,
# through the OpenCL shim, in a child process).


# ---- the ABI observed in each runtime ------------------------------------------------------


def _abi_model() -> tuple[bytes, dict[int, tuple[str, dict[str, str]]]]:
    """Every claimed op with distinctive params, and the params each node was built with."""
    b = ModelBuilder(seed=31)
    x = b.input("x", (1, 11, 13, 3))
    y = b.conv2d(
        x, b.rand((4, 3, 3, 3)), stride=(2, 3), dilation=(2, 1), padding="VALID", activation="RELU6"
    )
    y = b.depthwise_conv2d(
        y, b.rand((1, 3, 3, 8)), stride=(1, 2), depth_multiplier=2, activation="RELU_N1_TO_1"
    )
    y = b.add(y, b.rand((8,)), "RELU")
    y = b.fully_connected(y, b.rand((5, 8)), keep_num_dims=True, activation="RELU")
    y = b.transpose(y, (0, 3, 2, 1))  # (1, 5, 2, 4)
    y = b.reshape(y, (1, -1, 4), resolve=False)
    y = b.squeeze(b.expand_dims(y, 3), (-1,))
    b.output(y)
    expected = {
        0: ("CONV_2D", {"padding": "2", "stride": "3,2", "act": "3", "dilation": "1,2"}),
        1: (
            "DEPTHWISE_CONV_2D",
            {
                "padding": "1",
                "stride": "2,1",
                "depth_multiplier": "2",
                "act": "2",
                "dilation": "1,1",
            },
        ),
        2: ("ADD", {"act": "1"}),
        3: ("FULLY_CONNECTED", {"act": "1", "weights_format": "0", "keep_num_dims": "1"}),
        4: ("TRANSPOSE", {}),
        5: ("RESHAPE", {"new_shape": "1,-1,4", "num_dimensions": "3"}),
        6: ("EXPAND_DIMS", {}),
        7: ("SQUEEZE", {"squeeze_dims": "-1", "num_squeeze_dims": "1"}),
    }
    return b.build(), expected


def test_abi_layout_declarations() -> None:
    layout = core().abi_layout()
    # The sizes of shared/research/tflite-abi.md (both runtimes, non-static-memory layout).
    assert layout["sizeof_tensor"] == 112
    assert layout["sizeof_node"] == 80
    assert layout["sizeof_registration"] == 88
    assert layout["sizeof_registration_passed"] >= layout["sizeof_registration"]
    assert layout["sizeof_delegate"] == 56
    assert layout["offsetof_delegate_flags"] == 40
    assert layout["sizeof_delegate_params"] == 32
    assert layout["sizeof_context"] >= 200
    # TfLiteSparsity (TfLiteTensor::sparsity) and its TfLiteDimensionMetadata, read by DENSIFY's
    # folding: tests/test_densify.py reads every field of them in both runtimes.
    assert layout["offsetof_tensor_sparsity"] == 96
    assert layout["sizeof_sparsity"] == 32
    assert layout["sizeof_dimension_metadata"] == 24


def test_struct_layout_observed_in_runtime(runtime: str) -> None:
    model, expected = _abi_model()
    r = check_parity(model, runtime, expect_delegated="all")
    abi = r.delegate.abi()
    layout = core().abi_layout()
    assert abi.node_to_registration == layout["sizeof_node"] == 80
    assert abi.node_stride == layout["sizeof_node"] + layout["sizeof_registration"] == 168
    graph = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0)
    assert abi.tensors_size >= graph.TensorsLength()
    assert abi.nodes_seen == graph.OperatorsLength() == len(expected)

    read = {}
    for line in abi.params_read:
        m = re.fullmatch(r"node (\d+) (\w+) ?(.*)", line)
        assert m, line
        params = dict(kv.split("=", 1) for kv in m.group(3).split() if "=" in kv)
        read[int(m.group(1))] = (m.group(2), params)
    for node, (op, params) in expected.items():
        assert read[node][0] == op
        assert {k: read[node][1].get(k) for k in params} == params, (node, read[node])


def test_struct_layout_same_in_both_runtimes() -> None:
    from conftest import RUNTIMES, _importable

    model, _ = _abi_model()
    seen = []
    for rt in RUNTIMES:
        if not _importable(rt):
            pytest.skip(f"{rt} is not installed")
        delegate = clgpu_delegate.load()
        make_interpreter(model, [delegate], runtime=rt, reference=True)
        abi = delegate.abi().to_dict()
        # tensors_size differs: 2.14's builtin conv adds temporaries (im2col) at init.
        abi.pop("tensors_size")
        seen.append(abi)
    assert seen[0] == seen[1]


def test_invokes_build_no_programs(
    runtime: str, transfer: dict, request: pytest.FixtureRequest
) -> None:
    # Programs are built when the partition is prepared (allocate_tensors); invokes only enqueue.
    delegate = clgpu_delegate.load(**transfer)
    interp = make_interpreter(conv_model(seed=8), [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    # The program cache is per device and process. Nothing is compiled during invoke. Under
    # zero-copy the first invoke re-binds kernels to TFLite's now-allocated tensor memory
    # (cached programs, no compile); after it, invokes neither build nor look up programs.
    prepared = delegate.stats()
    inputs = random_inputs(interp.get_input_details(), 0)
    run(interp, inputs)
    first = delegate.stats()
    assert first.programs_built == prepared.programs_built, (prepared, first)
    for _ in range(3):
        run(interp, inputs)
    stats = delegate.stats()
    assert (stats.programs_built, stats.program_cache_hits) == (
        first.programs_built,
        first.program_cache_hits,
    ), f"programs looked up or built during invoke: {first} -> {stats}"
    assert stats.invokes == 4 and stats.prepares == 1 and stats.kernels_created == 1


# ---- threads and sharing -------------------------------------------------------------------


def test_two_interpreters_two_threads(runtime: str, transfer: dict) -> None:
    models = [conv_model(seed=1), conv_model(seed=2, shape=(2, 7, 11, 5))]
    interps, delegates, cases = [], [], []
    for model in models:
        delegate = clgpu_delegate.load(**transfer)
        interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
        interp.allocate_tensors()
        assert delegate.delegated_nodes() == [0, 1]
        ins = [random_inputs(interp.get_input_details(), seed) for seed in range(3)]
        cases.append([(x, reference_outputs(model, runtime, x)) for x in ins])
        interps.append(interp)
        delegates.append(delegate)
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(i: int) -> None:
        try:
            start.wait()
            for it in range(15):
                inputs, expected = cases[i][it % 3]
                compare(run(interps[i], inputs), expected, 1e-4, None, f" thread {i} loop {it}")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hangs"
    assert not errors, errors[0]
    assert [d.stats().invokes for d in delegates] == [15, 15]


def test_one_delegate_two_interpreters(runtime: str) -> None:
    # Supported: each interpreter gets its own partition kernels from the shared delegate.
    delegate = clgpu_delegate.load()
    models = [conv_model(seed=3), conv_model(seed=4, shape=(1, 6, 8, 2))]
    interps = []
    for model in models:
        interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
        interp.allocate_tensors()
        interps.append(interp)
    assert delegate.stats().kernels_created == 2
    for _ in range(2):
        for model, interp in zip(models, interps, strict=True):
            inputs = random_inputs(interp.get_input_details(), 7)
            compare(run(interp, inputs), reference_outputs(model, runtime, inputs), 1e-4, None)


def test_close_before_the_interpreter_is_done(runtime: str) -> None:
    model = conv_model()
    delegate = clgpu_delegate.load()
    interp = make_interpreter(model, [delegate], runtime=runtime, reference=True)
    interp.allocate_tensors()
    delegate.close()
    delegate.close()  # idempotent
    inputs = random_inputs(interp.get_input_details(), 1)
    compare(run(interp, inputs), reference_outputs(model, runtime, inputs), 1e-4, None)
    with pytest.raises(clgpu_delegate.ClgpuError, match="closed"):
        delegate.decisions()
    with pytest.raises(clgpu_delegate.ClgpuError, match="closed"):
        make_interpreter(model, [delegate], runtime=runtime)


def test_drop_delegate_reference_then_gc(runtime: str) -> None:
    import gc

    model = conv_model()
    interp = make_interpreter(model, [clgpu_delegate.load()], runtime=runtime, reference=True)
    interp.allocate_tensors()
    gc.collect()
    inputs = random_inputs(interp.get_input_details(), 2)
    expected = reference_outputs(model, runtime, inputs)
    compare(run(interp, inputs), expected, 1e-4, None)
    del interp
    gc.collect()


SHUTDOWN_SCRIPTS = {
    # Module-level globals: the interpreter and the delegate die at interpreter shutdown in
    # whatever order Python picks; the delegate's destroy may come first.
    "globals": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT)
        interp.allocate_tensors(); interp.invoke()
    """,
    "globals_reverse_names": """
        z_interp = None
        a_delegate = clgpu_delegate.load()
        z_interp = make_interpreter(MODEL, [a_delegate], runtime=RT)
        z_interp.allocate_tensors(); z_interp.invoke()
    """,
    "close_then_exit": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT)
        interp.allocate_tensors(); delegate.close(); interp.invoke()
    """,
    "del_delegate_first": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT)
        interp.allocate_tensors()
        del delegate; gc.collect(); interp.invoke(); interp.invoke()
    """,
    "del_interpreter_first": """
        delegate = clgpu_delegate.load()
        interp = make_interpreter(MODEL, [delegate], runtime=RT)
        interp.allocate_tensors(); interp.invoke()
        del interp; gc.collect(); print(delegate.stats())
    """,
    "plugin_globals": """
        plugin = interpreter_module(RT).load_delegate(clgpu_delegate.plugin_path(),
                                                      {"precision": "fp32"})
        interp = make_interpreter(MODEL, [plugin], runtime=RT)
        interp.allocate_tensors(); interp.invoke()
    """,
    "plugin_del_first": """
        plugin = interpreter_module(RT).load_delegate(clgpu_delegate.plugin_path(), {})
        interp = make_interpreter(MODEL, [plugin], runtime=RT)
        interp.allocate_tensors()
        del plugin; gc.collect(); interp.invoke()
    """,
    "cycle_with_interpreter": """
        class Holder:
            pass
        h = Holder()
        h.self = h
        h.delegate = clgpu_delegate.load()
        h.interp = make_interpreter(MODEL, [h.delegate], runtime=RT)
        h.interp.allocate_tensors(); h.interp.invoke()
        del h
    """,
}


@pytest.mark.parametrize("case", SHUTDOWN_SCRIPTS)
def test_shutdown_order(case: str, runtime: str, run_python, tmp_path: Path) -> None:
    (tmp_path / "model.tflite").write_bytes(conv_model())
    code = (
        textwrap.dedent("""
        import gc
        import clgpu_delegate
        from clgpu_delegate.runtime import interpreter_module, make_interpreter
        MODEL = open("model.tflite", "rb").read()
        RT = {rt!r}
    """).format(rt=runtime)
        + textwrap.dedent(SHUTDOWN_SCRIPTS[case])
        + "\nprint('DONE')\n"
    )
    p = run_python(code)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert "DONE" in p.stdout
    assert "Traceback" not in p.stderr, p.stderr


# ---- the plugin (load_delegate) ------------------------------------------------------------


def test_plugin_runs_a_conv_model(runtime: str) -> None:
    mod = interpreter_module(runtime)
    plugin = mod.load_delegate(clgpu_delegate.plugin_path(), {"precision": "fp32"})
    model = conv_model(seed=5, shape=(2, 10, 9, 3))
    interp = make_interpreter(model, [plugin], runtime=runtime, reference=True)
    interp.allocate_tensors()
    ops = [op["op_name"] for op in interp._get_ops_details()]
    assert ops.count("DELEGATE") == 1, ops  # both convs in one delegated partition
    for seed in range(2):
        inputs = random_inputs(interp.get_input_details(), seed)
        compare(run(interp, inputs), reference_outputs(model, runtime, inputs), 1e-4, None)


def test_plugin_options(runtime: str) -> None:
    # max_delegated_partitions through the plugin's string options: conv | CUMSUM | conv.
    b = ModelBuilder(seed=6)
    x = b.input("x", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)))
    y = cpu_op(b, y)
    y = b.conv2d(y, b.rand((4, 3, 3, 4)))
    b.output(y)
    model = b.build()
    mod = interpreter_module(runtime)
    for options, partitions in (
        ({}, 2),
        ({"max_delegated_partitions": "1", "device": "0", "profiling": "true"}, 1),
    ):
        plugin = mod.load_delegate(clgpu_delegate.plugin_path(), options)
        interp = make_interpreter(model, [plugin], runtime=runtime, reference=True)
        interp.allocate_tensors()
        ops = [op["op_name"] for op in interp._get_ops_details()]
        assert ops.count("DELEGATE") == partitions, (options, ops)
        inputs = random_inputs(interp.get_input_details(), 0)
        compare(run(interp, inputs), reference_outputs(model, runtime, inputs), 1e-4, None)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"bogus": "1"}, ["bogus", *OPTION_KEYS]),
        ({"precision": "fp64"}, ["precision", "fp32"]),
        ({"max_delegated_partitions": "-2"}, ["max_delegated_partitions"]),
        ({"device": "no-such-device-xyz"}, ["no-such-device-xyz", "Available"]),
    ],
)
def test_plugin_bad_options_raise_value_error(
    options: dict, words: list[str], runtime: str
) -> None:
    mod = interpreter_module(runtime)
    with pytest.raises(ValueError) as err:
        mod.load_delegate(clgpu_delegate.plugin_path(), options)
    for w in words:
        assert w in str(err.value)


# ---- python -m clgpu_delegate inspect ------------------------------------------------------


def test_inspect_cli(runtime: str, run_python, tmp_path: Path) -> None:
    b = ModelBuilder(seed=7)
    x = b.input("x", (1, 8, 8, 3))
    y = b.conv2d(x, b.rand((4, 3, 3, 3)), activation="RELU")  # 0 GPU
    y = b.conv2d(y, b.rand((4, 3, 3, 4)), b.input("bias", (4,)))  # 1 CPU: run-time bias
    y = cpu_op(b, y)  # 2 CPU: op not supported
    y = b.add(y, b.rand((4,)))  # 3 GPU
    b.output(y)
    path = tmp_path / "model.tflite"
    path.write_bytes(b.build())
    p = run_python(["-m", "clgpu_delegate", "inspect", str(path), "--runtime", runtime])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "delegated 2 of 4 nodes in 2 partition(s)" in out, out
    rows = {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)\s+(\S.*)$", out, re.M)}
    assert re.match(r"CONV_2D\s+(GPU|OpenCL)", rows[0]), rows  # OpenCL: not a GPU
    assert re.match(r"CONV_2D\s+CPU\s+.*bias", rows[1]), rows
    assert re.match(rf"{CPU_OP}\s+CPU\s+op not supported", rows[2]), rows
    assert re.match(r"ADD\s+(GPU|OpenCL)", rows[3]), rows


def test_inspect_cli_bad_option_and_missing_file(run_python, tmp_path: Path) -> None:
    path = tmp_path / "model.tflite"
    path.write_bytes(conv_model())
    p = run_python(["-m", "clgpu_delegate", "inspect", str(path), "-o", "precision=fp64"])
    assert p.returncode != 0
    assert "precision" in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = run_python(["-m", "clgpu_delegate", "inspect", str(tmp_path / "missing.tflite")])
    assert p.returncode != 0
    assert "Traceback" not in p.stderr, p.stderr


# ---- driver start-up: warm_up() and the process-wide context ---------------------------------


def test_warm_up_takes_the_driver_setup_off_load(run_python) -> None:
    # Fresh processes, two delegates one after the other. Without warm_up() each creates
    # the context and builds its programs (the first one's went with it); after warm_up()
    # load() finds the context ready, and the second delegate reuses the first's programs.
    # Under AddressSanitizer (.ci/sanitize.sh) the warm-up runs in the caller's thread: ASan's
    # own teardown of a thread that called into PoCL fails ("unable to unmap" its signal stack).
    code = textwrap.dedent(
        """
        import os, sys, clgpu_delegate
        from clgpu_delegate.runtime import make_interpreter
        from clgpu_delegate.modelgen import zoo
        if sys.argv[1] == "warm":
            bg = "libasan" not in os.environ.get("LD_PRELOAD", "")
            ms = clgpu_delegate.warm_up().wait() if bg else clgpu_delegate.warm_up(background=False)
        else:
            ms = 0.0
        model = zoo.build("lenet5")
        stats = []
        for _ in range(2):
            d = clgpu_delegate.load(partitioning="all")
            it = make_interpreter(model, [d], reference=True)
            it.allocate_tensors(); it.invoke()
            stats.append(d.stats())
            del it, d
        print(ms, stats[0].driver_setup_us, *(
            getattr(s, k) for s in stats for k in ("programs_built", "program_cache_hits")))
        """
    )
    cold = run_python(["-c", code, "cold"])
    warm = run_python(["-c", code, "warm"])
    assert cold.returncode == 0 and warm.returncode == 0, cold.stderr + warm.stderr
    _, cold_setup, built0, hits0, built1, hits1 = map(float, cold.stdout.split())
    assert cold_setup > 0 and built0 > 0 and (built1, hits1) == (built0, hits0), cold.stdout
    warm_ms, warm_setup, built0, hits0, built1, hits1 = map(float, warm.stdout.split())
    assert warm_ms > 0 and warm_setup < warm_ms * 1e3 / 4, warm.stdout
    assert built0 > 0 and built1 == built0 and hits1 > hits0, warm.stdout  # nothing rebuilt


def test_warm_up_errors_like_load() -> None:
    with pytest.raises(clgpu_delegate.NoDeviceError, match="no-such-device"):
        clgpu_delegate.warm_up("no-such-device", background=False)
    w = clgpu_delegate.warm_up("no-such-device")
    assert w.wait(timeout=60) is None and w.done
    assert isinstance(w.error, clgpu_delegate.NoDeviceError)
    assert clgpu_delegate.warm_up(background=False) >= 0.0
