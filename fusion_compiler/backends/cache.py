"""The kernel cache: one folder per kernel, keyed on everything that changes its binary.

A key hashes every part its backend names: the generated source, every file the
kernel's source or its compile step reads (the template, the kernels it imports, the
module that sets the compile options), the spec, the entry, and the kernel compiler's
version. ``FUSION_COMPILER_CACHE`` moves the cache (the tests keep their own).
Processes that build the same kernel at once may share a cache: every file in it is
written whole (``write_whole``), so a reader sees the old file, the new one or none.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def cache_dir() -> Path:
    root = os.environ.get("FUSION_COMPILER_CACHE") or Path.home() / ".cache" / "fusion_compiler"
    return Path(root) / "kernels"


def cache_entry(parts: Iterable[str], prefix: str = "") -> tuple[str, Path]:
    """(content hash, cache folder) of the kernel made from ``parts``."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")  # ("ab", "c") and ("a", "bc") differ
    key = digest.hexdigest()
    return key, cache_dir() / f"{prefix}{key[:24]}"


def write_whole(path: Path, data: str | bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same folder, renamed
    over it: no reader, in this process or another, sees the file half written."""
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
