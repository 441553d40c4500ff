"""``fc.load``: runs a compiled module with torch tensors or numpy arrays.

Needs only ``iree-base-runtime``, numpy and torch: this module never imports the
compiler, so it works on deploy-only machines.
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import io
import json
import math
import operator
import re
import struct
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import iree.runtime as rt
import numpy as np
import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

from fusion_compiler.errors import (
    ArgumentError,
    DamagedFileError,
    DimensionMismatchError,
    DimensionRangeError,
    FusionCompilerError,
    ModuleFileError,
    WrongDeviceError,
)
from fusion_compiler.targets import VENDOR_NAMES, VULKAN_VENDORS

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
    "ui16": torch.uint16,
    "ui32": torch.uint32,
    "ui64": torch.uint64,
    "i1": torch.bool,
}
# numpy has no bfloat16: such tensors travel as their bits, typed for IREE explicitly.
_BITS_AS = {torch.bfloat16: (torch.int16, rt.HalElementType.BFLOAT_16)}
_ELEMENT_TYPES = {
    torch.float64: rt.HalElementType.FLOAT_64,
    torch.float32: rt.HalElementType.FLOAT_32,
    torch.float16: rt.HalElementType.FLOAT_16,
    torch.bfloat16: rt.HalElementType.BFLOAT_16,
    torch.int64: rt.HalElementType.INT_64,
    torch.int32: rt.HalElementType.INT_32,
    torch.int16: rt.HalElementType.INT_16,
    torch.int8: rt.HalElementType.INT_8,
    torch.uint8: rt.HalElementType.UINT_8,
    torch.uint16: rt.HalElementType.UINT_16,
    torch.uint32: rt.HalElementType.UINT_32,
    torch.uint64: rt.HalElementType.UINT_64,
    torch.bool: rt.HalElementType.BOOL_8,
}
# How many result storage arguments follow an entry point's inputs (signature.STORAGE_KEY)
_STORAGE_KEY = "fusion.result_storage"
# the scope of a module's parameters (frontend.PARAMETER_SCOPE; the runtime imports no
# compiler module)
_PARAMETER_SCOPE = "model"
_PARAMETERS_KEY = "fusion.parameters"  # what it reads, key=tensor<...> (signature)
_MUTATED_KEY = "fusion.mutated"  # the inputs a call updates in place (signature.MUTATED_KEY)
_VULKAN_TARGET_KEY = "fusion.vulkan_target"  # signature.VULKAN_TARGET_KEY
_NAMES_KEY = "fusion.input_names"  # signature.NAMES_KEY
_UNSIGNED_OUTPUTS_KEY = "fusion.unsigned_outputs"  # signature.UNSIGNED_OUTPUTS_KEY
_UNSIGNED_OF = {
    torch.int8: torch.uint8,
    torch.int16: torch.uint16,
    torch.int32: torch.uint32,
    torch.int64: torch.uint64,
}
_SIGNED_OF = {unsigned: signed for signed, unsigned in _UNSIGNED_OF.items()}


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int | None, ...]  # None for a dynamic dimension
    dtype: torch.dtype
    # no dynamic dimension: a call's shape is checked by one comparison (``matches``)
    static: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "static", None not in self.shape)

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
        """Whether a tensor of ``shape`` (a tuple or torch.Size) and ``dtype`` fits: on
        every call, so static specs take one tuple comparison (a generator over the dims
        costs 2 us a call on a slow host)."""
        if dtype != self.dtype:
            return False
        if self.static:
            return shape == self.shape
        if len(shape) != len(self.shape):
            return False
        return all(want is None or want == got for want, got in zip(self.shape, shape, strict=True))


def _specs(text: str) -> list[TensorSpec | None]:
    """``tensor<2x3xf32>;*;...`` -> specs, None for ``*`` (an argument the module ignores)."""
    return [None if item == "*" else TensorSpec.parse(item[7:-1]) for item in text.split(";")]


# The arithmetic of the front end's size expressions (frontend._expression).
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _evaluate(node: ast.expr, values: dict[str, int]) -> int:
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, values)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        return _ARITHMETIC[type(node.op)](left, right)
    raise ValueError(f"not a size expression: {ast.unparse(node)}")


@dataclass(frozen=True)
class _Dim:
    """A dynamic dim of an argument and what it is in the program's symbols."""

    index: int
    dim: int
    expression: ast.expr
    symbols: frozenset[str]

    @property
    def name(self) -> str:
        return f"args[{self.index}].shape[{self.dim}]"


def _dims(text: str) -> list[_Dim]:
    """``;``-separated arguments of ``,``-separated dims (signature.DIMS_KEY); dims whose
    expression is not plain arithmetic over symbols are left unchecked."""
    found = []
    for index, argument in enumerate(text.split(";")):
        for dim, expression in enumerate(argument.split(",")):
            if not expression:
                continue
            try:
                tree = ast.parse(expression, mode="eval").body
                symbols = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name))
                _evaluate(tree, dict.fromkeys(symbols, 1))
            except (SyntaxError, ValueError, ArithmeticError):
                continue
            found.append(_Dim(index, dim, tree, symbols))
    return found


