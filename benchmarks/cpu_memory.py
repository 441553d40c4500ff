"""Peak memory of one causal attention call on the CPU: ours against PyTorch, by length.

    .venv/bin/python benchmarks/cpu_memory.py [--lengths 1024,2048,...] [--limit-gb 12]
                                              [--out benchmarks/results/cpu_memory.md]

B1 H4 D64 fp32, causal, written two ways: ``F.scaled_dot_product_attention(is_causal=True)``
and explicitly (an arange compare, ``masked_fill(-inf)`` on ``q @ k.T * scale``, softmax,
``@ v``). Systems: ours (``target="cpu"``, default attention mode: our online-softmax
rewrite; also run on IREE's ``local-sync`` device, which runs each submission inline),
ours with ``attention="iree"`` (IREE's attention op), torch eager (the explicit form) and
torch SDPA. Our modules are compiled here; each case then runs in a fresh
subprocess that loads the module (or builds the torch model) and its inputs, resets the
kernel's peak-RSS mark (``/proc/self/clear_refs``), makes one call and reads ``VmHWM``:
the table gives that peak above the RSS just before the call, and the same less the
output's bytes (what the call needs beyond its inputs and output). A case estimated to
need more than ``--limit-gb`` is skipped; a child whose RSS passes it is killed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

B, H, D = 1, 4, 64
LENGTHS = (1024, 2048, 4096, 8192, 16384, 32768)
FORMS = ("sdpa", "explicit")
MB = 2**20


class SDPACausal(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class ExplicitCausal(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        n = q.shape[-2]
        i = torch.arange(n, device=q.device)
        future = i[None, :] > i[:, None]  # key after query
        scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        scores = scores.masked_fill(future, float("-inf"))
        return scores.softmax(dim=-1) @ v


MODELS = {"sdpa": SDPACausal, "explicit": ExplicitCausal}
# system -> (label, forms it runs, attention= for ours or None for torch, IREE device or
# None for --device's); ours-sync runs our default module inline (local-sync: no queue
# running ahead of the host), which tells the host-queue share of our peak
SYSTEMS = {
    "ours": ("ours (default: online softmax)", FORMS, "auto", None),
    "ours-sync": ("ours, run on local-sync", ("sdpa",), "auto", "local-sync"),
    "ours-iree": ('ours, attention="iree"', FORMS, "iree", None),
    "eager": ("torch eager", ("explicit",), None, None),
    "sdpa": ("torch SDPA", ("sdpa",), None, None),
}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(system: str, form: str, n: int, device: str, vmfb: str | None) -> None:
    """One call in this fresh process; prints its peak RSS above the RSS before it."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, n, D) for _ in range(3))
    if vmfb is not None:
        import fusion_compiler as fc

        call = fc.load(Path(vmfb).read_bytes(), device=device)
    elif system == "sdpa":
        call = SDPACausal()
    else:
        call = ExplicitCausal()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status_kb("VmRSS")
    start = time.perf_counter()
    with torch.no_grad():
        out = call(q, k, v)
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM")
    error = None
    if n <= 2048:  # the answer, where the reference is cheap
        want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=True)
        error = ((out.double() - want).norm() / want.norm()).item()
    print(
        json.dumps(
            {
                "peak_mb": (peak - before) / 1024,
                "out_mb": out.numel() * out.element_size() / MB,
                "seconds": seconds,
                "rel_error": error,
            }
        )
    )


def _estimate_gb(system: str, n: int) -> float:
    """What a case needs, roughly: eager holds ~3 (B, H, N, N) fp32 tensors at once;
    IREE's attention op reads a (B, H, N, N) fp32 mask made by a dispatch of its own."""
    if system == "eager":
        return 3 * B * H * n * n * 4 / 2**30
    if system == "ours-iree":
        return B * H * n * n * 4 / 2**30
    return 0.0


