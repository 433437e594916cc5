"""What a newcomer trips on first (issue "The first hour, round 2"): `measure` accepted wherever
`partitioning` is, and every error one line."""

from __future__ import annotations

import pytest

import clgpu_delegate


def test_inspect_takes_measure(run_python) -> None:
    p = run_python(["-m", "clgpu_delegate", "inspect", "lenet5", "--partitioning", "measure"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert "delegated" in p.stdout and "Traceback" not in p.stderr


def test_load_names_every_partitioning() -> None:
    with pytest.raises(ValueError) as e:
        clgpu_delegate.load(partitioning="fastest")
    msg = str(e.value)
    assert "\n" not in msg
    for name in ("cost", "all", "none", "measure"):
        assert name in msg