def _ranges(text: str) -> dict[str, tuple[int | None, int | None]]:
    """``s0=2:4096;s1=:64`` (signature.RANGES_KEY) -> {symbol: (min or None, max or None)}."""
    ranges = {}
    for entry in filter(None, text.split(";")):
        symbol, _, bounds = entry.partition("=")
        low, _, high = bounds.partition(":")
        ranges[symbol] = (int(low) if low else None, int(high) if high else None)
    return ranges


class _Renamed(ast.NodeTransformer):
    """Symbols replaced by the argument dims that bind them, for messages."""

    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.expr:
        return ast.parse(self.names.get(node.id, node.id), mode="eval").body


class _Timeline:
    """One semaphore per module: calls submitted to it run in submission order. What a
    queued call reads or writes (torch tensors: its inputs, its storage) is held until
    the call is done, so that torch cannot hand that memory out again before."""

    def __init__(self, device: rt.HalDevice):
        self._semaphore = device.create_semaphore(0)
        self._value = 0
        self._held: list[tuple[int, list]] = []

    def next(self, hold: list) -> tuple[rt.HalFence, rt.HalFence]:
        """The fence a new call waits on (the previous call's end) and the one it
        signals; ``hold`` is kept until then."""
        reached = self._semaphore.query()
        self._held = [(value, held) for value, held in self._held if value > reached]
        wait = rt.HalFence.create_at(self._semaphore, self._value)
        self._value += 1
        self._held.append((self._value, hold))
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
        staged: bool = False,  # inputs and results copied through staging buffers (Vulkan)
        asynchronous: tuple | None = None,  # (vm context, the $async function, timeline)
        transient_size: int = 0,  # bytes of transient memory a call with storage takes
    ):
        self.name = name
        self._function = function
        self._device = device
        # CUDA tensors go in and come out through DLPack when the module runs on "cuda".
        self._zero_copy = zero_copy
        self._staged = staged
        # on Vulkan, the device memory of finished calls' inputs (blocking, or submitted
        # and waited for), by size, for the next call's: IREE 3.13 never frees a buffer a
        # Vulkan dispatch read (H100, driver 580: every call on fresh inputs kept their
        # 64 MiB), so a call writes its inputs into the memory an earlier one used
        self._spare_inputs: dict[int, list[rt.HalBuffer]] = {}
        self._asynchronous = asynchronous
        reflection = function.vm_function.reflection
        self.inputs: list[TensorSpec | None] | None = None
        if "fusion.inputs" in reflection:
            self.inputs = _specs(reflection["fusion.inputs"])
        elif "iree.abi.declaration" in reflection:
            declaration = reflection["iree.abi.declaration"]
            self.inputs = [TensorSpec.parse(t) for t in _TENSOR.findall(declaration.split("->")[0])]
        # how the dynamic dims relate (K and V of one length), where the front end knew it
        self.dims = _dims(reflection["fusion.dims"]) if "fusion.dims" in reflection else []
        self.ranges = _ranges(reflection.get("fusion.dim_ranges", ""))
        self._results = None
        if "fusion.results" in reflection:
            self._results = json.loads(reflection["fusion.results"])
        # results of an unsigned type, which IREE returns as signed (signature.UNSIGNED_OUTPUTS_KEY)
        unsigned = reflection.get(_UNSIGNED_OUTPUTS_KEY, "")
        self._unsigned_results = [int(i) for i in unsigned.split(",") if i]
        # results written into storage the call passes, then its transient memory
        # (fusion-caller-storage): static types, a size IREE computed
        self._storage: list[TensorSpec] = []
        if int(reflection.get(_STORAGE_KEY, 0)):
            self._storage = [s for s in _specs(reflection["fusion.outputs"]) if s is not None]
        self._transient_size = transient_size
        # the transient memory of finished blocking calls on CUDA, with its import, for the
        # next one (a call takes one while it runs: calls from several threads each get
        # their own); torch keeps it allocated between calls
        self._spare_transients: list[tuple[torch.device, torch.Tensor, rt.HalBufferView]] = []
        self.mutated = [int(i) for i in reflection.get(_MUTATED_KEY, "").split(",") if i]
        # the model's names of its inputs, for errors (signature.NAMES_KEY)
        self._names = [n for n in reflection.get(_NAMES_KEY, "").split(",") if n]
        # our modules take and return tensors alone ("fusion.outputs"): called straight
        # through the VM, without IREE's FunctionInvoker packing the arguments and
        # wrapping each result on the way (a module from elsewhere keeps the invoker)
        self._direct = None
        if "fusion.outputs" in reflection:
            count = max(reflection["fusion.outputs"].count(";") + 1, 1)
            self._direct = (function._vm_context, function.vm_function, count)

    def __call__(self, *args: torch.Tensor | np.ndarray):
        tensors, on_gpu = self._arguments(args)
        storage, kept = self._result_storage(tensors, on_gpu, reuse=True)
        device_values = [self._to_device(t) for t in tensors]
        results = self._invoke([*map(_buffer_view, device_values), *storage])
        if kept:  # the call is done: its transient memory is free for the next
            self._spare_transients.append((kept[-1].device, kept[-1], storage[-1]))
        self._write_back(args, tensors, device_values)
        if kept:  # written where torch allocated them (the last is transient memory)
            return self._model_results(kept[:-1])
        convert = self._to_cuda if on_gpu else self._host_result
        values = self._model_results([convert(r) for r in results])
        self._release_inputs(tensors, device_values)
        return values

    def _spare_input(self, size: int) -> rt.HalBuffer | None:
        """A finished call's input memory of ``size`` bytes, where one is kept."""
        try:
            return self._spare_inputs.get(size, []).pop()  # atomic: one caller each
        except IndexError:
            return None

    def _release_inputs(self, tensors: list[torch.Tensor], device_values: list) -> None:
        """On Vulkan, a finished call's input memory, kept by size for later calls'."""
        if not self._staged:
            return
        for tensor, view in zip(tensors, device_values, strict=True):
            spare = self._spare_inputs.setdefault(_byte_size(tensor), [])
            if len(spare) < _SPARE_INPUTS:
                spare.append(view.get_buffer())

    def _invoke(self, views: list[rt.HalBufferView]) -> list:
        """The entry point called on ``views``: its results' buffer views."""
        if self._direct is None:
            results = self._function(*views)
            if results is None:
                return []
            if not isinstance(results, (tuple, list)):
                results = [results]
            return [_buffer_view(r) for r in results]
        context, function, count = self._direct
        results = rt.VmVariantList(count)
        context.invoke(function, _ref_list(views), results)
        return _views(results)

    def _write_back(self, args: tuple, tensors: list[torch.Tensor], device_values: list) -> None:
        """The inputs the call updated in place, copied into the caller's arrays where
        IREE wrote into a copy of them (on the host, or a non-contiguous CUDA tensor);
        a contiguous CUDA tensor is the buffer IREE wrote."""
        for index in self.mutated:
            tensor = tensors[index]
            if self._shares_memory(tensor):
                continue
            value = self._host_result(_buffer_view(device_values[index]))
            if isinstance(args[index], np.ndarray):
                np.copyto(args[index], value.numpy())
            else:
                args[index].copy_(value.reshape(args[index].shape))

    def _shares_memory(self, tensor: torch.Tensor) -> bool:
        """Whether IREE reads and writes ``tensor``'s own memory (``_to_device``)."""
        return self._zero_copy and tensor.is_cuda and tensor.is_contiguous()

    def _result_storage(
        self, tensors: list[torch.Tensor], on_gpu: bool, reuse: bool = False
    ) -> tuple[list[rt.HalBufferView], list[torch.Tensor]]:
        """The buffers the call writes its results into and takes its transient memory
        from, and, on CUDA, the torch tensors they are: the results (returned with no
        copy), then the transient memory (kept until the call is done; with ``reuse``, a
        finished blocking call's where there is one)."""
        if not self._storage:
            return [], []
        shapes = [(s.shape, s.dtype) for s in self._storage]
        shapes.append(((max(self._transient_size, 1),), torch.uint8))
        if on_gpu:  # from torch's caching allocator: no device allocation per call
            device = next(t.device for t in tensors if t.is_cuda)
            spare = self._spare_transient(device) if reuse else None
            if spare is not None:
                shapes.pop()
            kept = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in shapes]
            views = [_buffer_view(self._device.from_dlpack_capsule(to_dlpack(t))) for t in kept]
            if spare is not None:
                kept.append(spare[0])
                views.append(spare[1])
            return views, kept
        views = []
        for shape, dtype in shapes:
            buffer = self._device.allocator.allocate_buffer(
                memory_type=rt.MemoryType.DEVICE_LOCAL,
                allowed_usage=rt.BufferUsage.DEFAULT,
                allocation_size=max(math.prod(shape) * dtype.itemsize, 1),
            )
            views.append(rt.HalBufferView(buffer, list(shape), _ELEMENT_TYPES[dtype]))
        return views, []

    def _spare_transient(self, device: torch.device) -> tuple | None:
        """A finished blocking call's transient memory on ``device`` (tensor, view)."""
        try:
            held_on, tensor, view = self._spare_transients.pop()  # atomic: one per call
        except IndexError:
            return None
        return (tensor, view) if held_on == device else None

    def submit(self, *args: torch.Tensor | np.ndarray) -> Pending:
        """Queues the call without waiting for it (as CUDA launches are queued); calls
        submitted one after another run in order. ``.result()`` waits and converts."""
        if self._asynchronous is None:
            raise FusionCompilerError(f"{self.name} has no asynchronous form in this module")
        context, function, timeline = self._asynchronous
        tensors, on_gpu = self._arguments(args)
        storage, kept = self._result_storage(tensors, on_gpu)
        device_values = [self._to_device(t) for t in tensors]
        wait, done = timeline.next([*tensors, *kept])
        views = [*map(_buffer_view, device_values), *storage]
        results = rt.VmVariantList(1)
        context.invoke(function, _ref_list([*views, wait, done]), results)
        convert = self._to_cuda if on_gpu else self._host_result

        def finish() -> None:  # once the call is done
            self._write_back(args, tensors, device_values)
            self._release_inputs(tensors, device_values)

        return Pending(done, results, convert, self._model_results, kept, finish)

    def _model_results(self, tensors: list[torch.Tensor]):
        """What the model's forward returned: the module's tensors (those of an unsigned
        type viewed as such), with the constants (None) the compiled program could not
        return put back in their places."""
        for i, tensor in enumerate(tensors):
            # IREE returns an input it passes through with the input's element type
            signs = _UNSIGNED_OF if i in self._unsigned_results else _SIGNED_OF
            if tensor.dtype in signs:
                tensors[i] = tensor.view(signs[tensor.dtype])
        if self._results is not None:
            remaining = iter(tensors)
            values = [slot["value"] if slot else next(remaining) for slot in self._results]
        else:
            values = tensors
        return values[0] if len(values) == 1 else tuple(values)

    def _arguments(self, args: tuple) -> tuple[list[torch.Tensor], bool]:
        """The checked tensors of a call, and whether it runs on CUDA tensors."""
        tensors = [self._check(i, arg) for i, arg in enumerate(args)]
        if self.inputs is not None and len(tensors) != len(self.inputs):
            raise ArgumentError(
                f"{self.name} takes {len(self.inputs)} tensor argument(s) "
                f"({'; '.join(str(s or 'any tensor') for s in self.inputs)}), got {len(tensors)}"
            )
        self._check_dims(tensors)
        on_gpu = self._zero_copy and any(t.is_cuda for t in tensors)
        if on_gpu:  # IREE reads on its own stream
            _wait_for_torch(next(t.device.index for t in tensors if t.is_cuda))
        return tensors, on_gpu

    def _host_result(self, view: rt.HalBufferView) -> torch.Tensor:
        return self._to_torch(rt.DeviceArray(self._device, view))

    def _argument(self, index: int) -> str:
        """``argument 3 (`attention_mask`)``: an input by its index, and its name in the model
        where the module knows it."""
        name = self._names[index] if index < len(self._names) else None
        return f"argument {index} (`{name}`)" if name else f"argument {index}"

    def _check(self, index: int, arg: object) -> torch.Tensor:
        if isinstance(arg, np.ndarray):
            arg = self._from_numpy(index, arg)
        if not isinstance(arg, torch.Tensor):
            raise ArgumentError(
                f"{self.name}: {self._argument(index)} is a {type(arg).__name__}; "
                "expected a torch.Tensor or numpy.ndarray"
            )
        if arg.layout != torch.strided or arg.is_meta:
            kind = "on the meta device (it has no data)" if arg.is_meta else f"{arg.layout}"
            raise ArgumentError(
                f"{self.name}: {self._argument(index)} is {kind}; "
                "give a dense tensor with its values"
            )
        if self.inputs is not None and index < len(self.inputs):
            spec = self.inputs[index]
            if spec is not None and not spec.matches(arg.shape, arg.dtype):
                got = TensorSpec(tuple(arg.shape), arg.dtype)
                raise ArgumentError(
                    f"{self.name}: {self._argument(index)} has shape/dtype {got}, expected {spec}"
                )
        return arg

    def _from_numpy(self, index: int, array: np.ndarray) -> torch.Tensor:
        """A tensor of ``array``'s values: torch takes neither negative strides nor a
        non-native byte order, so those are copied into native, contiguous memory."""
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        array = np.require(array, requirements="C")  # ascontiguousarray makes 0-d 1-d
        if not array.flags.writeable:  # torch warns of tensors over read-only memory
            array = array.copy()
        try:
            return torch.from_numpy(array)
        except TypeError:
            raise ArgumentError(
                f"{self.name}: {self._argument(index)} is a numpy array of {array.dtype}, which "
                "torch has no dtype for; convert it to one the module takes"
            ) from None

    def _check_dims(self, tensors: list[torch.Tensor]) -> None:
        """Dynamic dims are inside the ranges they were exported with, and those the
        exported program ties together (the same symbol, or one derived from another)
        agree: IREE runs such a call, on memory past the shorter."""
        if not self.dims or len(tensors) <= max(d.index for d in self.dims):
            return
        binders: dict[str, _Dim] = {}  # each symbol's value is the first dim that is just it
        for dim in self.dims:
            if isinstance(dim.expression, ast.Name):
                binders.setdefault(dim.expression.id, dim)
        values = {name: tensors[d.index].shape[d.dim] for name, d in binders.items()}
        names = {name: d.name for name, d in binders.items()}
        for symbol, (low, high) in self.ranges.items():
            got = values.get(symbol)
            if got is None:
                continue
            if (low is not None and got < low) or (high is not None and got > high):
                bound = binders[symbol]
                raise DimensionRangeError(self.name, bound.index, bound.dim, got, low, high)
        for dim in self.dims:
            if not dim.symbols <= values.keys():
                continue
            got = tensors[dim.index].shape[dim.dim]
            try:
                expected = _evaluate(dim.expression, values)
            except ArithmeticError:  # a dim // 0: one of its factors is wrong; IREE says which
                continue
            if got != expected:
                # a copy: the transformer rewrites the tree it visits, kept for later calls
                rule = ast.unparse(_Renamed(names).visit(copy.deepcopy(dim.expression)))
                raise DimensionMismatchError(self.name, dim.index, dim.dim, got, expected, rule)

    def _to_device(self, tensor: torch.Tensor) -> rt.DeviceArray | rt.HalBufferView:
        """``tensor`` where the module reads it: shared with torch on CUDA, else copied to
        the device (on Vulkan, into a finished call's input memory where one is kept)."""
        if tensor.requires_grad:  # (detaching costs 1 us a call where there is nothing to drop)
            tensor = tensor.detach()
        if self._zero_copy and tensor.is_cuda:
            return self._device.from_dlpack_capsule(to_dlpack(tensor.contiguous()))
        host = tensor.cpu().contiguous()
        if self._staged:
            return _staged_to_device(self._device, host, self._spare_input(_byte_size(host)))
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
        """A result IREE allocated as a CUDA tensor: shared through DLPack (IREE 3.13
        exports the buffers its CUDA allocator makes; measured on an H200), through the
        host where it cannot. Static results need neither: they are written into
        tensors torch allocated (``_result_storage``)."""
        view = _buffer_view(result)
        try:
            return from_dlpack(self._device.create_dlpack_capsule(view, _DLPACK_CUDA, 0))
        except RuntimeError:
            return self._host_result(view).cuda()

    def _to_torch(self, result) -> torch.Tensor:
        if self._staged:
            array = _staged_to_host(self._device, result)
        else:
            array = result.to_host()
        if array.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which torch cannot take
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        # np.ascontiguousarray would make a 0-d result 1-d
        return torch.from_numpy(np.require(array, requirements="C"))


