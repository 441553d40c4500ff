"""``fc.load``: runs a compiled module with torch tensors or numpy arrays.

Needs only ``iree-base-runtime``, numpy and torch: this module never imports the
compiler, so it works on deploy-only machines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import iree.runtime as rt
import numpy as np
import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

from fusion_compiler.errors import ArgumentError, FusionCompilerError

# nanobind's leak report at interpreter exit is about the runtime's bindings, not user code.
rt._binding.disable_leak_checker()

_TENSOR = re.compile(r"tensor<([^>]*)>")
_DLPACK_CUDA = 2  # DLDeviceType kDLCUDA
_DTYPES: dict[str, torch.dtype] = {
    "f64": torch.float64,
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "i64": torch.int64,
    "i32": torch.int32,
    "i16": torch.int16,
    "i8": torch.int8,
    "ui8": torch.uint8,
    "i1": torch.bool,
}
# numpy has no bfloat16: such tensors travel as their bits, typed for IREE explicitly.
_BITS_AS = {torch.bfloat16: (torch.int16, rt.HalElementType.BFLOAT_16)}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int | None, ...]  # None for a dynamic dimension
    dtype: torch.dtype

    @classmethod
    def parse(cls, text: str) -> TensorSpec:
        """``2x?x64xf32`` (the inside of an MLIR tensor type)."""
        *dims, element = text.split("x")
        if element not in _DTYPES:
            raise FusionCompilerError(f"unsupported element type {element!r} in tensor<{text}>")
        shape = tuple(None if d == "?" else int(d) for d in dims)
        return cls(shape, _DTYPES[element])

    def __str__(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"({dims}) {str(self.dtype).removeprefix('torch.')}"

    def matches(self, shape: tuple[int, ...], dtype: torch.dtype) -> bool:
        if dtype != self.dtype or len(shape) != len(self.shape):
            return False
        return all(want is None or want == got for want, got in zip(self.shape, shape, strict=True))


def _specs(text: str) -> list[TensorSpec | None]:
    """``tensor<2x3xf32>;*;...`` -> specs, None for ``*`` (an argument the module ignores)."""
    return [None if item == "*" else TensorSpec.parse(item[7:-1]) for item in text.split(";")]


class _Timeline:
    """One semaphore per module: calls submitted to it run in submission order."""

    def __init__(self, device: rt.HalDevice):
        self._semaphore = device.create_semaphore(0)
        self._value = 0

    def next(self) -> tuple[rt.HalFence, rt.HalFence]:
        """The fence a new call waits on (the previous call's end) and the one it signals."""
        wait = rt.HalFence.create_at(self._semaphore, self._value)
        self._value += 1
        return wait, rt.HalFence.create_at(self._semaphore, self._value)


def _buffer_view(value) -> rt.HalBufferView:
    return value._buffer_view if isinstance(value, rt.DeviceArray) else value


class Function:
    """One entry point of a loaded module: checks its arguments, converts, calls."""

    def __init__(
        self,
        name: str,
        function,
        device: rt.HalDevice,
        zero_copy: bool = False,
        asynchronous: tuple | None = None,  # (vm context, the $async function, timeline)
    ):
        self.name = name
        self._function = function
        self._device = device
        # CUDA tensors go in and come out through DLPack when the module runs on "cuda".
        self._zero_copy = zero_copy
        self._asynchronous = asynchronous
        reflection = function.vm_function.reflection
        self.inputs: list[TensorSpec | None] | None = None
        if "fusion.inputs" in reflection:
            self.inputs = _specs(reflection["fusion.inputs"])
        elif "iree.abi.declaration" in reflection:
            declaration = reflection["iree.abi.declaration"]
            self.inputs = [TensorSpec.parse(t) for t in _TENSOR.findall(declaration.split("->")[0])]

    def __call__(self, *args: torch.Tensor | np.ndarray):
        tensors, on_gpu = self._arguments(args)
        results = self._function(*[self._to_device(t) for t in tensors])
        convert = self._to_cuda if on_gpu else self._to_torch
        if isinstance(results, (tuple, list)):
            return tuple(convert(r) for r in results)
        return convert(results)

    def submit(self, *args: torch.Tensor | np.ndarray) -> Pending:
        """Queues the call without waiting for it (as CUDA launches are queued); calls
        submitted one after another run in order. ``.result()`` waits and converts."""
        if self._asynchronous is None:
            raise FusionCompilerError(f"{self.name} has no asynchronous form in this module")
        context, function, timeline = self._asynchronous
        tensors, on_gpu = self._arguments(args)
        arguments = rt.VmVariantList(len(tensors) + 2)
        for tensor in tensors:
            arguments.push_ref(_buffer_view(self._to_device(tensor)))
        wait, done = timeline.next()
        arguments.push_ref(wait)
        arguments.push_ref(done)
        results = rt.VmVariantList(1)
        context.invoke(function, arguments, results)
        convert = self._to_cuda if on_gpu else self._host_result
        return Pending(done, results, convert)

    def _arguments(self, args: tuple) -> tuple[list[torch.Tensor], bool]:
        """The checked tensors of a call, and whether it runs on CUDA tensors."""
        tensors = [self._check(i, arg) for i, arg in enumerate(args)]
        if self.inputs is not None and len(tensors) != len(self.inputs):
            raise ArgumentError(
                f"{self.name} takes {len(self.inputs)} tensor argument(s) "
                f"({'; '.join(str(s or 'any tensor') for s in self.inputs)}), got {len(tensors)}"
            )
        on_gpu = self._zero_copy and any(t.is_cuda for t in tensors)
        if on_gpu:
            torch.cuda.current_stream().synchronize()  # IREE reads on its own stream
        return tensors, on_gpu

    def _host_result(self, view: rt.HalBufferView) -> torch.Tensor:
        return self._to_torch(rt.DeviceArray(self._device, view))

    def _check(self, index: int, arg: object) -> torch.Tensor:
        if isinstance(arg, np.ndarray):
            arg = torch.from_numpy(arg)
        if not isinstance(arg, torch.Tensor):
            raise ArgumentError(
                f"{self.name}: argument {index} is a {type(arg).__name__}; "
                "expected a torch.Tensor or numpy.ndarray"
            )
        if self.inputs is not None and index < len(self.inputs):
            spec = self.inputs[index]
            if spec is not None and not spec.matches(tuple(arg.shape), arg.dtype):
                got = TensorSpec(tuple(arg.shape), arg.dtype)
                raise ArgumentError(
                    f"{self.name}: argument {index} has shape/dtype {got}, expected {spec}"
                )
        return arg

    def _to_device(self, tensor: torch.Tensor) -> rt.DeviceArray | rt.HalBufferView:
        if self._zero_copy and tensor.is_cuda:
            return self._device.from_dlpack_capsule(to_dlpack(tensor.detach().contiguous()))
        host = tensor.detach().cpu().contiguous()
        if host.dtype in _BITS_AS:
            bits, element_type = _BITS_AS[host.dtype]
            return self._device.allocator.allocate_buffer_copy(
                memory_type=rt.MemoryType.DEVICE_LOCAL,
                allowed_usage=rt.BufferUsage.DEFAULT,
                device=self._device,
                buffer=host.view(bits).numpy(),
                element_type=element_type,
            )
        return rt.asdevicearray(self._device, host.numpy())

    def _to_cuda(self, result) -> torch.Tensor:
        """A result as a CUDA tensor: shared through DLPack where IREE can export it.

        IREE 3.13's CUDA allocator cannot export the buffers it allocates for results
        (measured: UNAVAILABLE), so those still travel device -> host -> device.
        """
        view = _buffer_view(result)
        try:
            return from_dlpack(self._device.create_dlpack_capsule(view, _DLPACK_CUDA, 0))
        except RuntimeError:
            return self._to_torch(result).cuda()

    def _to_torch(self, result) -> torch.Tensor:
        try:
            array = result.to_host()
        except ValueError as error:  # a driver that imports only page-aligned host memory
            if "minImportedHostPointerAlignment" not in str(error):
                raise
            array = _staged_to_host(self._device, result)
        if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which torch cannot take
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(array))


