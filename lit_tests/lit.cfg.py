# Lit configuration: FileCheck tests of fusion-opt, fusion-compile and Python-built IR.
import os
import shutil
import sys

import lit.formats

config.name = "fusion_compiler"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.excludes = ["lit.cfg.py", "inputs"]
config.test_source_root = os.path.dirname(__file__)

# Tools come from the interpreter's environment (.venv/bin), whatever PATH says.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
config.environment["PYTHONUNBUFFERED"] = "1"
filecheck = shutil.which("filecheck", path=config.environment["PATH"])
if filecheck is None:
    lit_config.fatal("filecheck not found: install the dev extras (pip install -e '.[dev]')")
config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("FileCheck", filecheck))

# fusion-spirv-attention compiles its kernels with glslangValidator (glslang-tools).
if shutil.which("glslangValidator"):
    config.available_features.add("glslang")