# buffers of one size kept for later calls' inputs (Function._spare_inputs): enough for
# the inputs of that size of a call or two at once
_SPARE_INPUTS = 8


def _byte_size(tensor: torch.Tensor) -> int:
    """The bytes of a tensor's device copy (at least 1: IREE allocates no empty buffer)."""
    return max(tensor.numel() * tensor.element_size(), 1)


def _staged_to_device(
    device: rt.HalDevice, host: torch.Tensor, target: rt.HalBuffer | None = None
) -> rt.HalBufferView:
    """A contiguous host tensor copied into device memory (``target``, of its size, or
    fresh) through a staging buffer of the device's allocator (no host memory imported:
    see ``_staged_to_host``)."""
    size = _byte_size(host)
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_SOURCE | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=size,
    )
    if host.numel():
        bits = host.reshape(-1).view(torch.uint8).numpy()  # (a 0-d tensor has no byte view)
        staging.map().asarray(list(bits.shape), np.dtype(np.uint8))[...] = bits
    if target is None:
        target = device.allocator.allocate_buffer(
            memory_type=rt.MemoryType.DEVICE_LOCAL,
            allowed_usage=rt.BufferUsage.DEFAULT,
            allocation_size=size,
        )
    _copy_and_wait(device, staging, target)
    return rt.HalBufferView(target, list(host.shape), _ELEMENT_TYPES[host.dtype])


