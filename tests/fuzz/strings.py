"""Fuzzer of the strings and paths that reach C: option names and values (model_token,
serialization_dir, device, numbers...) through the Python load() and through the plain plugin's
own entry point (tflite_plugin_create_delegate, called with raw bytes: non-UTF-8 too), and the
OpenCL library path (CLGPU_OPENCL_LIBRARY) and plugin path (CLGPU_PLUGIN_PATH). Values are
random and adversarial: NUL anywhere, '..', '/', very long, non-UTF-8 bytes where the API takes
them, unicode, whitespace, numbers with junk.

Contract: each value is accepted or refused with a clear error (one line; NoDeviceError adds the
list of devices), never a crash, and nothing is written outside serialization_dir: every case
runs in a sandbox (working directory, HOME and every absolute path inside it) whose tree is
compared before and after. Cases run in child processes (a crash kills only the child; "run"
cases also build and run a model, so the program cache writes).

    .venv/bin/python tests/fuzz/strings.py --cases 5000 [--seed 1]

tests/test_fuzz_strings.py runs a short profile in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

KEYS = [
    "device",
    "precision",
    "max_delegated_partitions",
    "profiling",
    "partitioning",
    "conv_algorithm",
    "gemm_splits",
    "fuse_add",
    "serialization_dir",
    "model_token",
    "zero_copy",
    "max_alloc_bytes",
    "capture_tensors",
    "runtime",
    "cpu_warmup",
]
VALID = {
    "device": ["auto", "cpu", "0"],
    "precision": ["fp32", "fp16", "auto"],
    "max_delegated_partitions": ["0", "2"],
    "profiling": ["true", "false"],
    "partitioning": ["all", "none", "cost"],
    "conv_algorithm": ["auto", "direct", "winograd"],
    "gemm_splits": ["0", "1"],
    "fuse_add": ["on", "off"],
    "serialization_dir": ["cache", "cache/"],
    "model_token": ["m1", "model-v2.x"],
    "zero_copy": ["auto", "on", "off"],
    "max_alloc_bytes": ["1048576"],
    "capture_tensors": ["false"],
    "runtime": ["tflite_runtime"],
    "cpu_warmup": ["off"],
}
ADVERSARIAL = [
    "",
    " ",
    "\t",
    "\n",
    "\r\n",
    "..",
    ".",
    "../..",
    "/",
    "//",
    "a/../..",
    "./.",
    "~",
    "~root",
    "%s%n%x",
    "${HOME}",
    "$(id)",
    "0",
    "-1",
    "-0",
    "1e9",
    "0x10",
    "nan",
    "inf",
    "1.5",
    "+3",
    "99999999999999999999",
    "18446744073709551616",
    "12abc",
    " 12",
    "12 ",
    "fp32 ",
    "FP32",
    "gpu\x00",
    "\x00",
    "a\x00b",
    "..\x00x",
    "é",
    "ünïcödé",
    "\u202e",
    "日本語",
    "\U0001f600",
    "\udcff",
    "\ud800x",
    "a\\b",
    "'",
    '"',
    "\x7f",
    "\x1b[31m",
]
SAFE_DOTS = 3  # the sandbox is this deep: '..' beyond it would leave it


def _sanitize_path(value: str, sandbox: Path) -> str:
    """A fuzzed path kept inside the sandbox: absolute ones moved under it, at most SAFE_DOTS
    '..' components (relative ones resolve from its working directory, SAFE_DOTS deep)."""
    parts = value.split("/")
    dots = 0
    for i, p in enumerate(parts):
        if p == "..":
            dots += 1
            if dots > SAFE_DOTS:
                parts[i] = "x"
    value = "/".join(parts)
    if value.startswith("/"):
        value = str(sandbox) + value
    return value


def random_value(rng: np.random.Generator, key: str, long: int) -> Any:
    pick = int(rng.integers(7))
    if pick == 0:
        return str(rng.choice(ADVERSARIAL))
    if pick == 1:  # a valid value with junk around or inside it
        v = str(rng.choice(VALID.get(key, ["x"])))
        junk = str(rng.choice(ADVERSARIAL))
        at = int(rng.integers(len(v) + 1))
        return v[:at] + junk + v[at:]
    if pick == 2:  # random characters, any plane
        n = int(rng.integers(0, 24))
        return "".join(chr(int(c)) for c in rng.integers(1, 0x2FFFF, n) if not 0xD800 <= c < 0xE000)
    if pick == 3:
        return "x" * int(rng.integers(min(100, long), long + 1))
    if pick == 4:
        return "../" * int(rng.integers(1, 6)) + str(rng.choice(["x", "", "etc", "cache"]))
    if pick == 5:  # not a string: numbers, bools, None, bytes
        return [1, -1, 2.5, True, None, b"fp32", b"\xff\xfe", 10**30][int(rng.integers(8))]
    return str(rng.choice(VALID.get(key, ["x"])))


def random_case(rng: np.random.Generator, long: int) -> dict[str, Any]:
    surface = str(rng.choice(["python", "python", "plugin", "plugin", "run", "library"]))
    opts = {}
    for _ in range(int(rng.integers(1, 4))):
        key = str(rng.choice(KEYS)) if rng.integers(6) else str(random_value(rng, "key", 40))
        opts[key] = random_value(rng, key, long)
    if surface in ("run", "library") or rng.integers(3) == 0:
        opts.setdefault("serialization_dir", "cache")
    return {"surface": surface, "options": opts, "env": str(random_value(rng, "path", long))}


def _encode(case: dict[str, Any]) -> str:
    def enc(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray)):
            return {"bytes": list(v)}
        if isinstance(v, str):
            return {"str": [ord(c) for c in v]}  # lone surrogates survive
        return v

    return json.dumps(
        {
            "surface": case["surface"],
            "env": enc(case["env"]),
            "options": [[enc(k), enc(v)] for k, v in case["options"].items()],
        }
    )


@dataclass
class StringFuzz:
    root: Path
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sandbox = self.root / "box"
        self.cwd = self.sandbox / "a" / "b" / "cwd"  # SAFE_DOTS levels under the sandbox
        self.worker: subprocess.Popen[str] | None = None

    def _env(self, extra: dict[str, str]) -> dict[str, str]:
        env = dict(os.environ) | {"HOME": str(self.sandbox / "home"), "CLGPU_CPU_WARMUP": "0"}
        return env | extra

    def _reset(self) -> None:
        shutil.rmtree(self.sandbox, ignore_errors=True)
        (self.sandbox / "home").mkdir(parents=True)
        self.cwd.mkdir(parents=True)

    def _tree(self) -> set[str]:
        return {str(p) for p in self.root.rglob("*")}

    def _child(self, fresh: bool, env: dict[str, str]) -> subprocess.Popen[str]:
        if fresh or self.worker is None or self.worker.poll() is not None:
            cmd = [sys.executable, str(Path(__file__).resolve().parent / "strings_child.py")]
            p = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=self.cwd,
                env=self._env(env),
            )
            if fresh:
                return p
            self.worker = p
        return self.worker

    def one(self, case: dict[str, Any]) -> None:
        self._reset()
        for k, v in case["options"].items():
            if k == "serialization_dir" and isinstance(v, str):
                case["options"][k] = _sanitize_path(v, self.sandbox)
            if k == "model_token" and isinstance(v, str):
                case["options"][k] = _sanitize_path(v, self.sandbox)
        env: dict[str, str] = {}
        if case["surface"] == "library" and isinstance(case["env"], str):
            value = _sanitize_path(case["env"], self.sandbox)
            if "\x00" not in value and not any(0xD800 <= ord(c) < 0xE000 for c in value):
                env = {"CLGPU_OPENCL_LIBRARY": value, "CLGPU_PLUGIN_PATH": value}
        before = self._tree()
        fresh = case["surface"] in ("run", "library")
        p = self._child(fresh, env)
        assert p.stdin and p.stdout
        try:
            p.stdin.write(_encode(case) + "\n")
            p.stdin.flush()
            line = p.stdout.readline() if not fresh else p.communicate(timeout=300)[0]
        except (BrokenPipeError, subprocess.TimeoutExpired) as e:
            line = f"died: {e}"
        if fresh:
            p.wait()
        self._judge(case, line.strip(), p)
        self._check_tree(case, before)

    def _judge(self, case: dict[str, Any], line: str, p: subprocess.Popen[str]) -> None:
        def bump(k: str) -> None:
            self.counts[k] = self.counts.get(k, 0) + 1

        bump("cases")
        bump(f"surface_{case['surface']}")
        if not line.startswith("{"):
            try:
                p.wait(timeout=10)
                err = p.stderr.read()[-1500:] if p.stderr else ""
            except subprocess.TimeoutExpired:
                err = "(still running)"
                p.kill()  # our own child, by its handle
            bump("crashes")
            self.failures.append(f"crash on {case!r}: {line} {err}")
            self.worker = None
            return
        r = json.loads(line)
        bump(r["outcome"])
        if r["outcome"] == "refused":
            msg, kind = r["message"], r["kind"]
            lines = msg.split("\n")
            listing = "No OpenCL device matches" in lines[0] and all(
                ln.startswith("  ") or "install" in ln.lower() or not ln for ln in lines[1:]
            )
            if not msg.strip() or (len(lines) > 1 and not listing) or len(lines[0]) > 600:
                bump("unclear_errors")
                self.failures.append(f"unclear error {kind}: {msg[:800]!r} for {case!r}")
            if kind not in ("ValueError", "NoDeviceError", "FileNotFoundError", "plugin"):
                bump("unexpected_error_types")
                self.failures.append(f"{kind}: {msg[:300]!r} for {case!r}")

    def _check_tree(self, case: dict[str, Any], before: set[str]) -> None:
        sd = case["options"].get("serialization_dir")
        inside = None
        if (
            isinstance(sd, str)
            and "\x00" not in sd
            and not any(0xD800 <= ord(c) < 0xE000 for c in sd)
        ):
            with_home = sd.replace("~", str(self.sandbox / "home"), 1) if sd.startswith("~") else sd
            inside = os.path.realpath(os.path.join(self.cwd, with_home))
        # The OpenCL drivers' own caches under $HOME (PoCL's ~/.cache, NVIDIA's compute cache
        # ~/.nv) are not the delegate's writing.
        home = self.sandbox / "home"
        drivers = tuple(str(home / d) for d in (".cache", ".nv"))
        new = sorted(n for n in self._tree() - before if not n.startswith(drivers))
        outside = [
            n for n in new if inside is None or not (n == inside or n.startswith(inside + "/"))
        ]
        if outside:
            self.counts["written_outside"] = self.counts.get("written_outside", 0) + 1
            self.failures.append(
                f"written outside serialization_dir {inside}: {outside[:5]} for {case!r}"
            )

    def close(self) -> None:
        if self.worker is not None and self.worker.poll() is None:
            self.worker.kill()  # our own child, by its handle
            self.worker.wait()


def fuzz_strings(cases: int, seed: int, long: int = 4096) -> StringFuzz:
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="clgpu-strings-") as tmp:
        f = StringFuzz(Path(tmp))
        try:
            for _ in range(cases):
                f.one(random_case(rng, long))
        finally:
            f.close()
    return f


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--long", type=int, default=100_000, help="longest generated value")
    args = ap.parse_args()
    f = fuzz_strings(args.cases, args.seed, args.long)
    print(json.dumps({"command": " ".join(sys.argv), **f.counts, "failures": f.failures}, indent=1))
    return 1 if f.failures else 0


if __name__ == "__main__":
    sys.exit(main())
