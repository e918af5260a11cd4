"""compress_activations: the forward's saved activations kept in low precision until the backward.

Consumes the forward run inside `with compress_activations(dtype, min_bytes, granularity):` and
produces, for each tensor autograd saves there, a packed form (pack_activation) that the
backward turns back into a tensor of the original shape and dtype (unpack_activation):

  float8_e4m3fn / int8   absmax-scaled (kernels/quantize_absmax.py): q of the tensor's shape
                         plus one float32 scale per group; granularity "row" (a group is the
                         last dimension), "tensor" (one group) or an int (blocks of that many
                         contiguous elements; "tensor" is one Triton program per tensor:
                         on a GPU prefer rows or blocks).  Round-trip error: int8 <= scale / 2, e4m3 <=
                         2**-4 |x| + 2**-10 scale, per element (scale = absmax(group) / QMAX,
                         QMAX 127 / 448).  A group holding inf or nan comes back all nan.
  bfloat16               a cast (no scale): error <= 2**-8 |x| (round half to even).

What passes through unchanged (packed as the tensor itself): non-float tensors, tensors below
`min_bytes`, tensors already no wider than the target, nn.Parameters and views of them
(`._base`), and every other tensor that has no grad_fn and is not a view of one that has
(buffers, the model's inputs, what the forward computed without grad): those are held
elsewhere anyway, so a compressed copy would add memory, not save it.  Also tensor
subclasses, non-strided tensors and devices other than CPU and CUDA.

The hooks are compiled_bw's `traceable_saved_tensors_hooks` (torch's `saved_tensors_hooks`
with the unpack declared a pure tensor function: Note [Traceable saved-tensor hooks] in
graph/packed.py).  Outside compiled_bw they behave as torch's; under `compiled_bw.enable()`
a node's formula is traced with the dequantize in front of it, where Inductor fuses it into
its consumer: the full-precision tensor is never stored.  The unpack is the module-level
`unpack_activation` (its identity is in compiled_bw's cache key: the same function every step).

A tensor saved twice in one context (an activation's output saved by it and, as input, by the
next layer) is compressed once: both saves hold the same packed tensors (`Compression.shared`
counts the second ones); after an in-place change of the tensor it is packed anew.

Which implementation ran (`Compression.paths`, `report()`, and a line in compiled_bw.explain()):
"triton" (CUDA tensors with triton installed), "triton-interpret" (TRITON_INTERPRET=1, Triton
3.7 or later: kernels.interpreter_unsupported), or
"torch" (the kernels' torch reference: CPU without Triton's interpreter, or no triton).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import NamedTuple

import torch
from torch.utils.weak import WeakIdKeyDictionary

from .graph.packed import traceable_saved_tensors_hooks

DTYPES = (torch.float8_e4m3fn, torch.int8, torch.bfloat16)


class Meta(NamedTuple):
    """What unpack needs besides the tensors: the original shape and dtype, and the group size
    (0 for a plain cast)."""
    shape: tuple
    dtype: torch.dtype
    group: int


def _group_size(t: torch.Tensor, granularity) -> int:
    if granularity == "row":
        return t.shape[-1] if t.dim() and t.shape[-1] else max(1, t.numel())
    if granularity == "tensor":
        return max(1, t.numel())
    return int(granularity)


def _held_elsewhere(t: torch.Tensor) -> bool:
    """A parameter, a view of one, or a tensor with no grad_fn (nor a view of one that has):
    a buffer, an input, a no-grad result -- kept alive by someone else."""
    base = t._base if t._base is not None else t
    return (isinstance(t, torch.nn.Parameter) or isinstance(base, torch.nn.Parameter)
            or (t.grad_fn is None and base.grad_fn is None))


def passes_through(t: torch.Tensor, dtype: torch.dtype, min_bytes: int) -> str | None:
    """Why `t` is saved as it is (None: it is compressed)."""
    if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.layout != torch.strided:
        return "subclass or non-strided"
    if t.device.type not in ("cpu", "cuda"):
        return f"device {t.device.type}"
    if not t.is_floating_point():
        return "not floating point"
    if t.element_size() <= dtype.itemsize:
        return f"{t.dtype} is no wider than {dtype}"
    if t.numel() * t.element_size() < min_bytes:
        return "below min_bytes"
    if _held_elsewhere(t):
        return "parameter, buffer or input"
    return None


def pack_activation(t: torch.Tensor, dtype: torch.dtype, min_bytes: int, granularity):
    """tensor -> the tensor itself (passes through), or (q, scale or None, Meta)."""
    if passes_through(t, dtype, min_bytes) is not None:
        return t
    with torch.no_grad():
        x = t.detach()
        if dtype == torch.bfloat16:
            return x.to(dtype), None, Meta(tuple(t.shape), t.dtype, 0)
        from kernels.quantize_absmax import quantize_absmax
        group = _group_size(x, granularity)
        q, scale = quantize_absmax(x, group, dtype)
        return q, scale, Meta(tuple(t.shape), t.dtype, group)


def unpack_activation(packed) -> torch.Tensor:
    """pack_activation's inverse: a pure tensor function of the packed tensors (the Meta is
    Python constants), so a traced unpack is the dequantize op and nothing else."""
    if isinstance(packed, torch.Tensor):
        return packed
    q, scale, meta = packed
    if scale is None:
        return q.to(meta.dtype)
    from kernels.dequantize_absmax import dequantize_absmax
    return dequantize_absmax(q, scale, meta.group, meta.dtype)


HOOKS = traceable_saved_tensors_hooks


@dataclasses.dataclass
class Compression:
    """What one `compress_activations` context did (its `as` value)."""
    dtype: torch.dtype
    min_bytes: int
    granularity: object
    packs: int = 0              # pack hook calls (the unpack is traced: not counted)
    compressed: int = 0         # of the packs: tensors stored compressed (once each: see pack)
    bytes_in: int = 0           # their bytes before ...
    bytes_out: int = 0          # ... and after (scales included)
    shared: int = 0             # of the packs: a tensor already compressed, its packed form reused
    paths: set = dataclasses.field(default_factory=set)
    # tensor -> (its _version when packed, its packed form), while the context is open
    _done: object = dataclasses.field(default=None, repr=False)

    def pack(self, t):
        """A tensor saved twice (a Tanh's output that the next Linear saves as its input) is
        compressed once: the second save gets the first's packed form (the same q and scale
        objects), unless the tensor was modified in place in between (its _version moved).
        Both unpacks return new tensors of equal values, as two packs would."""
        self.packs += 1
        seen = self._done.get(t) if self._done is not None else None
        if seen is not None and seen[0] == t._version:
            self.shared += 1
            return seen[1]
        packed = pack_activation(t, self.dtype, self.min_bytes, self.granularity)
        if not isinstance(packed, torch.Tensor):
            if self._done is not None:
                self._done[t] = (t._version, packed)
            from kernels import path_for
            q, scale, _ = packed
            self.compressed += 1
            self.bytes_in += t.numel() * t.element_size()
            self.bytes_out += q.numel() * q.element_size() + (0 if scale is None else scale.numel() * 4)
            self.paths.add("cast" if scale is None else path_for(t.device))
        return packed

    def report(self) -> str:
        paths = ", ".join(sorted(_PATH_WORDS.get(p, p) for p in self.paths)) or "none ran"
        g = self.granularity if self.dtype != torch.bfloat16 else "cast"
        again = f" ({self.shared} saved again, packed once)" if self.shared else ""
        return (f"compress_activations({self.dtype}, {g}): {self.compressed} of {self.packs} saved "
                f"tensors compressed{again}, {self.bytes_in / 2**20:.2f} MB -> {self.bytes_out / 2**20:.2f} MB, "
                f"path: {paths}")


_PATH_WORDS = {"torch": "torch reference (no Triton kernel for this device)",
               "triton": "Triton kernels", "triton-interpret": "Triton kernels (interpreter)",
               "cast": "plain cast"}
_LAST: list = []        # the last context's Compression, for compiled_bw.explain()


def last_report() -> str | None:
    """The last compress_activations context's report (None if none ran in this process)."""
    return _LAST[-1].report() if _LAST else None


@contextlib.contextmanager
def compress_activations(dtype: torch.dtype = torch.float8_e4m3fn, min_bytes: int = 1 << 16,
                         granularity="row"):
    """Around a forward: its saved activations are stored in `dtype` (see the module's text for
    formats, error bounds and what passes through).  Yields a Compression (counts, bytes, path)."""
    if dtype not in DTYPES:
        raise ValueError(f"compress_activations: dtype {dtype} not supported; expected one of "
                         f"{', '.join(map(str, DTYPES))}")
    if not (granularity in ("row", "tensor") or (isinstance(granularity, int) and granularity > 0)):
        raise ValueError(f"compress_activations: granularity {granularity!r}; expected 'row', "
                         "'tensor' or a positive block size")
    c = Compression(dtype, int(min_bytes), granularity, _done=WeakIdKeyDictionary())
    _LAST[:] = [c]
    try:
        with HOOKS(functools.partial(Compression.pack, c), unpack_activation):
            yield c
    finally:
        c._done = None      # the packed forms live in the graph's saved slots only
