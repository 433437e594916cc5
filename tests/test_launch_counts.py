"""The cost model's kernel count against the kernels the partition really launches per invoke, on
every zoo model and every public-corpus model (#40): the estimate reads the same plans the ops
make (split-K, Winograd, split reductions, copies per SPLIT output, folds), so a new op or plan
that launches more than it declares fails here. On this machine's device; the H200's figures are
checked by bench/launch_counts.py (bench/results/launch-counts-*.md)."""

from __future__ import annotations

import re

import pytest
from parity import random_inputs, run

import clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter

# Sizes that keep the CPU device's run short; the plans' shapes change, the rule does not.
ZOO = {
    "lenet5": {},
    "mobilenet_v1": {"size": 64},
    "mobilenet_v2": {"size": 64},
    "inception_v1": {"size": 64},
    "inception_v3": {"size": 99},
    "resnet50": {"size": 64},
    "alexnet": {"size": 99},
    "pynet": {"size": 64},
}
# The public corpus, less the models the CPU reference cannot run: selfie_segmentation's custom
# op and oww_melspectrogram's run-time shapes.
PUBLIC = [
    "audio_example1",
    "face_detection_back",
    "face_detection_short_range",
    "hand_landmark_lite",
    "iris_landmark",
    "keyword_spotting_alexa.float32",
    "keyword_spotting_mobilenetv2",
    "mww_okay_nabu",
    "oww_embedding_model",
    "palm_detection_lite",
    "pose_detection",
    "tflite_micro_speech",
]


def estimated_kernels(model: bytes) -> tuple[int, set[int]]:
    """The kernels the cost model counts, over the partitions it weighed (the figures are in the
    decline's reason on a CPU device and in a kept partition's note on a GPU), and the nodes it
    left outside them: an int8 model's small conversions at its edge, which `all` claims."""
    d = clgpu_delegate.load(partitioning="cost")
    make_interpreter(model, [d], reference=True).allocate_tensors()
    texts = {x.reason + " " + x.note for x in d.decisions()}
    counts = [int(n) for t in texts for n in re.findall(r"\((\d+) kernels\)", t)]
    assert counts, texts
    edge = {x.node for x in d.decisions() if x.reason.startswith("cost: a conversion at the")}
    return sum(counts), edge


def launched_kernels(model: bytes, skip_nodes: set[int]) -> int:
    d = clgpu_delegate.load(partitioning="all", profiling=True)
    it = make_interpreter(model, [d], reference=True)
    it.allocate_tensors()
    d.wait_ready()
    run(it, random_inputs(it.get_input_details(), 0))
    d.reset_profile()
    run(it, random_inputs(it.get_input_details(), 1))
    kernels = [k for k in d.profile().kernels if k.node not in skip_nodes]
    # A squeeze run at the end of the int8 convolution before it still counts as its own launch
    # in the estimate: its device time stays on the invoke's path (fusion/squeeze_tail.cc).
    return sum(k.count for k in kernels) + sum(
        k.count for k in kernels if k.algorithm.endswith("+SQUEEZE")
    )


@pytest.mark.parametrize("name", ZOO)
def test_zoo_estimate_counts_every_launch(name: str) -> None:
    model = zoo.path(name, **ZOO[name]).read_bytes()
    estimated, edge = estimated_kernels(model)
    assert estimated == launched_kernels(model, edge)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_model_estimate_counts_every_launch(name: str, public_model) -> None:
    model = public_model(name).read_bytes()
    estimated, edge = estimated_kernels(model)
    assert estimated == launched_kernels(model, edge)