def _run_child(args: list[str], limit_mb: float) -> dict:
    """Runs a child, killing it if its RSS passes ``limit_mb``."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status = Path(f"/proc/{proc.pid}/status")
    while proc.poll() is None:
        try:
            rss = next(
                int(line.split()[1]) / 1024
                for line in status.read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        except (FileNotFoundError, StopIteration, ProcessLookupError):
            rss = 0.0
        if rss > limit_mb:
            proc.kill()
            proc.wait()
            return {"killed_mb": rss}
        time.sleep(0.05)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"child {' '.join(args)} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _compile(form: str, n: int, attention: str, folder: Path) -> Path:
    import fusion_compiler as fc

    path = folder / f"{form}_{attention}_N{n}.vmfb"
    if not path.exists():
        example = tuple(torch.empty(B, H, n, D, device="meta") for _ in range(3))
        fc.compile(MODELS[form](), example, target="cpu", attention=attention).save(path)
    return path


def _machine() -> str:
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, nproc {os.cpu_count()}, {mem_gb:.0f} GiB RAM"


def _versions() -> str:
    from importlib.metadata import version

    names = ("torch", "iree-base-compiler", "iree-base-runtime")
    return ", ".join(f"{name} {version(name)}" for name in names)


def _cell(found: dict | None) -> str:
    if found is None:
        return "skipped (> limit, est.)"
    if "not_run" in found:
        return "not run (--iree-max-n)"
    if "killed_mb" in found:
        return f"killed at {found['killed_mb']:.0f} MB"
    return f"{found['peak_mb']:.1f} / {found['peak_mb'] - found['out_mb']:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--limit-gb", type=float, default=12.0)
    parser.add_argument(
        "--iree-max-n",
        type=int,
        default=8192,
        help='longest N for attention="iree" (a minute per call at 8K on 2 cores, x4 per 2x N)',
    )
    parser.add_argument(
        "--device", default="local-task", help="IREE device of our modules (local-sync: inline)"
    )
    parser.add_argument(
        "--build", help="keep (and reuse) the compiled modules here; default: a temporary folder"
    )
    parser.add_argument("--out", help="write the Markdown table here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        system, form, n, device, *vmfb = args.child
        child(system, form, int(n), device, vmfb[0] if vmfb else None)
        return 0

    lengths = [int(x) for x in args.lengths.split(",")]
    systems = args.systems.split(",")
    scratch = tempfile.TemporaryDirectory(prefix="cpu_memory-")
    folder = Path(args.build or scratch.name)
    folder.mkdir(parents=True, exist_ok=True)
    columns = [(s, form) for s in systems for form in SYSTEMS[s][1]]
    results: dict[tuple[str, str, int], dict | None] = {}
    for n in lengths:
        for system, form in columns:
            if _estimate_gb(system, n) > args.limit_gb:
                results[system, form, n] = None
                continue
            if system == "ours-iree" and n > args.iree_max_n:
                results[system, form, n] = {"not_run": True}
                continue
            _, _, attention, device = SYSTEMS[system]
            extra = [str(_compile(form, n, attention, folder))] if attention else []
            device = device or args.device
            found = _run_child([system, form, str(n), device, *extra], args.limit_gb * 1024)
            results[system, form, n] = found
            print(n, system, form, found, flush=True)

    command = "python benchmarks/cpu_memory.py " + " ".join(sys.argv[1:])
    lines = [
        "# Peak memory of one causal attention call, CPU",
        "",
        f"`{command.strip()}`  ",
        f"{_machine()}; {datetime.date.today()}; {_versions()}; "
        f"torch threads {torch.get_num_threads()}; IREE device {args.device}",
        "",
        f"B{B} H{H} D{D} fp32, causal. Each cell: peak RSS of one call in a fresh process "
        "above the RSS before it / the same less the output, MB (inputs are allocated "
        "before; the output is counted in the first figure).",
        "",
        "| N | " + " | ".join(f"{SYSTEMS[s][0]}, {form}" for s, form in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for n in lengths:
        lines.append(
            f"| {n} | " + " | ".join(_cell(results[s, form, n]) for s, form in columns) + " |"
        )
    errors = [
        f"{s}/{form}/N{n}: {r['rel_error']:.1e}"
        for (s, form, n), r in results.items()
        if r and r.get("rel_error") is not None
    ]
    lines += ["", "Rel. error against float64 SDPA (N <= 2048): " + ", ".join(errors)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
