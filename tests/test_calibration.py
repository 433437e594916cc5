"""The cost model's device figures (src_cpp/delegate/calibration.cc): measured once per device
in a process, kept in serialization_dir for the next one, the constants with
CLGPU_CALIBRATION=off. PoCL is a CPU device, measured here only with CLGPU_CALIBRATION=force."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

import clgpu_delegate

FIGURES = ("kernel_us", "copy_us", "sync_us", "gbps", "mapped_gbps", "gflops")

# Prints the calibration fields of two delegates created one after the other; argv[1], when
# given, is their serialization_dir.
LOAD_TWICE = """
import json, sys, clgpu_delegate
extra = {"serialization_dir": sys.argv[1]} if len(sys.argv) > 1 else {}
out = []
for _ in range(2):
    s = clgpu_delegate.load(partitioning="cost", **extra).stats()
    out.append({k: getattr(s, k) for k in dir(s) if k.startswith("calibration_")})
print(json.dumps(out))
"""


def _load_twice(run_python, cache: Path | None = None) -> list[dict]:
    """The two delegates' figures. A busy 2-core host can make PoCL's slopes implausible in
    all three of the calibration's tries (it then uses its constants and writes no file: one
    full test run in several did): such a process is run again, twice at most."""
    args = ["-c", LOAD_TWICE] + ([str(cache)] if cache else [])
    for _ in range(3):
        out = run_python(args, env={"CLGPU_CALIBRATION": "force"})
        assert out.returncode == 0, out.stderr
        figures = json.loads(out.stdout)
        if figures[0]["calibration_source"] != "constants":
            break
    return figures


def _assert_sane(c: dict) -> None:
    for name in FIGURES:
        v = c[f"calibration_{name}"]
        assert isinstance(v, float) and math.isfinite(v) and v > 0, (name, c)
    assert c["calibration_gbps"] < 1e4 and c["calibration_gflops"] < 1e6, c
    assert c["calibration_mapped_gbps"] < 1e4, c
    assert c["calibration_kernel_us"] < 1e5 and c["calibration_sync_us"] < 1e6, c


def _calibration_file(cache: Path) -> Path:
    files = list(cache.glob("calibration-*.txt"))
    assert len(files) == 1, files
    return files[0]


def test_measured_once_then_reused_in_the_process(run_python) -> None:
    first, second = _load_twice(run_python)
    assert first["calibration_source"] == "measured", first
    _assert_sane(first)
    assert second["calibration_source"] == "cache", second
    assert {k: v for k, v in second.items() if k != "calibration_source"} == {
        k: v for k, v in first.items() if k != "calibration_source"
    }


def test_a_new_process_reads_the_file(run_python, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first, _ = _load_twice(run_python, cache)
    assert first["calibration_source"] == "measured", first
    path = _calibration_file(cache)
    # A value no measurement gives, so the next process can only have read it from the file.
    text = path.read_text()
    assert "\nsync_us " in text, text
    lines = [("sync_us 1234.5" if ln.startswith("sync_us ") else ln) for ln in text.splitlines()]
    path.write_text("\n".join(lines) + "\n")
    again, cached = _load_twice(run_python, cache)
    assert again["calibration_source"] == "file", again
    assert again["calibration_sync_us"] == 1234.5, again
    assert cached["calibration_source"] == "cache" and cached["calibration_sync_us"] == 1234.5


@pytest.mark.parametrize("damage", ["corrupt", "implausible", "huge", "symlink", "older"])
def test_a_bad_file_is_ignored_and_rewritten(run_python, tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    _load_twice(run_python, cache)
    path = _calibration_file(cache)
    good = path.read_text()
    target = tmp_path / "elsewhere.txt"
    if damage == "corrupt":
        path.write_bytes(good.encode()[: len(good) // 2] + b"\x00garbage")
    elif damage == "implausible":
        path.write_text(good.replace("\nsync_us ", "\nsync_us -"))
    elif damage == "older":  # format 3 had no mapped transfers: its figures are not ours
        path.write_text(good.replace("calibration 4\n", "calibration 3\n"))
    elif damage == "huge":
        path.write_text(good + "# padding\n" * 100_000)
    else:
        target.write_text(good)
        path.unlink()
        path.symlink_to(target)
    first, _ = _load_twice(run_python, cache)
    assert first["calibration_source"] == "measured", first
    _assert_sane(first)
    assert not path.is_symlink() and path.stat().st_size < 4096
    assert path.read_text().startswith("clgpu_delegate calibration 4\n")
    assert "\nsync_us " in path.read_text() and "garbage" not in path.read_text()
    if damage == "symlink":
        assert target.read_text() == good  # the link was replaced, not written through


# A delegate's figures before and after a close decision's refinement, then a second delegate's
# after its own (argv[1]: serialization_dir).
REFINE = """
import json, sys, clgpu_delegate
def figures(d):
    s = d.stats()
    return {k: getattr(s, k) for k in dir(s) if k.startswith("calibration_")}
