#!/usr/bin/env python3
"""Fails on an #include that goes up the layer order of src_cpp/:

    common, tflite -> cl -> graph -> ops -> fusion -> runtime -> delegate -> python

A directory may include its own layer and those before it. Usage: check_layers.py [SRC_DIR]
(default: the repository's src_cpp). Prints one line per violation; exit 1 if any.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ORDER = {
    "common": 0,
    "tflite": 0,
    "cl": 1,
    "graph": 2,
    "ops": 3,
    "fusion": 4,
    "runtime": 5,
    "delegate": 6,
    "python": 7,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/[^"]+"')


def violations(src: Path) -> list[str]:
    out = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cc", ".cpp", ".hpp"} or not path.is_file():
            continue
        layer = path.relative_to(src).parts[0]
        if layer not in ORDER:
            out.append(f"{path}: directory {layer!r} has no place in the layer order")
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if target not in ORDER:
                out.append(f"{path}:{n}: {line.strip()}: {target!r} is not a layer")
            elif ORDER[target] > ORDER[layer]:
                out.append(
                    f"{path}:{n}: {line.strip()}: {layer}/ may not include {target}/ "
                    f"(a later layer)"
                )
    return out


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "src_cpp"
    if not src.is_dir():
        print(f"check_layers: {src} is not a directory", file=sys.stderr)
        return 2
    found = violations(src)
    for v in found:
        print(v)
    print(f"check_layers: {len(found)} upward include(s) in {src}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
