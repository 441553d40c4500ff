"""The online-softmax path on the H200: correctness on CUDA and Vulkan, memory against N.

On the CPU machine:   .venv/bin/python benchmarks/online_softmax_gpu.py prepare build/os
On the GPU machine:   python3 benchmarks/online_softmax_gpu.py check build/os [--vulkan]

``prepare`` compiles variants with attention="online-softmax" for target="cuda" (and
"vulkan"), and a causal fp16 attention (B=1, H=8, D=64, mask from iota/compare) at
N = 4096 ... 32768 for the memory series. ``check`` runs them: relative error against
float64 PyTorch on the GPU, and for the series the device memory in use (nvidia-smi)
after the run, above what was in use before the module was loaded, with inputs kept on
the device.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
from cases import BOUND, F16, F32, example, qkv, used_mib  # noqa: E402
from gpu_smoke import CASES as SMOKE_CASES  # noqa: E402
from variants import Attention  # noqa: E402

import fusion_compiler as fc  # noqa: E402

BLOCKS = "builtin.module(fusion-detect-attention,fusion-online-softmax{block-q=256 block-k=256})"


VARIANTS = {
    "causal_f16": SMOKE_CASES["causal_tril_f16"],
    "alibi_cross_bf16": SMOKE_CASES["alibi_cross_bf16"],
    "softcap_causal_f32": (
        lambda: Attention(4, 200, 200, 64, mask="softcap-causal"),
        qkv(1, 4, 4, 200, 200, 64, F32),
    ),
    "gqa_f16_d256": (
        lambda: Attention(
            8, 128, 128, 256, gqa="repeat_kv", kv_heads=2, mask="causal-iota", upcast=True
        ),
        qkv(1, 8, 2, 128, 128, 256, F16),
    ),
}
# (N, causal): the causal series for memory, one full case to compare the time with
SERIES = [(4096, True), (8192, True), (16384, True), (32768, True), (16384, False)]


def _series_model(n, causal):
    # Causal from iota/compare: the mask is re-run per block inside the loop, and the
    # key blocks above the diagonal are skipped.
    return Attention(8, n, n, 64, mask="causal-iota" if causal else None, upcast=True)


def prepare(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    stats = {}
    for target in ("cuda", "vulkan"):
        for name, (factory, specs) in VARIANTS.items():
            torch.manual_seed(0)
            model = factory().eval()
            module = fc.compile(model, example_args=example(specs), target=target, pipeline=BLOCKS)
            module.save(folder / f"{name}.{target}.vmfb")
            torch.save(model.state_dict(), folder / f"{name}.pt")
            stats[f"{name}.{target}"] = module.stats
    for n, causal in SERIES:
        model = _series_model(n, causal)
        module = fc.compile(
            model,
            example_args=example(qkv(1, 8, 8, n, n, 64, F16)),
            target="cuda",
            pipeline=BLOCKS,
        )
        module.save(folder / f"series_{n}_{causal}.cuda.vmfb")
        stats[f"series_{n}_{causal}"] = module.stats
    (folder / "stats.json").write_text(json.dumps(stats, indent=1))
    print(json.dumps(stats))


def check(folder: Path, vulkan: bool) -> int:
    stats = json.loads((folder / "stats.json").read_text())
    failed = 0
    print(f"{'case':<28} {'fused':>5} {'rel. error':>10} {'bound':>6}")
    for target, device in [("cuda", "cuda")] + ([("vulkan", "vulkan")] if vulkan else []):
        for name, (factory, specs) in VARIANTS.items():
            model = factory().eval()
            model.load_state_dict(torch.load(folder / f"{name}.pt"))
            label = f"{name}.{target}"
            try:
                run = fc.load(folder / f"{label}.vmfb", device=device)
                inputs = example(specs)
                got = run(*inputs)
            except Exception as exc:  # report and go on: one failing device is a result
                print(f"{label:<28} FAILED: {str(exc).splitlines()[0][:150]}")
                failed += 1
                continue
            with torch.no_grad():
                want = model.double().cuda()(*(x.double().cuda() for x in inputs)).cpu()
            error = ((got.double() - want).norm() / want.norm()).item()
            bound = BOUND[specs[0][1]]
            failed += not error < bound
            mark = "" if error < bound else "  WRONG"
            print(
                f"{label:<28} {stats[label]['attention_ops']:>5} {error:>10.1e} {bound:>6.0e}{mark}"
            )
    header = f"{'N':>6} {'causal':>6} {'MiB above baseline':>19} {'ms/call':>8}"
    print(f"\n{header}  (fp16, B=1 H=8 D=64)")
    for n, causal in SERIES:
        before = used_mib()
        run = fc.load(folder / f"series_{n}_{causal}.cuda.vmfb", device="cuda")
        function = run["main"]
        arrays = [function._to_device(x) for x in example(qkv(1, 8, 8, n, n, 64, F16))]
        raw = function._function
        raw(*arrays)  # warm-up; arrays stay on the device
        start = time.perf_counter()
        for _ in range(3):
            out = raw(*arrays)
        if hasattr(out, "to_host"):
            out.to_host()
        ms = (time.perf_counter() - start) / 3 * 1e3
        print(f"{n:>6} {causal!s:>6} {used_mib() - before:>19} {ms:>8.1f}")
        del run, function, arrays, raw, out
    return 1 if failed else 0


if __name__ == "__main__":
    command, folder = sys.argv[1], Path(sys.argv[2])
    if command == "prepare":
        prepare(folder)
    else:
        sys.exit(check(folder, "--vulkan" in sys.argv))
