"""One child process per process that runs kernels under Triton's interpreter.

Triton chooses its interpreter when it is first imported (``TRITON_INTERPRET=1``), so
interpreted kernels run in a child process. Starting one per kernel cost about 2 s of
imports (torch, Triton) each time; the child started here stays and runs every call of
its parent, one at a time:

    parent: "module:function PATH\\n" on the child's stdin
    child:  runs function(Path(PATH)) (which reads its call from PATH and writes its
            outputs beside it), answers "ok" or "error <JSON text>" on its own line

The child writes what kernels print to stderr (a file), never to the replies. A child
that dies (a crash in a kernel) fails that call, with the tail of its stderr; the next
call starts a new one.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

_LOCK = threading.Lock()
_child: _Child | None = None


class _Child:
    def __init__(self):
        self.log = tempfile.TemporaryFile()
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        command = [sys.executable, "-m", __name__]
        self.process = subprocess.Popen(
            command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True,
        )  # fmt: skip

    def call(self, function: str, path: Path) -> str:
        """The child's reply to one call; "" where it died."""
        try:
            self.process.stdin.write(f"{function} {path}\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return ""
        return self.process.stdout.readline()

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-4000:].decode(errors="replace")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()  # the child's loop ends at end of input
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()


def run(function: str, path: Path) -> None:
    """Runs ``function`` ("module:name", which takes the call's file) in the interpreter's
    process; raises RuntimeError with what went wrong there."""
    global _child
    with _LOCK:
        if _child is None:
            _child = _Child()
        reply = _child.call(function, path)
        if not reply:  # it died: the next call starts another
            died, _child = _child, None
            died.process.wait()
            tail = died.stderr_tail()
            died.close()
            raise RuntimeError(
                f"interpreted kernel failed: its process ended (exit code "
                f"{died.process.returncode}):\n{tail}"
            )
    if reply.startswith("error "):
        raise RuntimeError(f"interpreted kernel failed:\n{json.loads(reply[6:])}")


@atexit.register
def _close() -> None:
    if _child is not None:
        _child.close()


def _serve() -> None:
    """The child's loop: one call per line of stdin, one reply per line of stdout."""
    import importlib

    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what kernels print goes to stderr
    for line in sys.stdin:
        target, _, path = line.rstrip("\n").partition(" ")
        module, _, name = target.partition(":")
        try:
            getattr(importlib.import_module(module), name)(Path(path))
            reply = "ok"
        except Exception:  # the parent raises it
            reply = "error " + json.dumps(traceback.format_exc()[-4000:])
        replies.write(reply + "\n")
        replies.flush()


if __name__ == "__main__":
    _serve()
