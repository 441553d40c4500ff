"""The benchmark harness: one timer for every system, one record format, one table.

Every system, ours or a peer, is a Python callable that takes one input set and returns
its output, as a user calls it. Each is timed the same three ways in the same run:

- ``device_ms``: device time per call (CUPTI, through torch's profiler, which sees IREE's
  launches too): every kernel and copy of ``REPEATS`` calls made back to back (fewer for
  a system slower than 50 ms a call), over the number of calls. On the CPU there is none,
  nor for a system whose work CUPTI does not see (Vulkan).
- ``loop_ms``: wall time per call of ``REPEATS`` calls made back to back, until the last
  result is finished; median of three such loops.
- ``call_ms``: wall time of one call from Python until its result is finished, median
  of ``REPEATS``.

Input sets rotate (three by default), so no call reads what the one before left in the
cache. TFLOP/s is 4·B·H·Nq·Nk·D / device time (loop time where there is none), halved
for causal.

A suite is a small script on top of ``main``: ``prepare FOLDER`` compiles what runs
elsewhere (IREE modules on the CPU machine; ``save_module``: a module that does not
compile is kept as the reason why), ``run FOLDER OUT`` times on the machine it runs on
(``module`` loads what prepare wrote) and writes ``OUT/<name>.json`` (one record per case
and system) and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

REPEATS = 20
WARMUP = 3
# about how long each timing of one system may take
SECONDS_PER_TIMING = 1.0


def _finish(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _outputs(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    return [t for t in result if isinstance(t, torch.Tensor)]


def timings(call: Callable, inputs: Sequence[tuple], cuda: bool, repeats: int = REPEATS) -> dict:
    """``device_ms``, ``loop_ms`` and ``call_ms`` of ``call`` (see the module's doc). A
    system slower than ``SECONDS_PER_TIMING / repeats`` a call gets fewer repeats (3 at
    least), the same for each of its three timings."""
    for i in range(WARMUP):
        start = time.perf_counter()
        call(*inputs[i % len(inputs)])
        _finish(cuda)
        seconds = time.perf_counter() - start
    repeats = max(3, min(repeats, round(SECONDS_PER_TIMING / max(seconds, 1e-9))))

    def back_to_back() -> None:
        for i in range(repeats):
            call(*inputs[i % len(inputs)])
        _finish(cuda)

    loops = []
    for _ in range(3):
        start = time.perf_counter()
        back_to_back()
        loops.append((time.perf_counter() - start) / repeats * 1e3)
    single = []
    for i in range(repeats):
        start = time.perf_counter()
        call(*inputs[i % len(inputs)])
        _finish(cuda)
        single.append((time.perf_counter() - start) * 1e3)
    device_ms = None
    kernels: dict[str, float] = {}
    if cuda:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            back_to_back()
        on_device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if on_device:  # none: the system's work is not CUDA's (Vulkan)
            device_ms = sum(e.device_time for e in on_device) / repeats / 1e3
            for e in on_device:  # where the device time goes: ms per call, by kernel name
                kernels[e.name] = kernels.get(e.name, 0.0) + e.device_time / repeats / 1e3
    return {
        "device_ms": device_ms,
        "kernels": {name[:80]: round(ms, 5) for name, ms in kernels.items()},
        "loop_ms": statistics.median(loops),
        "call_ms": statistics.median(single),
    }


def rel_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    return ((got - want).norm() / want.norm()).item()


def measure(
    case: dict,
    system: str,
    call: Callable,
    inputs: Sequence[tuple],
    reference: torch.Tensor,
    flops: float,
    cuda: bool,
) -> dict:
    """One system on one case: its output checked against ``reference`` (the first input
    set's), then timed. A system that cannot run the case gives a record with its error."""
    record = {**case, "system": system}
    try:
        with torch.no_grad():
            error = rel_error(_outputs(call(*inputs[0]))[0], reference)
            times = timings(call, inputs, cuda)
        basis = times["loop_ms"] if times["device_ms"] is None else times["device_ms"]
        record.update(times, tflops=flops / basis / 1e9, rel_err=error)
    except Exception as exc:  # a failure to run is a result: out of memory, unsupported
        record.update(error=(str(exc).strip().splitlines() or [type(exc).__name__])[0][:200])
        if cuda:
            torch.cuda.empty_cache()
    print(json.dumps(record), flush=True)
    return record


def _reason(exc: Exception) -> str:
    """An error's first lines: a compile step's name and its first diagnostic."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return ": ".join(lines[:2]) or type(exc).__name__


def save_module(folder: Path, name: str, build: Callable) -> None:
    """Writes the module ``build()`` compiles (``fc.compile``) as ``FOLDER/<name>.vmfb``,
    its stats and remarks as ``<name>.json``; a failure to compile as ``<name>.error``,
    which ``module`` raises at run time, so that it becomes that system's record."""
    for stale in (f"{name}.error", f"{name}.vmfb", f"{name}.json"):
        (folder / stale).unlink(missing_ok=True)
    try:
        compiled = build()
    except Exception as exc:  # a failure to compile is a result: the record says why
        (folder / f"{name}.error").write_text(f"does not compile: {_reason(exc)}\n")
        print(name, "does not compile:", _reason(exc), flush=True)
        return
    compiled.save(folder / f"{name}.vmfb")
    facts = {"stats": compiled.stats, "remarks": [str(r) for r in compiled.remarks]}
    (folder / f"{name}.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(name, compiled.stats, flush=True)


def module(folder: Path, name: str, device: str) -> Callable:
    """The main function of ``FOLDER/<name>.vmfb`` on ``device``, or, where it did not
    compile, was not prepared or does not load, a callable that raises why."""
    import fusion_compiler as fc

    error = folder / f"{name}.error"
    path = folder / f"{name}.vmfb"
    if error.exists():
        reason = error.read_text().strip()
    elif not path.exists():
        reason = f"{path} not found: run prepare first"
    else:
        try:
            return fc.load(path, device=device)["main"]
        except Exception as exc:  # a driver refusing the module is a result too
            reason = f"does not load: {_reason(exc)}"

    def fails(*args):
        raise RuntimeError(reason)

    return fails


def sm90_pipeline(pass_name: str, options: str) -> str:
    """Our sm_90 CUDA pipeline with ``pass_name`` given ``options`` (a tiling to time)."""
    from fusion_compiler import targets

    passes = [
        f"{pass_name}{{{options}}}" if p.startswith(pass_name) else p
        for p in targets.pipeline("cuda", kernel_arch="sm_90")
    ]
    return f"builtin.module({','.join(passes)})"


def selected(name: str, only: str) -> bool:
    """Whether ``--only`` selects case ``name``: it contains ``only``, or one of its
    comma- or ``|``-separated parts."""
    return any(part in name for part in re.split(r"[,|]", only))


def attention_flops(b: int, h: int, nq: int, nk: int, d: int, causal: bool) -> float:
    return 4 * b * h * nq * nk * d / (2 if causal else 1)


def _cell(value: float | None, digits: str = ".3f") -> str:
    return "-" if value is None else format(value, digits)


def by_case(records: list[dict]) -> dict[str, dict[str, dict]]:
    """The records as case -> system -> record, in the order they were made."""
    found: dict[str, dict[str, dict]] = {}
    for r in records:
        found.setdefault(r["case"], {})[r["system"]] = r
    return found


def table(records: list[dict], key: str = "case") -> str:
    """Markdown: a row per case and system with the three timings, TFLOP/s and error
    ("-" for a record that has none: a copy timed for its bandwidth)."""
    lines = [
        f"| {key} | system | device ms | loop ms | call ms | TFLOP/s | rel. error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        if "error" in r:
            lines.append(f"| {r[key]} | {r['system']} | failed: {r['error']} | | | | |")
            continue
        lines.append(
            f"| {r[key]} | {r['system']} | {_cell(r['device_ms'])} | {_cell(r['loop_ms'])} "
            f"| {_cell(r['call_ms'])} | {_cell(r.get('tflops'), '.3g')} "
            f"| {_cell(r.get('rel_err'), '.1e')} |"
        )
    return "\n".join(lines) + "\n"


def write(records: list[dict], out: Path, name: str, render: Callable = table) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(records, indent=1) + "\n")
    (out / f"{name}.md").write_text(render(records))


def machine() -> str:
    """What the timings ran on, for the results file's header."""
    import platform

    parts = [platform.processor() or platform.machine(), f"torch {torch.__version__}"]
    if torch.cuda.is_available():
        parts.insert(0, torch.cuda.get_device_name())
    try:
        from iree.runtime import version  # a submodule that `import iree.runtime` leaves out

        parts.append(f"iree-base-runtime {version.VERSION}")
    except (ImportError, AttributeError):
        pass
    return ", ".join(parts)


def main(
    description: str,
    prepare: Callable[[Path, argparse.Namespace], None] | None,
    run: Callable[[Path, Path, argparse.Namespace], list[dict]],
    argv: list[str] | None = None,
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """The command line of a suite: ``prepare FOLDER`` and ``run FOLDER OUT``; ``run``
    writes its records (``write``) and returns them. Fails if one of ours failed."""
    parser = argparse.ArgumentParser(description=description)
    commands = parser.add_subparsers(dest="command", required=True)
    if prepare is not None:
        p = commands.add_parser("prepare", help="compile the modules to FOLDER (CPU machine)")
        p.add_argument("folder", type=Path)
    r = commands.add_parser("run", help="time every system; results to OUT")
    r.add_argument("folder", type=Path, help="where prepare wrote the modules")
    r.add_argument("out", type=Path)
    r.add_argument(
        "--baseline",
        type=Path,
        help="another folder of our modules (an older build), timed in the same run as "
        "ours_sm90_baseline where the suite supports it",
    )
    for sub in commands.choices.values():
        sub.add_argument(
            "--only", default="", help="only the cases whose name contains this (or one of a,b)"
        )
        if options is not None:
            options(sub)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        args.folder.mkdir(parents=True, exist_ok=True)
        prepare(args.folder, args)
        return 0
    records = run(args.folder, args.out, args)
    print(table(records))
    return 1 if any("error" in r and r["system"].startswith("ours") for r in records) else 0