def _staged_to_host(device: rt.HalDevice, result: rt.DeviceArray) -> np.ndarray:
    """A result copied to the host through a staging buffer of the device's allocator.

    The runtime's own copy imports a fresh NumPy array into the device (Vulkan's
    external host memory), which drivers requiring page-aligned pointers refuse
    (llvmpipe: 4096 bytes); this is the runtime's other path, taken explicitly.
    """
    view = result._buffer_view
    source = view.get_buffer()
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=source.byte_length(),
    )
    semaphore = device.create_semaphore(0)
    device.queue_copy(
        source,
        staging,
        wait_semaphores=rt.HalFence.create_at(semaphore, 0),
        signal_semaphores=rt.HalFence.create_at(semaphore, 1),
    )
    rt.HalFence.create_at(semaphore, 1).wait()
    dtype = rt.HalElementType.map_to_dtype(view.element_type)
    return np.array(staging.map().asarray(view.shape, dtype))


class Pending:
    """A call submitted with ``Function.submit``: its results once its fence is reached."""

    def __init__(self, fence: rt.HalFence, results: rt.VmVariantList, convert) -> None:
        self._fence, self._results, self._convert = fence, results, convert

    def wait(self) -> None:
        self._fence.wait()

    def result(self):
        """Waits for the call, then returns what calling the function would have."""
        self.wait()
        values = [
            self._convert(self._results.get_as_ref(i).deref(rt.HalBufferView))
            for i in range(self._results.size)
        ]
        return values[0] if len(values) == 1 else tuple(values)


