"""The device profile (src_cpp/cl/device_profile.h): vendor, architecture, capabilities and the
device-dependent choices made once from a device's OpenCL answers, and the tuning table's
lookup by its keys. Devices this machine does not have are described by their query answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import clgpu_delegate
from clgpu_delegate._native import native

ROOT = Path(__file__).resolve().parent.parent
# The source checks read the checkout (the tests copied elsewhere, e.g. onto the GPU machine, skip).
needs_checkout = pytest.mark.skipif(
    not (ROOT / "src_cpp").is_dir() or not (ROOT / "bench").is_dir(), reason="not in the checkout"
)

H200 = {"vendor": "NVIDIA Corporation", "name": "NVIDIA H200", "type": "gpu", "nv_compute": (9, 0)}
MALI = {
    "vendor": "ARM",
    "name": "Mali-G78",
    "type": "gpu",
    "host_unified_memory": True,
    "extensions": "cl_khr_fp16 cl_arm_integer_dot_product_int8",
}
ADRENO = {
    "vendor": "QUALCOMM",
    "name": "QUALCOMM Adreno(TM) 740",
    "type": "gpu",
    "host_unified_memory": True,
}
RDNA3 = {"vendor": "Advanced Micro Devices, Inc.", "name": "gfx1100", "type": "gpu"}
ARC = {
    "vendor": "Intel(R) Corporation",
    "name": "Intel(R) Arc(TM) A770 Graphics",
    "type": "gpu",
    "extensions": "cl_khr_fp16 cl_intel_subgroups cl_khr_integer_dot_product",
}
POCL = {"vendor": "AuthenticAMD", "name": "pthread-znver3-AMD EPYC", "type": "cpu"}


def profile(facts: dict, tiles: list[str] | None = None) -> dict:
    return native._device_profile(facts, tiles or [])


@pytest.mark.parametrize(
    ("facts", "vendor", "arch", "keys"),
    [
        (H200, "nvidia", "sm_90", ["nvidia/sm_90/NVIDIA H200", "nvidia/sm_90", "nvidia", "gpu"]),
        (MALI, "arm", "valhall", ["arm/valhall/Mali-G78", "arm/valhall", "arm", "gpu"]),
        ({**MALI, "name": "Mali-G52"}, "arm", "bifrost", None),
        ({**MALI, "name": "Mali-G720"}, "arm", "5th-gen", None),
        ({**MALI, "name": "Mali-T860"}, "arm", "midgard", None),
        (ADRENO, "qualcomm", "adreno7xx", None),
        (RDNA3, "amd", "gfx1100", ["amd/gfx1100/gfx1100", "amd/gfx1100", "amd", "gpu"]),
        (ARC, "intel", "xe", None),
        (POCL, "amd", "", ["cpu"]),
        ({"vendor": "Acme", "name": "X", "type": "gpu"}, "other", "", ["other", "gpu"]),
    ],
    ids=[
        "h200",
        "mali_g78",
        "mali_g52",
        "mali_g720",
        "mali_t860",
        "adreno",
        "rdna3",
        "arc",
        "pocl",
        "unknown",
    ],
)
def test_vendor_architecture_and_keys(facts, vendor, arch, keys) -> None:
    p = profile(facts)
    assert (p["vendor"], p["architecture"]) == (vendor, arch)
    if keys is not None:
        assert p["tuning_keys"] == keys


def test_choices_follow_the_device_not_its_name() -> None:
    h200, mali, arc, pocl = profile(H200), profile(MALI), profile(ARC), profile(POCL)
    # NVIDIA: pinned host-pointer buffers, one shared arena, its PTX paths.
    assert h200["zero_copy_io"] and h200["shared_arena"] and h200["nvidia_ptx"]
    # Unified memory alone earns zero copy; the portable sub-buffer arena elsewhere.
    assert mali["zero_copy_io"] and not mali["shared_arena"] and not mali["nvidia_ptx"]
    assert not arc["zero_copy_io"] and arc["subgroups"] and arc["integer_dot_product"]
    assert mali["integer_dot_product"] and not mali["subgroups"]
    for gpu in (h200, mali, arc):
        assert gpu["gpu_plans"] and gpu["auto_fp16"] and not gpu["decline_partitions"]
    # A CPU device: CPU-sized plans, fp32 under "auto", and the cost model declines.
    assert pocl["decline_partitions"] and not pocl["gpu_plans"] and not pocl["auto_fp16"]


def test_the_most_specific_key_with_an_entry_wins() -> None:
    names = ["gemm_big", "igemm", "gemm_int8", "winograd_gemm_big_wide"]
    h200, mali, rdna, pocl = (profile(f, names)["tiles"] for f in (H200, MALI, RDNA3, POCL))
    # The H200's tuned entries (bench/results/gemm-*.md; the int8 one: docs/int8.md).
    assert h200["gemm_big"] == (256, 128, 16, 16, 8, 1, 0, 4)
    assert h200["gemm_int8"][:5] == (32, 32, 8, 2, 2)
    assert h200["winograd_gemm_big_wide"] == (256, 128, 16, 16, 8, 1, 0, 4)
    # Mali: its own GEMM rows where "arm" has them, the generic GPU's elsewhere.
    assert mali["gemm_big"][:5] == (64, 64, 16, 4, 4)
    assert mali["igemm"] == rdna["igemm"]
    # AMD has no rows of its own: the generic GPU's.
    assert rdna["gemm_big"] == (128, 128, 16, 8, 8, 1, 0, 4)
    assert rdna["gemm_int8"][:5] == pocl["gemm_int8"][:5] == (32, 32, 4, 4, 4)
    # Keys that have no "_wide" entry get the generic default (the caller passes a fallback).
    assert pocl["gemm_big"][:5] == (32, 32, 16, 4, 4)


def test_every_gpu_work_group_fits_a_small_gpu() -> None:
    # Mali and Adreno allow 256 work-items per group on their oldest parts: every GEMM entry
    # the profile gives them must fit.
    names = [
        "gemm_big", "gemm", "gemm_small", "igemm", "igemm_big", "igemm_thin", "winograd_gemm",
        "winograd_gemm_big", "winograd_gemm_thin", "batch_matmul", "batch_matmul_small",
    ]  # fmt: skip
    for facts in (MALI, ADRENO):
        for name, t in profile(facts, names)["tiles"].items():
            assert (t[0] // t[3]) * (t[1] // t[4]) <= 256, (facts["name"], name, t)


def test_this_machines_devices_carry_their_profile() -> None:
    for d in clgpu_delegate.devices(probe_fp16=False):
        assert d.tuning_keys[-1] == ("gpu" if d.type == "gpu" else "cpu")
        if d.architecture:
            assert d.tuning_keys[1].endswith("/" + d.architecture)


def _tuning_table():
    from bench_scripts import load_bench

    return load_bench("tuning_table")


@needs_checkout
def test_a_tuners_winner_lands_in_the_table_it_is_built_from(tmp_path) -> None:
    # bench/tuning_table.py: the GEMM tuner's best correct row (LPAD from its options) under the
    # tuned device's "<vendor>/<architecture>" key; a wrong fast row is not taken.
    tool = _tuning_table()
    table = tmp_path / "tuning.json"
    committed = (ROOT / "src_cpp" / "ops" / "tuning.json").read_text()
    table.write_text(committed)
    results = tmp_path / "gemm.json"
    rows = [
        {
            "config": "128,128,16,8,8,1,0",
            "options": "-DLPAD=4",
            "tflops": 30.0,
            "max_rel_err": 1e-6,
        },
        {"config": "256,128,16,16,8,1,1", "options": "", "tflops": 31.0, "max_rel_err": 1e-6},
        {"config": "64,64,16,4,4,0,0", "options": "", "tflops": 99.0, "max_rel_err": 0.5},
    ]
    device = {"tuning_keys": ["amd/gfx1100/gfx1100", "amd/gfx1100", "amd", "gpu"]}
    results.write_text(json.dumps({"device": device, "rows": rows}))
    assert tool.main([str(results), "--entry", "gemm_big", "--table", str(table)]) == 0
    doc = json.loads(table.read_text())
    assert doc["tables"]["gemm"]["rows"]["amd/gfx1100"] == {"gemm_big": [256, 128, 16, 16, 8, 1, 1]}
    rows[1]["max_rel_err"] = 1.0
    results.write_text(json.dumps({"device": device, "rows": rows}))
    tool.main([str(results), "--entry", "gemm_big", "--table", str(table)])
    assert json.loads(table.read_text())["tables"]["gemm"]["rows"]["amd/gfx1100"]["gemm_big"] == [
        128,
        128,
        16,
        8,
        8,
        1,
        0,
        4,
    ]
    # Writing the value a row already has leaves the committed file as it is, byte for byte.
    table.write_text(committed)
    same = [{"config": "256,128,16,16,8,1,0", "options": "-DLPAD=4", "tflops": 1, "max_rel_err": 0}]
    results.write_text(json.dumps({"device": device, "rows": same}))
    tool.main([str(results), "--entry", "gemm_big", "--key", "nvidia", "--table", str(table)])
    assert table.read_text() == committed


@needs_checkout
def test_the_blocked_tuners_winner_is_its_best_over_every_shape(tmp_path) -> None:
    tool = _tuning_table()
    rows = [
        {"shape": "a", "config": "8,16,16,8", "tflops": 10.0, "ok": True},
        {"shape": "b", "config": "8,16,16,8", "tflops": 10.0, "ok": True},
        {"shape": "a", "config": "4,8,8,2", "tflops": 40.0, "ok": True},  # ran one shape only
        {"shape": "a", "config": "8,8,16,8", "tflops": 12.0, "ok": True},
        {"shape": "b", "config": "8,8,16,8", "tflops": 9.0, "ok": True},
    ]
    assert tool.blocked_winner(rows) == [8, 8, 16, 8]


def test_launch_costs_by_kind_only_where_they_were_fitted() -> None:
    """The cost model counts launches by kind only on the architecture their costs were fitted
    on (sm_90, bench/fit_launch_costs.py); every other device keeps the calibration's figure
    (all zero), so a device nobody measured is never costed with another's numbers."""
    h200 = profile(H200)["launch_us"]
    assert len(h200) == 4 and all(0 < us < 100 for us in h200)
    assert profile({**H200, "name": "NVIDIA H100 80GB HBM3"})["launch_us"] == h200
    for facts in (MALI, ADRENO, RDNA3, ARC, POCL, {**H200, "nv_compute": (8, 0)}):
        assert profile(facts)["launch_us"] == [0.0] * 4, facts


