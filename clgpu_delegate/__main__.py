"""Command line: `clgpu-delegate devices | models | model | inspect | bench` (or
`python -m clgpu_delegate ...`). Arguments, the model file and output paths are checked before
any work; an error is one line on stderr ("what is wrong: what to do") and exit code 2."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from . import __version__
from . import _cli_checks as checks
from ._errors import (
    ClgpuError,
    MissingExtraError,
    NativeExtensionMissing,
    require_extra,
)

# The delegate options with a flag of their own, and the flag's choices (None: free text).
PARTITIONINGS = ("cost", "all", "none", "measure")
PRECISIONS = ("fp32", "fp16", "auto")
_FLAG_CHOICES: dict[str, tuple[str, ...] | None] = {
    "device": None,
    "partitioning": PARTITIONINGS,
    "precision": PRECISIONS,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---- commands ------------------------------------------------------------------------------------


def _cmd_devices(args: argparse.Namespace) -> int:
    from .devices import devices, format_table

    devs = devices(probe_fp16=not args.no_probe)
    if not devs:
        print(
            "No OpenCL platform found. Install a GPU driver with OpenCL, or "
            "apt-get install ocl-icd-libopencl1 pocl-opencl-icd for a CPU device.",
            file=sys.stderr,
        )
        return 1
    print(format_table(devs))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    require_extra("models", "the built-in models", *checks.MODEL_EXTRA)
    print(f"{'name':<14} {'size':>5}  description (random weights, float32, batch 1)")
    for name, fn in checks.zoo_models().items():
        size, text = checks.describe(fn)
        print(f"{name:<14} {size:>5}  {text}")
    print(
        "size: the default input height and width (--size N changes it). "
        "`clgpu-delegate model NAME -o NAME.tflite` writes one."
    )
    return 0


def _cmd_model(args: argparse.Namespace) -> int:
    require_extra("models", "the built-in models", *checks.MODEL_EXTRA)
    checks.check_output(args.output, "-o")
    if args.name not in checks.zoo_models():
        raise checks.UsageError(f"unknown model {args.name!r} (`clgpu-delegate models` lists them)")
    checks.check_size(args.name, args.size)
    from .modelgen import zoo

    opts: dict[str, object] = {"size": args.size} if args.size else {}
    if args.fp16_weights:
        opts["fp16_weights"] = True
    data = zoo.path(args.name, **opts).read_bytes()
    out = Path(args.output)
    # A temporary file beside it, then a rename: no half-written model under that name.
    # Mode 0666 under the umask (usually rw-r--r--), unlike the cache's private 0600 files.
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    size = args.size or checks.describe(checks.zoo_models()[args.name])[0]
    print(f"wrote {out}: {args.name}, input {size}x{size}, {len(data) / 2**20:.1f} MB")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    model = checks.resolve_model(args.model, None, None)
    checks.check_runtime(args.runtime)
    shapes = checks.input_shapes(args.input_shape)
    opts: dict[str, Any] = checks.delegate_options(args.option, _FLAG_CHOICES)
    from .report import format_report, inspect_model

    opts["device"] = args.device
    opts["precision"] = args.precision
    if args.partitioning is not None:
        opts["partitioning"] = args.partitioning
    if not Path(model).is_file():
        from .modelgen import zoo

        model = str(zoo.path(model))
    threads = checks.threads(args.threads)
    report = inspect_model(
        model, runtime=args.runtime, input_shapes=shapes, threads=threads, **opts
    )
    print(format_report(report))
    return 0


def _cmd_bench(args: argparse.Namespace, argv: list[str]) -> int:
    require_extra("bench", "the benchmark", "tqdm", *checks.MODEL_EXTRA)
    model = checks.resolve_model(args.model_path, args.model, args.size)
    checks.check_size(model, args.size)
    checks.check_runtime(args.runtime)
    shapes = checks.input_shapes(args.input_shape)
    if shapes and not Path(model).is_file():
        raise checks.UsageError(
            "--input-shape applies to a .tflite file; a built-in model takes --size"
        )
    threads = checks.threads(args.threads)
    checks.check_output(args.json, "--json")
    checks.check_output(args.plot, "--plot")
    if args.plot:
        require_extra("plot", "--plot", "matplotlib")
    opts = checks.delegate_options(args.option, _FLAG_CHOICES)
    from .bench import format_report, plot_report, run_benchmark, write_json

    report = run_benchmark(
        model,
        size=args.size,
        runs=args.runs,
        threads=threads,
        input_shapes=shapes,
        runtime=args.runtime,
        profile=args.profile,
        device=args.device,
        precision=args.precision,
        partitioning=args.partitioning,
        **opts,
    )
    report["command"] = ["clgpu-delegate", *argv]
    print(format_report(report))
    if report.get("interrupted"):
        n = [r["runs"] for r in report["results"]]
        print(
            f"interrupted: {n[0]} CPU and {n[1]} delegate runs of {args.runs} timed",
            file=sys.stderr,
        )
        return 130
    if args.check_precision:
        from .modelgen import zoo
        from .precision import check_precision

        path = model if Path(model).is_file() else str(zoo.path(model, **_size(args.size)))
        checked = check_precision(
            path, runtime=report["runtime"], device=args.device, input_shapes=shapes, **opts
        )
        print("\nper-node error with every supported node delegated, against the CPU reference:")
        print(checked.table())
        report["check_precision"] = asdict(checked)
    if args.json:
        write_json(report, args.json)
        print(f"wrote {args.json}")
    if args.plot:
        plot_report(report, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _size(size: int | None) -> dict[str, object]:
    return {"size": size} if size else {}


# ---- the parser ----------------------------------------------------------------------------------


def _prog() -> str:
    return "python -m clgpu_delegate" if sys.argv[0].endswith("__main__.py") else "clgpu-delegate"


def _add_delegate_args(p: argparse.ArgumentParser, runtimes: list[str]) -> None:
    p.add_argument(
        "--device",
        default="auto",
        help="auto (the fastest GPU, else any OpenCL device), gpu, "
        "cpu, an index or a name substring (default: auto)",
    )
    p.add_argument(
        "--precision",
        default="fp32",
        choices=PRECISIONS,
        help="fp16: half storage, float arithmetic; auto: fp16 on GPUs (default: fp32)",
    )
    p.add_argument(
        "--runtime",
        choices=runtimes,
        default=None,
        help="the TFLite interpreter package (default: $CLGPU_RUNTIME, else the first installed)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        type=checks.input_shape,
        metavar="NAME:D1,D2",
        help="a .tflite input's shape, for a model with dynamic dimensions (e.g. "
        "serving_default_input:0:1,1280; NAME may be left out for the only input); repeatable",
    )
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        type=checks.key_value,
        metavar="KEY=VALUE",
        help="another delegate option (README, Options), e.g. -o zero_copy=off; repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    from .runtime import RUNTIMES

    prog = _prog()
    models = list(checks.zoo_models())
    listed = ", ".join(models) if models else "needs the [models] extra"
    parser = _Parser(
        prog=prog,
        description="OpenCL GPU delegate for TensorFlow Lite / LiteRT: list devices, get a "
        "model, see what the delegate runs, benchmark it against TFLite's CPU.",
        epilog=f"First steps: {prog} devices; {prog} model mobilenet_v2 -o m.tflite; "
        f"{prog} inspect m.tflite; {prog} bench m.tflite. {prog} COMMAND --help for more.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("devices", help="list the OpenCL devices")
    p.add_argument("--no-probe", action="store_true", help="skip the FP16 compile probe")

    sub.add_parser("models", help="list the built-in models")

    p = sub.add_parser("model", help="write a built-in model to a .tflite file")
    p.add_argument("name", help=f"one of: {listed}")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the .tflite to write")
    p.add_argument(
        "--size", type=checks.positive, help="input height and width (default: the model's)"
    )
    p.add_argument("--fp16-weights", action="store_true", help="FLOAT16 weights + DEQUANTIZE")

    parts = list(PARTITIONINGS)
    p = sub.add_parser("inspect", help="show which nodes the delegate runs, and why not the rest")
    p.add_argument("model", help=f"a .tflite file, or a built-in model ({listed})")
    p.add_argument(
        "--partitioning",
        choices=parts,
        default=None,
        help="cost: what the cost model keeps; all: every supported node; none; measure: the "
        "plan that timing the candidates finds fastest (default: as load(): "
        "$CLGPU_PARTITIONING, else cost)",
    )
    p.add_argument(
        "--threads",
        type=checks.positive,
        help="the interpreter's CPU threads, which the cost model weighs the device against "
        "(default: every core, as bench)",
    )
    _add_delegate_args(p, list(RUNTIMES))

    p = sub.add_parser("bench", help="benchmark a model: stock TFLite CPU against the delegate")
    p.add_argument(
        "model_path",
        nargs="?",
        metavar="MODEL",
        help="a .tflite file or a built-in model (default: --model)",
    )
    p.add_argument(
        "--model",
        choices=models or None,
        default=None,
        metavar="NAME",
        help=f"a built-in model: {listed} (default: mobilenet_v2)",
    )
    p.add_argument("--size", type=checks.positive, help="input size of a built-in model")
    p.add_argument(
        "--partitioning",
        default=None,
        choices=parts,
        help="cost: what the cost model keeps (on a CPU OpenCL device: nothing); all: every "
        "supported node; none; measure: time the plans first, run the fastest (default: as "
        "load(): $CLGPU_PARTITIONING, else cost)",
    )
    p.add_argument("--runs", type=checks.runs, default=20, help="timed runs per row (default: 20)")
    p.add_argument("--threads", type=checks.positive, help="CPU threads (default: every core)")
    p.add_argument("--profile", action="store_true", help="also print the delegate's top ops")
    p.add_argument(
        "--check-precision",
        action="store_true",
        help="also report per-node fp32 / fp16 error against the CPU (every supported node)",
    )
    p.add_argument("--json", metavar="FILE", help="write the report, with what was run, as JSON")
    p.add_argument("--plot", metavar="FILE", help="write a PNG bar chart (needs matplotlib)")
    _add_delegate_args(p, list(RUNTIMES))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "devices": _cmd_devices,
        "models": _cmd_models,
        "model": _cmd_model,
        "inspect": _cmd_inspect,
        "bench": lambda a: _cmd_bench(a, argv),
    }
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ClgpuError, ImportError, ValueError, OSError, RuntimeError) as e:
        # RuntimeError: what TFLite raises (a model its kernels refuse at invoke).
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2


def _one_line(e: BaseException) -> str:
    """The message on one line; a file error names the file."""
    if isinstance(e, OSError) and e.strerror and e.filename:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, (ClgpuError, NativeExtensionMissing, MissingExtraError)):
        return str(e).strip()  # ours: a device list after the first line is wanted
    return " ".join(str(e).split())


if __name__ == "__main__":
    sys.exit(main())