d = clgpu_delegate.load(partitioning="cost", serialization_dir=sys.argv[1])
out = [figures(d)]
d._native._refine_calibration()
out.append(figures(d))
d2 = clgpu_delegate.load(partitioning="cost", serialization_dir=sys.argv[1])
d2._native._refine_calibration()
out.append(figures(d2))
print(json.dumps(out))
"""


def _refine(run_python, cache: Path, mode: str = "force") -> list[dict]:
    out = run_python(["-c", REFINE, str(cache)], env={"CLGPU_CALIBRATION": mode})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_close_call_refines_the_kernel_figure_once_and_stores_it(
    run_python, tmp_path: Path
) -> None:
    before, after, second = _refine(run_python, tmp_path)
    assert before["calibration_source"] == "measured" and not before["calibration_refined"]
    assert after["calibration_refined"] and after["calibration_source"] == "measured", after
    _assert_sane(after)
    # Only the kernel figure is measured again.
    for name in ("copy_us", "sync_us", "gbps", "mapped_gbps", "gflops"):
        assert after[f"calibration_{name}"] == before[f"calibration_{name}"], name
    assert second == after  # once per device in a process
    # The next process reads the refined figure from the file, as it is.
    stored = dict(
        line.split(" ", 1) for line in _calibration_file(tmp_path).read_text().splitlines()
    )
    # Stored with nine significant digits.
    kernel_us = after["calibration_kernel_us"]
    assert math.isclose(float(stored["min_kernel_us"]), kernel_us, rel_tol=1e-8)
    first, again, _ = _refine(run_python, tmp_path)
    assert first["calibration_source"] == "file" and not first["calibration_refined"]
    assert math.isclose(first["calibration_kernel_us"], kernel_us, rel_tol=1e-8)
    assert again == first


def test_the_constants_are_not_refined(run_python, tmp_path: Path) -> None:
    before, after, _ = _refine(run_python, tmp_path, mode="off")
    assert before["calibration_source"] == "constants" and after == before


def test_off_uses_the_constants(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CLGPU_CALIBRATION", "off")
    s = clgpu_delegate.load(partitioning="cost", serialization_dir=str(tmp_path)).stats()
    assert s.calibration_source == "constants"
    assert (s.calibration_kernel_us, s.calibration_copy_us, s.calibration_sync_us) == (7.5, 2, 40)
    assert s.calibration_gbps is None and s.calibration_gflops is None
    assert s.calibration_mapped_gbps is None
    assert not list(tmp_path.glob("calibration-*"))


def test_a_cpu_device_is_not_measured_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CLGPU_CALIBRATION", raising=False)
    d = clgpu_delegate.load(partitioning="cost")
    if d.device.type == "gpu":
        pytest.skip("checks the CPU-device rule")
    assert d.stats().calibration_source == "constants"


def test_figures_are_only_measured_for_the_cost_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLGPU_CALIBRATION", "force")
    assert clgpu_delegate.load(partitioning="all").stats().calibration_source == "constants"


def test_an_unknown_mode_warns_and_loads(run_python) -> None:
    code = "import clgpu_delegate; print(clgpu_delegate.load().stats().calibration_source)"
    out = run_python(code, env={"CLGPU_CALIBRATION": "sometimes", "CLGPU_PARTITIONING": None})
    assert out.returncode == 0, out.stderr
    assert "CLGPU_CALIBRATION=sometimes is not one of auto, off, force" in out.stderr
    assert out.stdout.strip() in ("measured", "constants"), out.stdout


# The estimate's transfer figure for a delegate of each zero_copy mode, beside its calibration.
TRANSFERS = """
import json, re, clgpu_delegate
from clgpu_delegate.modelgen import zoo
from clgpu_delegate.runtime import make_interpreter
out = {}
for mode in ("on", "off"):
    d = clgpu_delegate.load(partitioning="cost", zero_copy=mode)
    make_interpreter(zoo.build("lenet5"), [d], reference=True).allocate_tensors()
    texts = {x.reason for x in d.decisions() if "GB/s" in x.reason}
    s = d.stats()
    out[mode] = [sorted(texts), s.calibration_gbps, s.calibration_mapped_gbps]
print(json.dumps(out))
"""


def test_a_zero_copy_partition_is_charged_the_mapped_transfer_figure(run_python) -> None:
    """With zero_copy a partition moves its boundary through mapped host-pointer buffers (a
    pinned DMA on NVIDIA's driver, several times faster than pageable copies): the estimate
    charges the bandwidth measured that way, and the pageable one otherwise."""
    for _ in range(3):  # a busy host can leave the calibration on its constants (see above)
        out = run_python(["-c", TRANSFERS], env={"CLGPU_CALIBRATION": "force"})
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout)
        if got["on"][2] is not None:
            break
    for mode, (texts, gbps, mapped) in got.items():
        assert len(texts) == 1, texts
        charged = float(re.search(r"([0-9.]+) GB/s measured", texts[0]).group(1))
        assert charged == pytest.approx(mapped if mode == "on" else gbps, abs=0.051), (mode, got)
