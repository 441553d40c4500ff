"""What every command-line tool does the same way: its exit on a closed pipe and its
output file."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

# The status of a program killed by SIGPIPE, as `cmd | head` gives C tools.
BROKEN_PIPE = 128 + 13


def entry_point(main: Callable[[list[str] | None], int]) -> Callable[[list[str] | None], int]:
    """``main`` that exits quietly when its reader closes the pipe (``fusion-opt
    --list-passes | head``) instead of printing a BrokenPipeError traceback."""

    @functools.wraps(main)
    def run(argv: list[str] | None = None) -> int:
        try:
            status = main(argv)
            sys.stdout.flush()
        except BrokenPipeError:
            # Python flushes stdout again at exit: point it at /dev/null so that fails too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return BROKEN_PIPE
        return status

    return run


def write_output(prog: str, path: Path, write: Callable[[Path], object]) -> int:
    """``write(path)``; 0, or 1 with one line on stderr naming the file and why."""
    try:
        write(path)
    except OSError as exc:
        print(
            f"{prog}: error: cannot write {path}: {exc.strerror}; write elsewhere", file=sys.stderr
        )
        return 1
    return 0
