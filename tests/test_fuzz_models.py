"""The model-mutation fuzzer's short profile (the long one: tests/fuzz/run.py): seeded mutants of
generated seed models (bit flips, truncation, rewired operator and opcode indices, altered
shapes, options and buffer lengths, data given to tensors that operators write, other ranks and
shapes for bias, size and other constant operands), each through the delegated interpreter and
stock TFLite in a child process. The delegate never crashes or hangs where stock TFLite survives,
both give the same outputs when both run, and it runs nothing stock TFLite refuses.

CLGPU_FUZZ_MUTANTS (default 300 per runtime), CLGPU_FUZZ_SEED (default 25) and
CLGPU_FUZZ_MODELS (a directory of .tflite seeds added to the generated ones) change the run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fuzz.run import fuzz, seed_models

from clgpu_delegate.modelgen import ModelBuilder, dynamic_range_model, quantize_model


def test_mutants_never_crash_or_differ_where_the_cpu_survives(runtime: str, tmp_path: Path) -> None:
    mutants = int(os.environ.get("CLGPU_FUZZ_MUTANTS", "300"))
    f = fuzz(
        runtime,
        mutants,
        tmp_path,
        seed=int(os.environ.get("CLGPU_FUZZ_SEED", "25")),
        models_dir=os.environ.get("CLGPU_FUZZ_MODELS"),
        timeout=120,
    )
    c = f.counts
    print(json.dumps(dict(c), indent=1))
    assert not f.failures, "\n".join(f.failures)
    assert c["mutants"] == mutants
    for bad in ("delegate_only_crashes", "delegate_only_hangs", "mismatches"):
        assert c[bad] == 0, (bad, dict(c))
    # Validation equal to the CPU's: nothing the CPU refuses runs with the delegate.
    assert c["delegate_ran_where_cpu_refused"] == 0, dict(c)
    # The mutants reach the delegate: claimed nodes, and outputs compared.
    assert c["with_delegated_nodes"] >= mutants // 5, dict(c)
    assert c["both_ran"] >= mutants // 10, dict(c)
    # The edits that rewrite the model (tests/fuzz/records.py) are part of the profile.
    log = (tmp_path / f"{runtime}-log.jsonl").read_text()
    for edit in ("produced tensor", "operand"):
        assert log.count(edit) >= mutants // 20, edit


def test_dynamic_range_models_are_no_seeds(tmp_path: Path) -> None:
    # TFLite's hybrid kernels quantize activations; the delegate computes the float model: such a
    # model's CPU outputs are no reference for a mismatch, so it is left out of the seeds.
    f = ModelBuilder(seed=3)
    x = f.input("x", (1, 8))
    f.output(f.fully_connected(x, f.rand((4, 8)), f.rand((4,), 0.1)))
    flt = f.build()
    (tmp_path / "float.tflite").write_bytes(flt)
    (tmp_path / "hybrid.tflite").write_bytes(dynamic_range_model(flt))
    (tmp_path / "dequantize.tflite").write_bytes(dynamic_range_model(flt, form="dequantize"))
    (tmp_path / "int8.tflite").write_bytes(quantize_model(flt, io="int8", seed=3))
    seeds = seed_models(str(tmp_path))
    assert {"float", "dequantize", "int8"} <= set(seeds) and "hybrid" not in seeds
