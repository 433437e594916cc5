"""The public corpus's int8 models (tests/public_models.py fetches them): claimed but for the
int8 ops not implemented yet, and bit-exact against TFLite's reference kernels."""

from __future__ import annotations

import pytest
from int8_parity import check_int8_parity

# Model -> the ops left on the CPU and the partitions that leaves: with int8 MEAN and SOFTMAX
# claimed, each runs whole in one partition.
MODELS: dict[str, tuple[set[str], int]] = {
    "keyword_spotting_mobilenetv2": (set(), 1),
    "tflite_micro_speech": (set(), 1),
    "audio_example1": (set(), 1),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_public_int8_model(runtime: str, name: str, public_model) -> None:
    path = public_model(name)
    cpu_ops, partitions = MODELS[name]
    r = check_int8_parity(
        path.read_bytes(),
        runtime,
        expect_delegated=None,
        expect_partitions=partitions,
        min_fraction=1.0,
    )
    assert {d["op_name"] for d in r.decisions if not d["delegated"]} == cpu_ops
