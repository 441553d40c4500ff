"""The lasting child process that runs kernels under Triton's interpreter: a call that
raises there fails with its traceback, a child that dies fails its call with its exit
code, and the next call starts another."""

from __future__ import annotations

import pytest

from fusion_compiler.backends.triton import interpreter_process


def test_a_failing_call_says_why_and_a_dead_child_is_replaced(tmp_path) -> None:
    with pytest.raises(RuntimeError, match="TypeError"):
        interpreter_process.run("json:loads", tmp_path)  # a Path is no JSON text
    with pytest.raises(RuntimeError, match="its process ended"):
        interpreter_process.run("sys:exit", tmp_path)  # SystemExit ends the child
    interpreter_process.run("os.path:exists", tmp_path)  # a new child answers