def test_the_int8_expand_chain_is_longer_only_where_it_was_measured() -> None:
    """The int8 GEMM folds longer expand chains than the float one only on the architecture the
    sweep ran on (sm_90, bench/results/ab-options-int8-chain-NVIDIA_H200.md); every other device
    keeps the float cap for both, and the block kernels' cap is the same everywhere."""
    h200 = profile(H200)
    assert h200["expand_chain_cap_int8"] > h200["expand_chain_cap"] > 0
    for facts in (MALI, ADRENO, RDNA3, ARC, POCL, {**H200, "nv_compute": (8, 0)}):
        p = profile(facts)
        assert p["expand_chain_cap_int8"] == p["expand_chain_cap"] == h200["expand_chain_cap"]
        assert p["block_item_products"] == h200["block_item_products"] > 0


def test_the_grid_chain_forms_only_where_they_were_measured() -> None:
    """The depthwise-separable and dense chains' grid forms (kernels/ds_chain_grid.cl,
    dense_chain_grid.cl), whose groups wait for one another through PTX's fences and L2 loads,
    have figures only on the architecture they were fitted on (sm_90,
    bench/results/ds-grid-fit-NVIDIA_H200.md, dense-grid-fit-NVIDIA_H200.md); elsewhere none, so
    the forms never run there (ops/ds_chain.cc's PlanDsGrid, ops/dense_chain.cc's
    PlanDenseChain). The dense chain's weights are bounded below the H200's 50 MB of L2."""
    h200 = profile(H200)
    assert h200["ds_grid_stage_us"] > 0 and h200["ds_grid_step_us"] > 0
    assert h200["dense_grid_stage_us"] > 0 and h200["dense_grid_gbps"] > 0
    assert 0 < h200["dense_grid_max_mb"] < 50 and h200["dense_grid_hidden_us"] >= 0
    for facts in (MALI, ADRENO, RDNA3, ARC, POCL, {**H200, "nv_compute": (8, 0)}):
        p = profile(facts)
        assert p["ds_grid_stage_us"] == p["ds_grid_step_us"] == 0, facts
        assert p["dense_grid_stage_us"] == p["dense_grid_gbps"] == p["dense_grid_max_mb"] == 0


