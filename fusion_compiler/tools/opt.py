"""fusion-opt: mlir-opt for fusion_compiler; our Python passes mix with IREE's and MLIR's."""

from __future__ import annotations

import argparse
import re
import sys

from fusion_compiler import frontend, passes
from fusion_compiler.compiler import new_session
from fusion_compiler.errors import CompileError, Diagnostic, MLIRParseError
from fusion_compiler.pipeline import check_pipeline, run_pipeline
from fusion_compiler.tools import verify

_SPLIT = re.compile(r"^// -----.*$", re.MULTILINE)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fusion-opt",
        description="Run pass pipelines over MLIR. Our passes: " + ", ".join(passes.pass_names()),
    )
    p.add_argument("input", nargs="?", default="-", help="MLIR file, or - for stdin")
    p.add_argument("--pass-pipeline", default="", help="builtin.module(pass1,pass2{opt=v},...)")
    p.add_argument("-o", dest="output", default="-", help="output file (default stdout)")
    p.add_argument("--split-input-file", action="store_true", help="split on '// -----' lines")
    p.add_argument("--mlir-print-ir-after-all", action="store_true")
    p.add_argument("--mlir-print-ir-before-all", action="store_true")
    p.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check diagnostics against expected-* comments instead of printing them",
    )
    p.add_argument("--list-passes", action="store_true", help="list our passes and exit")
    return p


def _chunks(text: str, split: bool) -> list[str]:
    """The input's pieces, each padded with newlines so diagnostics keep file line numbers."""
    if not split:
        return [text]
    pieces, start = [], 0
    for match in _SPLIT.finditer(text):
        pieces.append((start, text[start : match.start()]))
        start = match.end()
    pieces.append((start, text[start:]))
    return ["\n" * text.count("\n", 0, offset) + piece for offset, piece in pieces]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_passes:
        for name in passes.pass_names():
            print(f"{name}: {passes.summary(name)}")
        return 0
    filename = "<stdin>" if args.input == "-" else args.input
    try:
        text = sys.stdin.read() if args.input == "-" else open(args.input).read()
    except OSError as exc:
        print(f"fusion-opt: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 1
    session = new_session()
    context = session.context
    try:
        check_pipeline(args.pass_pipeline, context)
    except (ValueError, KeyError) as exc:
        print(f"fusion-opt: {exc}", file=sys.stderr)
        return 1
    outputs, failed = [], False
    for chunk in _chunks(text, args.split_input_file):
        seen: list[Diagnostic] = []
        try:
            module = frontend.parse(chunk, context, filename)
            if args.pass_pipeline:
                seen += run_pipeline(
                    module.operation,
                    args.pass_pipeline,
                    print_ir_before_all=args.mlir_print_ir_before_all,
                    print_ir_after_all=args.mlir_print_ir_after_all,
                    filename=filename,
                )
            outputs.append(str(module))
        except (MLIRParseError, CompileError) as exc:
            seen += exc.diagnostics
            if not args.verify_diagnostics:
                print(exc, file=sys.stderr)
                failed = True
                continue
        if args.verify_diagnostics:
            problems = verify.check(chunk, filename, seen)
            for problem in problems:
                print(problem, file=sys.stderr)
            failed |= bool(problems)
        else:
            for diag in seen:
                print(diag, file=sys.stderr)
    result = "// -----\n".join(outputs)
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w") as f:
            f.write(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