def _copy_and_wait(device: rt.HalDevice, source: rt.HalBuffer, target: rt.HalBuffer) -> None:
    """``source`` copied into ``target`` on the device's queue, waited for."""
    semaphore = device.create_semaphore(0)
    device.queue_copy(
        source,
        target,
        wait_semaphores=rt.HalFence.create_at(semaphore, 0),
        signal_semaphores=rt.HalFence.create_at(semaphore, 1),
    )
    rt.HalFence.create_at(semaphore, 1).wait()


def _staged_to_host(device: rt.HalDevice, result: rt.DeviceArray) -> np.ndarray:
    """A result copied to the host through a staging buffer of the device's allocator.

    The runtime's own copy imports a fresh NumPy array into the device (Vulkan's
    external host memory), which drivers requiring page-aligned pointers refuse
    (llvmpipe: 4096 bytes), and which on NVIDIA's driver ended a long run of calls in
    vkAllocateMemory failures; this is the runtime's other path, taken explicitly.
    """
    view = result._buffer_view
    source = view.get_buffer()
    staging = device.allocator.allocate_buffer(
        memory_type=int(rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE),
        allowed_usage=int(rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED),
        allocation_size=source.byte_length(),
    )
    _copy_and_wait(device, source, staging)
    dtype = rt.HalElementType.map_to_dtype(view.element_type)
    return np.array(staging.map().asarray(view.shape, dtype))


