"""fusion-compile: a .pt2 or .mlir model to an IREE module, with the IR of every stage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fusion_compiler.driver import compile as compile_model
from fusion_compiler.errors import FusionCompilerError
from fusion_compiler.inputs import check_output_file
from fusion_compiler.runtime import weights_beside
from fusion_compiler.stages import Stage
from fusion_compiler.targets import CUDA_ARCHS
from fusion_compiler.tools.cli import entry_point, write_output


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fusion-compile", description=__doc__)
    p.add_argument("model", help="a .pt2 saved by torch.export.save, or a .mlir file")
    p.add_argument("--target", default="cpu", choices=["cpu", "cuda", "vulkan"])
    p.add_argument(
        "--cuda-arch",
        default="sm_80",
        help="CUDA architecture (default sm_80); sm_90: fused attentions become generated "
        f"Hopper kernels; one of {', '.join(CUDA_ARCHS)}",
    )
    p.add_argument(
        "--vulkan-target",
        default="pascal",
        help="IREE's SPIR-V target for what is not a generated kernel (default pascal)",
    )
    p.add_argument("-o", dest="output", help="output .vmfb (or .mlir with --compile-to)")
    p.add_argument("--dump-ir", metavar="DIR", help="write the IR after every stage and pass")
    p.add_argument(
        "--compile-to",
        default=Stage.VMFB.value,
        choices=[s.value for s in Stage],
        help="stop at this stage (default vmfb)",
    )
    p.add_argument("--pipeline", help="our pass pipeline, builtin.module(...)")
    p.add_argument(
        "--attention",
        default="auto",
        choices=["auto", "iree", "online-softmax"],
        help="who lowers fused attention: auto (per target: online softmax on the CPU), "
        "IREE's op, or our FlashAttention-2 rewrite",
    )
    p.add_argument(
        "--weights",
        default="embedded",
        choices=["embedded", "external"],
        help="the model's parameters in the module, or beside it (-o m.vmfb writes m.irpa, "
        "which fc.load('m.vmfb') reads)",
    )
    p.add_argument("--remarks", action="store_true", help="print what the passes found")
    return p


@entry_point
def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        output = check_output_file(args.output) if args.output else None
        module = compile_model(
            Path(args.model),
            target=args.target,
            cuda_arch=args.cuda_arch,
            vulkan_target=args.vulkan_target,
            dump_ir=args.dump_ir,
            compile_to=args.compile_to,
            pipeline=args.pipeline,
            remarks=args.remarks,
            attention=args.attention,
            weights=args.weights,
        )
    except FusionCompilerError as exc:
        print(f"fusion-compile: error: {exc}", file=sys.stderr)
        return 1
    if output:
        if write_output("fusion-compile", output, module.save):
            return 1
    elif module.vmfb is None:
        sys.stdout.write(module.mlir or "")
    stats = ", ".join(f"{k}={v}" for k, v in module.stats.items())
    where = f"; wrote {args.output}" if args.output else ""
    if args.output and module.weights and module.vmfb is not None:
        where += f" and its weights, {weights_beside(args.output)}"
    dumped = f"; IR of every stage in {args.dump_ir}/" if args.dump_ir else ""
    print(
        f"fusion-compile: {module.stage.value} for {args.target} ({stats}){where}{dumped}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