def test_split_k_one_launch_form_only_where_its_reads_are_guaranteed() -> None:
    """The one-launch split-K form reads other work-groups' plain stores: offered where PTX's
    fence and L2 loads guarantee them (NVIDIA GPUs), not where only OpenCL 1.2's fences stand."""
    assert profile(H200)["split_k_last_max"] == 4
    for facts in (MALI, ADRENO, RDNA3, ARC, POCL):
        assert profile(facts)["split_k_last_max"] == 0, facts


def test_the_estimate_costs_the_one_launch_form_by_its_tiles_and_splits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the one-launch split-K form adds to its split kernel for the cost model: the profile's
    part per launch plus its part per partial sum that each work-item of a tile's last group reads
    back, (splits - 1) x its outputs. On the H200 two or three splits of 32 x 32 tiles, and four of
    the folded depthwise's 64 x 64 on small maps, cost less than the split's further launch (the
    profile's 5 us), four of 128 x 64 (twice the outputs per work-item) more; none past the most
    splits offered, none without a split, none where the profile has no figures."""
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "4")  # offered without the device's PTX probe
    plans = [(2, "igemm"), (3, "igemm"), (4, "igemm_dw_small"), (4, "igemm_big"), (5, "igemm")]
    plans.append((1, "igemm"))
    p = native._device_profile(H200, ["igemm", "igemm_big", "igemm_dw_small"], plans)
    us, per_sum = p["split_k_last_us"], p["split_k_last_ns_per_sum"] * 1e-3
    assert us > 0 and per_sum > 0
    want = [us + (s - 1) * p["tiles"][t][3] * p["tiles"][t][4] * per_sum for s, t in plans[:4]]
    assert p["one_launch_us"][:4] == pytest.approx(want) and p["one_launch_us"][4:] == [-1, -1]
    split_us = p["launch_us"][2]
    assert max(p["one_launch_us"][:3]) < split_us < p["one_launch_us"][3]
    monkeypatch.setenv("CLGPU_SPLITK_LAST_US", "3,0.5")
    got = native._device_profile(H200, [], [(3, "igemm")])["one_launch_us"]
    wm, wn = p["tiles"]["igemm"][3:5]
    assert got == pytest.approx([3 + 2 * wm * wn * 0.5e-3])
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "0")  # $CLGPU_SPLITK_LAST_MAX=0: never offered
    assert native._device_profile(H200, [], plans[:1])["one_launch_us"] == [-1]
    monkeypatch.delenv("CLGPU_SPLITK_LAST_US")
    monkeypatch.setenv("CLGPU_SPLITK_LAST_MAX", "4")
    for facts in (MALI, RDNA3, POCL):
        assert native._device_profile(facts, [], plans[:1])["one_launch_us"] == [-1], facts
    monkeypatch.setenv("CLGPU_SPLITK_LAST_US", "0,1")
    with pytest.raises(Exception, match="CLGPU_SPLITK_LAST_US"):
        native._device_profile(H200, [], plans[:1])
    monkeypatch.delenv("CLGPU_SPLITK_LAST_MAX")  # no device here to probe for PTX
    with pytest.raises(Exception, match="CLGPU_SPLITK_LAST_MAX"):
        native._device_profile(H200, [], plans[:1])


def test_a_folded_depthwise_gemm_splits_its_rows_finer_on_small_maps() -> None:
    """A folded depthwise's GEMM on a map where igemm_big's tiles make fewer groups than the device
    has compute units takes the profile's igemm_dw_small rows (64 x 64 on NVIDIA), keeping
    igemm_big's columns (each column of tiles computes the depthwise again); on a larger map, with
    fewer than 64 channels, or on a device without the row, the tiles it had."""
    h200 = dict(H200, compute_units=132)
    layers = [(31, 7, 64, 64), (25, 20, 172, 172), (224, 224, 64, 64), (31, 7, 48, 48)]
    p = native._device_profile(h200, ["igemm", "igemm_big", "igemm_dw_small"], dw_gemms=layers)
    big, small, plain = (p["tiles"][n][:2] for n in ("igemm_big", "igemm_dw_small", "igemm"))
    assert small == (64, 64) and small[1] == big[1] and small[0] < big[0]
    assert p["dw_gemm_tiles"] == [small, small, big, plain]
    # 112 x 112 in 128-row tiles: 98 groups, fewer than the H200's 132 units, more than 64.
    p = native._device_profile(h200, ["igemm_dw_small"], dw_gemms=[(112, 112, 64, 64)])
    assert p["dw_gemm_tiles"] == [small]
    p = native._device_profile(dict(H200, compute_units=64), [], dw_gemms=[(112, 112, 64, 64)])
    assert p["dw_gemm_tiles"] == [big]
    for facts in (MALI, RDNA3, POCL):
        p = native._device_profile(dict(facts, compute_units=64), ["igemm_big"], dw_gemms=layers)
        assert p["dw_gemm_tiles"][:2] == [p["tiles"]["igemm_big"][:2]] * 2, facts
