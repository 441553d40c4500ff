"""fusion-caller-storage: an entry point writes its results into buffers its caller
passes and takes its transient memory from another. On CUDA (the default there) the
runtime passes tensors torch allocated and returns them as they are; here, on the CPU, the
pass is asked for by name and the runtime passes buffers of IREE's allocator."""

from __future__ import annotations

import torch
from conftest import rel_error
from test_spirv_attention import needs_glslang, needs_vulkan

import fusion_compiler as fc

STORAGE = "builtin.module(fusion-caller-storage)"


class ThreeResults(torch.nn.Module):
    """Results of three element types, one of them an input passed through."""

    def forward(self, q, k, v):
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o * 2, (o.sum(-1) > 0).to(torch.int64), q.to(torch.bfloat16), q


def test_results_written_into_storage_equal_pytorch() -> None:
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    module = fc.compile(ThreeResults(), example_args=(q, k, v), pipeline=STORAGE)
    assert any("writes its 4 result(s) into storage" in r.message for r in module.remarks)
    run = fc.load(module)
    assert run.function_names == ["main"]  # not IREE's transient size query
    assert run["main"] is run["main"]  # its signature read once, at the first use
    # each call on fresh inputs: the module's recorded command buffer (IREE keeps it, the
    # caller's buffers bound per call) must read and write this call's buffers
    for call in (run, lambda *a: run["main"].submit(*a).result(), run):
        q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
        want = ThreeResults()(q, k, v)
        got = call(q, k, v)
        assert [g.dtype for g in got] == [w.dtype for w in want]
        assert rel_error(got[0], want[0]) < 1e-6
        for g, w in zip(got[1:], want[1:], strict=True):
            assert torch.equal(g, w)


def test_cuda_modules_take_caller_storage_and_dynamic_ones_do_not() -> None:
    q = torch.randn(1, 2, 8, 16)
    fused = fc.compile(ThreeResults(), example_args=(q, q, q), target="cuda", compile_to="fused")
    assert 'fusion.result_storage = "4"' in fused.mlir
    n = torch.export.Dim("n", min=2, max=64)
    dynamic = fc.compile(
        ThreeResults(),
        example_args=(q, q, q),
        dynamic_shapes=({2: n},) * 3,
        target="cuda",
        compile_to="fused",
    )
    assert "fusion.result_storage" not in dynamic.mlir
    assert any("an input of dynamic size" in r.message for r in dynamic.remarks)


def test_cuda_online_softmax_compiles_without_caller_storage() -> None:
    """The online-softmax loop nest sizes its blocks' temporaries per block, on the host:
    with its transient memory from the caller, IREE's stream phase could not hoist one
    size out of the loop and the compile failed once the rows made two blocks."""
    q = torch.randn(1, 2, 300, 16)
    module = fc.compile(
        ThreeResults(), example_args=(q, q, q), target="cuda", attention="online-softmax"
    )
    assert module.vmfb and module.stats["attention_ops"] == 1, module.remarks
    assert any("an online-softmax loop nest" in r.message for r in module.remarks)


def test_generated_kernels_take_their_scratch_memory_from_the_caller() -> None:
    """The sm_90 kernel's scratch (Triton's global scratch) is transient memory: in the
    caller's buffer, no allocation on the queue per call."""
    q = torch.randn(1, 2, 128, 64, dtype=torch.float16)
    hal = fc.compile(
        ThreeResults(), example_args=(q, q, q), target="cuda", cuda_arch="sm_90",
        compile_to="hal",
    )  # fmt: skip
    assert "hal.device.queue.alloca" not in hal.mlir
    assert "iree.abi.transients.size.constant" in hal.mlir


def test_a_call_records_its_command_buffer_once() -> None:
    """With its buffers all from the caller and the transient memory's size a constant,
    IREE records the call's command buffer once (at load) and each call submits it with
    its own buffers: a generated kernel's bindings too, and a weight's."""
    x = torch.randn(2, 128, 64, dtype=torch.float16)
    model = Projected().half()
    vm = fc.compile(model, example_args=(x,), target="cuda", cuda_arch="sm_90", compile_to="vm")
    assert "memoize_result" in vm.mlir
    assert "hal.device.queue.execute.indirect" in vm.mlir
    assert "hal.command_buffer.create" not in _function(vm.mlir, "@main$async(")
    n = torch.export.Dim("n", min=2, max=256)
    dynamic = fc.compile(
        model, example_args=(x,), dynamic_shapes=({1: n},), target="cuda", compile_to="vm"
    )
    assert "memoize_result" not in dynamic.mlir


@needs_glslang
@needs_vulkan
def test_a_vulkan_call_replays_its_command_buffer_with_each_calls_buffers() -> None:
    """Vulkan: IREE allocates results and transient memory per call; the generated
    shader's bindings are slots too, so the command buffer is recorded once and each
    call (and each call queued behind another) reads and writes its own buffers."""
    model = Projected().eval()
    x = torch.randn(2, 128, 64)
    kwargs = dict(target="vulkan", vulkan_target="vp_android_baseline_2022")
    vm = fc.compile(model, example_args=(x,), compile_to="vm", **kwargs)
    assert "memoize_result" in vm.mlir
    run = fc.load(fc.compile(model, example_args=(x,), **kwargs), device="vulkan")
    inputs = [torch.randn(2, 128, 64) for _ in range(3)]
    assert all(rel_error(run(x), model(x)) < 1e-5 for x in inputs)
    queued = [run["main"].submit(x) for x in inputs]
    assert all(rel_error(p.result(), model(x)) < 1e-5 for p, x in zip(queued, inputs, strict=True))


class Projected(torch.nn.Module):
    """A weight, a generated attention kernel and IREE's own dispatches in one call."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(64, 192)

    def forward(self, x):
        q, k, v = self.qkv(x).view(2, -1, 3, 2, 32).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return torch.relu(o.transpose(1, 2).reshape(2, -1, 64)) + x


def _function(vm: str, header: str) -> str:
    start = vm.index(header)
    end = vm.find("vm.func", start + 1)
    return vm[start:end]
