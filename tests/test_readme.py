"""The README quotes only what exists: every repository path it names in backticks (a file, a
folder or a glob), every `clgpu-delegate` subcommand and every option of its table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
# Paths under the repository's own folders (or the shared folder beside it).
_ROOTS = r"(?:\.\./shared/|\.ci/|docs/|bench/|tests/|src_cpp/|kernels/|clgpu_delegate/|dist/)"
PATH = re.compile(rf"`({_ROOTS}[A-Za-z0-9_./*{{}},-]*)`")
# The same paths inside a quoted command or a code block (`.venv/bin/python tests/x.py`).
IN_COMMAND = re.compile(rf"(?<![\w/.-])({_ROOTS}[A-Za-z0-9_./*{{}},-]*[A-Za-z0-9_*}}])")


def _exists(quoted: str) -> bool:
    base = ROOT if not quoted.startswith("../") else ROOT.parent
    rel = quoted.removeprefix("../")
    if rel.startswith("dist/"):  # made by .ci/wheel.sh, not in the repository
        return True
    parts = re.sub(r"\{([^}]*)\}", lambda m: "*", rel)
    return any(base.glob(parts)) or (base / rel).exists()


def test_quoted_paths_exist() -> None:
    quoted = sorted(set(PATH.findall(README)) | set(IN_COMMAND.findall(README)))
    assert len(quoted) > 10, quoted  # the pattern still finds the README's paths
    if not (ROOT.parent / "shared").is_dir():
        quoted = [q for q in quoted if not q.startswith("../shared/")]
    missing = [q for q in quoted if not _exists(q)]
    assert not missing, missing


def test_quoted_commands_exist() -> None:
    commands = sorted(set(re.findall(r"clgpu-delegate ([a-z]+)", README)))
    assert commands, "no clgpu-delegate command quoted"
    p = subprocess.run(
        [sys.executable, "-m", "clgpu_delegate", "--help"], capture_output=True, text=True, cwd="/"
    )
    assert p.returncode == 0, p.stderr
    missing = [c for c in commands if not re.search(rf"\b{c}\b", p.stdout)]
    assert not missing, missing


@pytest.mark.quick
def test_option_table_names_real_options() -> None:
    from clgpu_delegate import _core

    table = re.findall(r"^\| `([a-z_]+)`(?:, `([a-z_]+)`)? \|", README, re.M)
    named = {n for row in table for n in row if n}
    keys = set(_core.option_keys()) | {"model"}  # model: load()'s, for partitioning="measure"
    assert named == keys, named ^ keys