class Pending:
    """A call submitted with ``Function.submit``: its results once its fence is reached."""

    def __init__(
        self,
        fence: rt.HalFence,
        results: rt.VmVariantList,
        convert,
        structure,
        kept: list[torch.Tensor] | None = None,  # results written into torch's tensors
        finish=None,  # run once the call is done: inputs updated in place copied back, ...
    ) -> None:
        self._fence, self._results, self._convert = fence, results, convert
        self._structure, self._kept, self._finish = structure, kept, finish

    def wait(self) -> None:
        self._fence.wait()
        if self._finish is not None:
            self._finish()
            self._finish = None

    def result(self):
        """Waits for the call, then returns what calling the function would have."""
        self.wait()
        if self._kept:  # written where torch allocated them (the last is transient memory)
            return self._structure(self._kept[:-1])
        return self._structure([self._convert(view) for view in _views(self._results)])


def _ref_list(refs: list) -> rt.VmVariantList:
    """A VM argument list of ``refs`` (buffer views, fences)."""
    arguments = rt.VmVariantList(len(refs))
    for ref in refs:
        arguments.push_ref(ref)
    return arguments


def _views(results: rt.VmVariantList) -> list[rt.HalBufferView]:
    """The buffer views of a call's VM result list."""
    return [results.get_as_ref(i).deref(rt.HalBufferView) for i in range(results.size)]


