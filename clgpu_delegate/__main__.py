"""Command line: `python -m clgpu_delegate devices | inspect MODEL`."""

from __future__ import annotations

import argparse
import sys

from ._errors import ClgpuError, MissingExtraError, NativeExtensionMissing


def _cmd_devices(args: argparse.Namespace) -> int:
    from .devices import devices, format_table

    devs = devices(probe_fp16=not args.no_probe)
    if not devs:
        print(
            "No OpenCL platform found. Install a GPU driver with OpenCL, or "
            "apt-get install ocl-icd-libopencl1 pocl-opencl-icd for a CPU device."
        )
        return 1
    print(format_table(devs))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from .report import format_report, inspect_model

    opts = dict(kv.split("=", 1) for kv in args.option)
    print(
        format_report(inspect_model(args.model, runtime=args.runtime, device=args.device, **opts))
    )
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import format_report, plot_report, run_benchmark, write_json

    opts = dict(kv.split("=", 1) for kv in args.option)
    report = run_benchmark(
        args.model_path or args.model,
        size=args.size,
        runs=args.runs,
        threads=args.threads,
        runtime=args.runtime,
        profile=args.profile,
        device=args.device,
        precision=args.precision,
        partitioning=args.partitioning,
        **opts,
    )
    print(format_report(report))
    if args.check_precision:
        from .precision import check_precision

        model = args.model_path or str(
            __import__("clgpu_delegate.modelgen.zoo", fromlist=["path"]).path(
                args.model or "mobilenet_v2", **({"size": args.size} if args.size else {})
            )
        )
        print()
        print(check_precision(model, runtime=args.runtime, device=args.device).table())
    if args.json:
        write_json(report, args.json)
    if args.plot:
        plot_report(report, args.plot)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clgpu_delegate", description="OpenCL GPU delegate for TFLite / LiteRT"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("devices", help="list OpenCL devices")
    p.add_argument("--no-probe", action="store_true", help="skip the FP16 compile probe")
    p.set_defaults(func=_cmd_devices)
    p = sub.add_parser("inspect", help="show which nodes of a model would be delegated")
    p.add_argument("model")
    p.add_argument("--device", default="auto")
    p.add_argument("--runtime", choices=["tflite_runtime", "ai_edge_litert"], default=None)
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra delegate option",
    )
    p.set_defaults(func=_cmd_inspect)
    p = sub.add_parser("bench", help="benchmark a model: stock TFLite CPU vs the delegate")
    p.add_argument("model_path", nargs="?", help="a .tflite file (default: --model)")
    p.add_argument("--model", default=None, help="a built-in model (default mobilenet_v2)")
    p.add_argument("--size", type=int, default=None, help="input size for scalable models")
    p.add_argument("--precision", default="fp32")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--partitioning",
        default="cost",
        choices=["cost", "all", "none", "measure"],
        help="which nodes to claim; measure: time the plans first, run the fastest",
    )
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument("--runtime", choices=["tflite_runtime", "ai_edge_litert"], default=None)
    p.add_argument("--profile", action="store_true", help="print the top ops of the delegate")
    p.add_argument(
        "--check-precision",
        action="store_true",
        help="also report per-node fp32 / fp16 error against the CPU",
    )
    p.add_argument("--json", default=None, help="write the report as JSON")
    p.add_argument("--plot", default=None, help="write a PNG bar chart")
    p.add_argument("-o", "--option", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=_cmd_bench)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (
        ClgpuError,
        NativeExtensionMissing,
        MissingExtraError,
        ValueError,
        FileNotFoundError,
    ) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
