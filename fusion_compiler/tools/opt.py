"""fusion-opt: mlir-opt for fusion_compiler; our Python passes mix with IREE's and MLIR's."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from fusion_compiler import diagnostics, inputs, passes
from fusion_compiler.compiler import new_session
from fusion_compiler.dialects import linalg
from fusion_compiler.errors import (
    CompileError,
    Diagnostic,
    FusionCompilerError,
    InputFileError,
    MLIRParseError,
)
from fusion_compiler.inputs import check_output_file, input_file_problem, text_problem
from fusion_compiler.pipeline import check_pipeline, run_pipeline
from fusion_compiler.tools import verify
from fusion_compiler.tools.cli import entry_point, write_output

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


def _read(name: str) -> str:
    """The input's text; InputFileError when it is not MLIR text (what it is, what to do)."""
    problem = None if name == "-" else input_file_problem(Path(name), mlir_only=True)
    if problem:
        raise InputFileError(name, *problem)
    data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    problem = text_problem(data)
    if problem:
        raise InputFileError("<stdin>" if name == "-" else name, *problem)
    return data.decode()


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_passes:
        for name in passes.pass_names():
            print(f"{name}: {passes.summary(name)}")
        return 0
    filename = "<stdin>" if args.input == "-" else args.input
    if args.verify_diagnostics:  # as mlir-opt: no "see current operation" notes to expect
        diagnostics.omit_op_notes()
    try:
        text = _read(args.input)
        output = None if args.output == "-" else check_output_file(args.output)
        session = new_session()
        context = session.context
        check_pipeline(args.pass_pipeline, context)
    except OSError as exc:  # the input cannot be read
        print(f"fusion-opt: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 1
    except FusionCompilerError as exc:
        print(f"fusion-opt: {exc}", file=sys.stderr)
        return 1
    outputs, failed = [], False
    for chunk in _chunks(text, args.split_input_file):
        seen: list[Diagnostic] = []
        try:
            module = inputs.parse(chunk, context, filename)
            if args.pass_pipeline:
                # split chunks share the context, where MLIR renames a blob that an
                # earlier chunk named: their bytes are not known by name
                blobs = {} if args.split_input_file else inputs.resource_blobs(chunk)
                with linalg.resources(context, blobs):
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
    if output is None:
        sys.stdout.write(result)
    elif write_output("fusion-opt", output, lambda path: path.write_text(result)):
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