def _wait_for_torch(device: int) -> None:
    """Waits until the work torch queued on ``device``'s current stream is done: the
    CUDA driver's cuStreamSynchronize on torch's raw stream (0.7 us on an H100;
    ``torch.cuda.current_stream().synchronize()`` makes a Stream object first, 4.8 us),
    torch's own call where the driver library cannot be loaded."""
    stream = torch._C._cuda_getCurrentRawStream(device)
    synchronize = _stream_synchronize()
    if synchronize is None or synchronize(stream) != 0:
        torch.cuda.current_stream(device).synchronize()  # raises torch's error, if any


@functools.cache
def _stream_synchronize():
    """libcuda's ``cuStreamSynchronize`` (which IREE's CUDA driver loads too), or None."""
    import ctypes

    try:
        function = ctypes.CDLL("libcuda.so.1").cuStreamSynchronize
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_void_p], ctypes.c_int
    return function


# IREE's CUDA driver flags, set once before the first CUDA device is made. Measured on
# the H200 (benchmarks/results/experiments.md): with stream-ordered (async) allocations a
# blocking call of a one-kernel attention module took 3.3 ms for 0.08 ms of kernel and
# 26.4 ms for 3.9 ms; without them 0.55 ms and 4.8 ms. Command buffers executed inline on
# IREE's stream where they can be: a blocking call of B4 H16 N1024 D128 0.230 -> 0.164 ms,
# the other cases within 7% (benchmarks/results/call_overhead_h200.md).
_CUDA_FLAGS = ("--cuda_async_allocations=false", "--cuda_allow_inline_execution=true")
_cuda_flags_set = False


def _set_device_flags(device: str) -> None:
    global _cuda_flags_set
    if device.startswith("cuda") and not _cuda_flags_set:
        rt.flags.parse_flags(*_CUDA_FLAGS)
        _cuda_flags_set = True


class LoadedModule:
    """A compiled module on a device. ``run(x)`` calls ``main``; ``run["f"](x)`` another."""

    def __init__(self, vmfb: bytes, device: str, source: str = "the module's bytes", weights=None):
        check_intact(vmfb, source)
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
            raise ModuleFileError(
                source,
                f"not a loadable IREE module ({exc})",
                "give a .vmfb from fc.compile (CompiledModule.save) or iree-compile",
            ) from None
        if device.startswith("vulkan"):
            _check_vulkan_device(self._vm_module, device)
        # a VM context of our own: IREE's SystemContext and its bound modules refer to
        # each other, so a module dropped by its caller kept its device memory until
        # Python's cycle collector ran (Vulkan on an H100: out of device memory after
        # ten modules loaded one after another)
        self._vm_context = rt.VmContext(self.config.vm_instance)
        self._vm_context.register_modules(self.config.default_vm_modules)
        self._weights: list[np.ndarray] = []  # the memory the parameters are read from
        if weights is not None:
            self._vm_context.register_modules([self._parameters(weights)])
        try:  # the device builds the module's executables here (and reads its parameters)
            self._vm_context.register_modules([self._vm_module])
        except (RuntimeError, ValueError) as exc:
            first = str(exc).splitlines()[0].removeprefix("Error registering modules: ")
            hint = ""
            if "no parameter found" in first or "parameter_index" in first:
                hint = " Give every weight the module reads, under the model's state-dict name."
            elif "io_parameters" in first:
                hint = (
                    " The module reads its weights from parameters (compiled with "
                    "weights='external'): give them, fc.load(module, weights=state_dict "
                    "or a .irpa/.safetensors file)."
                )
            if "vkCreateComputePipelines" in first:
                hint = (
                    " The Vulkan driver refused to build one of the module's compute "
                    "pipelines. NVIDIA's driver 580 refuses IREE's cooperative-matrix code "
                    "(fp16 matmuls under vulkan_target='ampere'): compile with "
                    "vulkan_target='pascal' (the default)."
                )
            raise FusionCompilerError(
                f"cannot load the module on {device!r}: {first}.{hint}"
            ) from None
        self._timeline: _Timeline | None = None  # made for the first submitted call
        self._functions: dict[str, Function] = {}
        self.function_names = [
            name
            for name in self._vm_module.function_names
            # not IREE's own: the $async bodies and their transient size queries
            if not name.startswith("__") and "$async" not in name
        ]

    def _parameters(self, weights) -> rt.VmModule:
        """IREE's parameter module serving ``weights`` (a state dict of tensors, or the
        path of a .irpa, .safetensors or .gguf file) under the scope the front end names
        them in (``frontend.PARAMETER_SCOPE``)."""
        index = rt.ParameterIndex()
        if isinstance(weights, (str, Path)):
            path = Path(weights)
            if not path.is_file():
                raise FusionCompilerError(f"weights: {path}: no such file")
            try:
                index.load(str(path))
            except (ValueError, RuntimeError) as exc:
                raise ModuleFileError(
                    path,
                    f"not a parameter file IREE reads ({exc})",
                    "give a .irpa, .safetensors or .gguf file, or a state dict of tensors",
                ) from None
            self._check_archive(index, path)
        elif isinstance(weights, dict):
            for name, spec in self._declared_parameters().items():
                tensor = weights.get(name)
                if tensor is None:
                    raise FusionCompilerError(
                        f"weights: no {name!r}, which the module reads ({spec}); give the "
                        "model's state_dict() (every parameter under its name)"
                    )
                if not isinstance(tensor, torch.Tensor):
                    raise FusionCompilerError(
                        f"weights[{name!r}] is a {type(tensor).__name__}; expected a tensor"
                    )
                if not spec.matches(tuple(tensor.shape), tensor.dtype):
                    got = TensorSpec(tuple(tensor.shape), tensor.dtype)
                    raise FusionCompilerError(
                        f"weights[{name!r}] is {got}; the module was compiled for {spec}"
                    )
                data = _bytes_of(tensor)
                self._weights.append(data)
                index.add_buffer(name, data)
        else:
            raise FusionCompilerError(
                f"weights is a {type(weights).__name__}; expected a state dict of tensors "
                "or the path of a .irpa/.safetensors/.gguf file"
            )
        provider = index.create_provider(scope=_PARAMETER_SCOPE)
        return rt.create_io_parameters_module(self.config.vm_instance, provider)

    def _check_archive(self, index: rt.ParameterIndex, path: Path) -> None:
        """Every parameter the module reads is in the file, of its size in bytes (an
        archive of other weights, or of another dtype, is refused, not read)."""
        lengths = {key: entry.length for key, entry in index.items()}
        for name, spec in self._declared_parameters().items():
            if None in spec.shape:
                continue
            size = math.prod(spec.shape) * spec.dtype.itemsize
            if name not in lengths:
                raise ModuleFileError(
                    path, f"holds no {name!r}, which the module reads ({spec})",
                    "give the weights of the model the module was compiled from",
                )  # fmt: skip
            if lengths[name] != size:
                raise ModuleFileError(
                    path, f"holds {lengths[name]} bytes for {name!r}; the module reads "
                    f"{spec}, {size} bytes", "give the weights of the model the module was "
                    "compiled from (same shapes and dtypes)",
                )  # fmt: skip

    def _declared_parameters(self) -> dict[str, TensorSpec]:
        """The parameters the module reads, by key (signature.PARAMETERS_KEY)."""
        for name in self._vm_module.function_names:
            text = self._vm_module.lookup_function(name).reflection.get(_PARAMETERS_KEY)
            if text:
                entries = (e.partition("=") for e in text.split(";"))
                return {k: TensorSpec.parse(t[len("tensor<") : -1]) for k, _, t in entries}
        return {}

    def __getitem__(self, name: str) -> Function:
        """The entry point ``name``: made once (its signature read then), kept for calls."""
        if name not in self.function_names:
            raise KeyError(f"no function {name!r}; this module has {self.function_names}")
        if name not in self._functions:
            self._functions[name] = self._function(name)
        return self._functions[name]

    def _function(self, name: str) -> Function:
        queued = None
        asynchronous = self._vm_module.lookup_function(f"{name}$async")
        if asynchronous is not None:
            if self._timeline is None:
                self._timeline = _Timeline(self.config.device)
            queued = (self._vm_context, asynchronous, self._timeline)
        function = self._vm_module.lookup_function(name)
        return Function(
            name,
            rt.FunctionInvoker(self._vm_context, self.config.device, function),
            self.config.device,
            zero_copy=self.device == "cuda",
            # IREE's own read-back imports a fresh host array into Vulkan for every
            # result (external host memory): drivers that need page-aligned pointers refuse
            # it (llvmpipe), and on NVIDIA's a long run of calls ended in vkAllocateMemory
            # failing (H100, driver 580: after about 500 calls of 16 MB results)
            staged=self.device.startswith("vulkan"),
            asynchronous=queued,
            transient_size=_transient_size(asynchronous),
        )

    def __call__(self, *args: torch.Tensor | np.ndarray):
        name = "main" if "main" in self.function_names else self.function_names[0]
        return self[name](*args)