# IREE's CUDA driver flags, set once before the first CUDA device is made. Measured on
# the H200 (benchmarks/iree_call_overhead.py): with stream-ordered (async) allocations a
# blocking call of a one-kernel attention module took 3.3 ms for 0.08 ms of kernel and
# 26.4 ms for 3.9 ms; without them 0.55 ms and 4.8 ms.
_CUDA_FLAGS = ("--cuda_async_allocations=false",)
_cuda_flags_set = False


def _set_device_flags(device: str) -> None:
    global _cuda_flags_set
    if device.startswith("cuda") and not _cuda_flags_set:
        rt.flags.parse_flags(*_CUDA_FLAGS)
        _cuda_flags_set = True


class LoadedModule:
    """A compiled module on a device. ``run(x)`` calls ``main``; ``run["f"](x)`` another."""

    def __init__(self, vmfb: bytes, device: str):
        _set_device_flags(device)
        try:
            self.config = rt.Config(device)
        except (ValueError, RuntimeError) as exc:
            raise FusionCompilerError(
                f"cannot open IREE device {device!r}: {exc}. "
                "Devices: local-task (CPU), cuda, vulkan; the module must be compiled for it."
            ) from None
        self.device = device
        try:
            self._vm_module = rt.VmModule.copy_buffer(self.config.vm_instance, vmfb)
        except (ValueError, RuntimeError) as exc:
            raise FusionCompilerError(f"not a loadable IREE module: {exc}") from None
        self._context = rt.SystemContext(config=self.config)
        try:  # the device builds the module's executables here
            self._context.add_vm_module(self._vm_module)
        except RuntimeError as exc:
            first = str(exc).splitlines()[0].removeprefix("Error registering modules: ")
            hint = ""
            if "vkCreateComputePipelines" in first:
                hint = (
                    " The Vulkan driver refused to build one of the module's compute "
                    "pipelines. NVIDIA's driver 580 refuses IREE's cooperative-matrix code "
                    "(fp16 matmuls under vulkan_target='ampere'): compile with "
                    "vulkan_target='pascal' (the default); "
                    "benchmarks/per_dispatch.py finds the dispatch."
                )
            raise FusionCompilerError(
                f"cannot load the module on {device!r}: {first}.{hint}"
            ) from None
        self._timeline: _Timeline | None = None  # made for the first submitted call
        self.function_names = [
            name
            for name in self._vm_module.function_names
            if not name.startswith("__") and not name.endswith("$async")
        ]

    def __getitem__(self, name: str) -> Function:
        if name not in self.function_names:
            raise KeyError(f"no function {name!r}; this module has {self.function_names}")
        module = self._context.modules[self._vm_module.name]
        queued = None
        asynchronous = self._vm_module.lookup_function(f"{name}$async")
        if asynchronous is not None:
            if self._timeline is None:
                self._timeline = _Timeline(self.config.device)
            queued = (self._context.vm_context, asynchronous, self._timeline)
        return Function(
            name,
            module[name],
            self.config.device,
            zero_copy=self.device == "cuda",
            asynchronous=queued,
        )

    def __call__(self, *args: torch.Tensor | np.ndarray):
        name = "main" if "main" in self.function_names else self.function_names[0]
        return self[name](*args)


def load(module: object, device: str = "local-task") -> LoadedModule:
    """Loads a compiled module: a ``.vmfb`` path, its bytes, or what ``fc.compile`` returned."""
    if isinstance(module, (str, Path)):
        path = Path(module)
        if not path.exists():
            raise FusionCompilerError(f"{path}: no such file")
        return LoadedModule(path.read_bytes(), device)
    if isinstance(module, (bytes, bytearray, memoryview)):
        return LoadedModule(bytes(module), device)
    vmfb = getattr(module, "vmfb", None)
    if vmfb is None:
        raise FusionCompilerError(
            "this module has no bytecode: it was compiled with compile_to before 'vmfb'"
            if hasattr(module, "vmfb")
            else f"cannot load a {type(module).__name__}: expected a .vmfb path, bytes or "
            "the result of fc.compile"
        )
    return LoadedModule(vmfb, device)
