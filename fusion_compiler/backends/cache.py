"""The kernel cache: one folder per kernel, keyed on everything that changes its binary.

A key hashes every part its backend names: the generated source, every file the
kernel's source or its compile step reads (the template, the kernels it imports, the
module that sets the compile options), the spec, the entry, and the kernel compiler's
version. ``FUSION_COMPILER_CACHE`` moves the cache (the tests keep their own).
"""

from __future__ import annotations

import hashlib
import os
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