def _check_vulkan_device(vm_module: rt.VmModule, device: str) -> None:
    """Refuses a Vulkan device the module's SPIR-V target's code is wrong on: IREE's
    reductions for an NVIDIA, AMD or Arm target assume that vendor's subgroup size, and
    on another device they run and give wrong results (``targets.VULKAN_VENDORS``)."""
    targets = {
        function.reflection.get(_VULKAN_TARGET_KEY)
        for function in map(vm_module.lookup_function, vm_module.function_names)
        if function is not None
    } - {None}
    vendor = next((VULKAN_VENDORS.get(t) for t in targets if t in VULKAN_VENDORS), None)
    if vendor is None:
        return
    try:
        found = rt.get_driver("vulkan").query_available_devices()
    except (ValueError, RuntimeError):  # no driver: rt.Config has said so already
        return
    chosen = device.partition("://")[2]  # "vulkan": the first device; "vulkan://1", a path
    if chosen.isdigit():
        found = found[int(chosen) :][:1]
    elif chosen:
        found = [d for d in found if d["path"] == chosen]
    if found and not any(word in found[0]["name"].lower() for word in VENDOR_NAMES[vendor]):
        raise WrongDeviceError(next(iter(targets)), vendor, found[0]["name"])


def _transient_size(asynchronous) -> int:
    """The transient memory a call of an entry point with caller storage takes: a constant
    IREE folded its size query into (static shapes, as fusion-caller-storage gives)."""
    if asynchronous is None:
        return 0
    size = asynchronous.reflection.get("iree.abi.transients.size.constant", "0")
    try:
        return int(size.split(":")[0])
    except ValueError:
        return 0


