"""Why NVIDIA machine code linked through libcuda (CLGPU_NV_CUBIN=1) runs slower than the
driver's own build: the registers each kernel gets from the OpenCL driver's build, from ptxas
compiling the same PTX as a whole program, and from ptxas compiling it as relocatable code
(`-c`, what a link through cuLinkAddData does).

    python bench/nv_ptx_registers.py [--models mobilenet_v2,resnet50] [--tag NAME]
        [--out bench/results]

Needs NVIDIA's OpenCL driver and ptxas (CUDA's toolkit) on PATH. The programs are those the
delegate builds for the models (bench/nv_build_probe.py collects them); each is built with
-cl-nv-verbose, whose log has the driver's ptxas lines, and its PTX (the program binary, less
the driver's metadata section, which ptxas does not read) goes through ptxas twice. Writes
nv-ptx-registers[-TAG]-<device>.json and .md.
"""

from __future__ import annotations

import argparse
import ctypes as C
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from nv_build_probe import COLD, OpenCl, collect, kernel_source  # noqa: E402

BUILD_LOG = 0x1183
DEVICE_CC_MAJOR, DEVICE_CC_MINOR = 0x4000, 0x4001  # cl_nv_device_attribute_query


def registers(log: str) -> dict[str, int]:
    """Kernel -> registers, from ptxas -v output (the driver's or the tool's)."""
    out: dict[str, int] = {}
    name = None
    for line in log.splitlines():
        m = re.search(r"Function properties for (\w+)", line) or re.search(
            r"Compiling entry function '(\w+)'", line
        )
        if m:
            name = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out[name] = int(m.group(1))
    return out


def build_log(ocl: OpenCl, prog: C.c_void_p) -> str:
    n = C.c_size_t()
    ocl.cl.clGetProgramBuildInfo(prog, ocl.device, BUILD_LOG, 0, None, C.byref(n))
    buf = C.create_string_buffer(n.value)
    ocl.cl.clGetProgramBuildInfo(prog, ocl.device, BUILD_LOG, n.value, buf, None)
    return buf.value.decode(errors="replace")


def arch(ocl: OpenCl) -> str:
    major, minor = C.c_uint(), C.c_uint()
    ocl.cl.clGetDeviceInfo(ocl.device, DEVICE_CC_MAJOR, 4, C.byref(major), None)
    ocl.cl.clGetDeviceInfo(ocl.device, DEVICE_CC_MINOR, 4, C.byref(minor), None)
    return f"sm_{major.value}{minor.value}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mobilenet_v2,resnet50")
    ap.add_argument("--tag", default="")
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args(argv)
    ptxas = shutil.which("ptxas")
    if not ptxas:
        raise SystemExit("ptxas is not on PATH (CUDA's toolkit)")
    os.environ.update(COLD)
    programs = collect(args.models.split(","))
    ocl = OpenCl()
    ctx = ocl.context()
    sm = arch(ocl)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nv-ptx-") as tmp:
        for i, (name, opts) in enumerate(programs):
            prog = ocl._program(ctx, kernel_source(name))
            flags = ("-cl-std=CL1.2 -cl-nv-verbose " + opts).encode()
            if ocl.cl.clBuildProgram(prog, 1, C.byref(ocl.device), flags, None, None):
                rows.append({"program": name, "defines": opts, "error": "build failed"})
                continue
            driver = registers(build_log(ocl, prog))
            ptx = ocl.binary(prog).rstrip(b"\0").decode(errors="replace")
            ptx = re.sub(r"\.metadata_section \{.*", "", ptx, flags=re.S)
            path = Path(tmp) / f"{i}.ptx"
            path.write_text(ptx)
            tool = {}
            for mode, extra in (("whole", []), ("relocatable", ["-c"])):
                p = subprocess.run(
                    [ptxas, f"-arch={sm}", "-v", *extra, str(path), "-o", str(path) + ".o"],
                    capture_output=True,
                    text=True,
                )
                tool[mode] = registers(p.stderr + p.stdout)
            for kernel, regs in sorted(driver.items()):
                rows.append(
                    {
                        "program": name,
                        "defines": opts.strip(),
                        "kernel": kernel,
                        "driver": regs,
                        "ptxas_whole": tool["whole"].get(kernel),
                        "ptxas_relocatable": tool["relocatable"].get(kernel),
                    }
                )
                print(rows[-1], flush=True)
    from _common import device_info, write_results

    version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    meta = {**device_info(), "models": args.models, "arch": sm,
            "ptxas": version.strip().splitlines()[-1] if version.strip() else "?"}
    cols = [
        ("program", "program"),
        ("defines", "defines"),
        ("kernel", "kernel"),
        ("driver", "registers: driver's build"),
        ("ptxas_whole", "ptxas, whole program"),
        ("ptxas_relocatable", "ptxas -c (a libcuda link)"),
        ("error", "error"),
    ]
    stem = "nv-ptx-registers" + (f"-{args.tag}" if args.tag else "")
    print(f"wrote {write_results(stem, meta, rows, cols, Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