def load(module: object, device: str = "local-task", weights=None) -> LoadedModule:
    """Loads a compiled module: a ``.vmfb`` path, its bytes, or what ``fc.compile`` returned.

    ``weights``: for a module compiled with ``weights="external"``, its parameters: a state
    dict of tensors (the model's ``state_dict()``), or a .irpa/.safetensors/.gguf file
    holding them under the same names; read onto the device once, when it loads. For a
    path ``m.vmfb``, ``m.irpa`` beside it (what ``CompiledModule.save`` writes) by default.

    A module whose bytes changed since it was written is refused (``check_intact``):
    IREE verifies only the structure of its FlatBuffer, and runs altered code or
    constants (a crash, SIGILL, or wrong numbers)."""
    if isinstance(module, (str, Path)):
        path = Path(module)
        if not path.exists():
            raise FusionCompilerError(f"{path}: no such file")
        if path.is_dir():
            inside = sorted(p.name for p in path.glob("*.vmfb"))[:3]
            hint = f" ({', '.join(inside)})" if inside else ""
            raise ModuleFileError(path, "is a folder", f"give the .vmfb file in it{hint}")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModuleFileError(
                path, f"cannot be read ({exc.strerror})", "check its permissions"
            ) from None
        if weights is None and weights_beside(path).is_file():  # CompiledModule.save's
            weights = weights_beside(path)
        return LoadedModule(data, device, source=str(path), weights=weights)
    if isinstance(module, (bytes, bytearray, memoryview)):
        return LoadedModule(bytes(module), device, weights=weights)
    vmfb = getattr(module, "vmfb", None)
    if vmfb is None:
        raise FusionCompilerError(
            "this module has no bytecode: it was compiled with compile_to before 'vmfb'"
            if hasattr(module, "vmfb")
            else f"cannot load a {type(module).__name__}: expected a .vmfb path, bytes or "
            "the result of fc.compile"
        )
    return LoadedModule(vmfb, device, source="the compiled module", weights=weights)


def _bytes_of(tensor: torch.Tensor) -> np.ndarray:
    """A tensor's elements as the bytes IREE reads a parameter from."""
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()


def weights_beside(module_path: str | Path) -> Path:
    """Where a saved module's external weights go: ``m.vmfb`` -> ``m.irpa``."""
    return Path(module_path).with_suffix(".irpa")


def write_parameters(weights: dict[str, torch.Tensor], path: str | Path) -> Path:
    """``weights`` (tensors by key) as an IREE parameter archive (.irpa) at ``path``."""
    index = rt.ParameterIndex()
    for name, tensor in weights.items():
        index.add_buffer(name, _bytes_of(tensor))
    index.create_archive_file(str(path))
    return Path(path)


# What CompiledModule.save writes after IREE's module: the SHA-256 of all that precedes it,
# as the comment of the module's ZIP directory (a .vmfb is a FlatBuffer that is also a
# ZIP archive of its parts), so that it stays a ZIP and a module IREE's tools load.
_SEAL = b"fusion_compiler sha256="
_SEAL_SIZE = len(_SEAL) + 64
_END_OF_ZIP = b"PK\x05\x06"  # the end of central directory record: 22 bytes, then a comment
_END_SIZE = 22
_ADVICE = "compile it again, or copy it again from where it was compiled"


def seal(vmfb: bytes) -> bytes:
    """``vmfb`` with its SHA-256 after it, for ``check_intact`` to verify."""
    if _sealed(vmfb):
        return vmfb
    data = bytearray(vmfb)
    end = len(data) - _END_SIZE
    if end >= 0 and data[end : end + 4] == _END_OF_ZIP:  # no comment yet: the seal is it
        struct.pack_into("<H", data, end + 20, _SEAL_SIZE)
    return bytes(data + _SEAL + hashlib.sha256(data).hexdigest().encode())


def _sealed(data: bytes) -> bool:
    return len(data) > _SEAL_SIZE and data[-_SEAL_SIZE:].startswith(_SEAL)


def check_intact(data: bytes, source: str) -> None:
    """Raises DamagedFileError when ``data`` is not the module that was written.

    A module CompiledModule.save wrote carries the SHA-256 of all its bytes; any other
    (iree-compile's, or CompiledModule.vmfb written by hand) has IREE's CRC-32 of each of
    its parts (FlatBuffer, constants, executables) in its ZIP directory; a module
    compiled without that ZIP has no checksum, and loads unchecked."""
    if _sealed(data):
        digest = data[-64:]
        if hashlib.sha256(memoryview(data)[:-_SEAL_SIZE]).hexdigest().encode() != digest:
            raise DamagedFileError(
                source, "the whole module (by the SHA-256 saved with it)", _ADVICE
            )
        return
    end = len(data) - _SEAL_SIZE - _END_SIZE
    if end >= 0 and data[end : end + 4] == _END_OF_ZIP:
        if struct.unpack_from("<H", data, end + 20)[0] == _SEAL_SIZE:  # a seal, altered
            raise DamagedFileError(source, "the whole module (its saved SHA-256 altered)", _ADVICE)
    if data[:4] != b"PK\x03\x04":
        return
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            damaged = archive.testzip()
    except Exception as exc:  # zipfile's parse of bytes altered anywhere: BadZipFile and more
        raise DamagedFileError(source, f"the module's ZIP directory ({exc})", _ADVICE) from None
    if damaged is not None:
        raise DamagedFileError(source, f"its part {damaged!r} (IREE's CRC-32 of it)", _ADVICE)
