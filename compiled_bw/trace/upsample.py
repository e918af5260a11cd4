"""Upsample*Backward0's formula with symbolic sizes: the grad of F.interpolate in dynamic graphs.

Consumes an Upsample*Backward0 node's grad and saved values (the input's sizes, the output
size, align_corners, the scales) in a symbolic trace; produces the input's grad as one call of
`compiled_bw::upsample_backward`, which runs eager's own kernel (`aten.<op>_backward`).
trace/dynamic.py's FORMULAS takes `FORMULAS` from here.

Note [Upsampling backward with symbolic sizes]
A U-Net or FPN decoder trained on images of varying size saves, per `F.interpolate`, the
input's sizes and the output size: values that change with the image.  derivatives.yaml's
formula is `<op>_backward_symint(grad, output_size, self.sym_sizes(), [align_corners,]
*scales)`, but of the twelve backward ops only three (nearest 2-D, nearest-exact 2-D, bilinear
antialiased) have a meta kernel that takes symbolic sizes; the others' C++ meta kernels fail on
them ("Expected IntList but got GenericList"), so every image size was a static capture.  The
call here is an op of ours: its real kernel is eager's (the same values, the same layout), and
its fake kernel gives the layout eager's kernels give, which they decide in their shared
(device-independent) meta functions: the grad's suggested memory format (channels-last in,
channels-last out) for nearest and nearest-exact 2-D, bilinear 2-D (antialiased too) and
trilinear 3-D, contiguous for the rest (tests/test_dynamic_shapes.py checks both against the
aten kernels on every layout).  The output size passed is the grad's own spatial sizes: the
engine checked the grad against the node's output metadata, so they equal the saved
`output_size`, and the call is tied to the grad's symbols rather than to symbols of its own.
The scales and align_corners stay in the key (they are not sizes).
"""
from __future__ import annotations

import torch

from ..torchapi.dynamo import suggest_memory_format

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("upsample_backward(Tensor grad, SymInt[] output_size, SymInt[] input_size, str op, "
            "bool? align_corners, float? s0, float? s1, float? s2) -> Tensor")

# class name prefix -> (aten op, spatial dims, takes align_corners, output follows the grad's
# memory format)
OPS = {
    "UpsampleNearest1D": ("upsample_nearest1d", 1, False, False),
    "UpsampleNearest2D": ("upsample_nearest2d", 2, False, True),
    "UpsampleNearest3D": ("upsample_nearest3d", 3, False, False),
    "UpsampleNearestExact1D": ("_upsample_nearest_exact1d", 1, False, False),
    "UpsampleNearestExact2D": ("_upsample_nearest_exact2d", 2, False, True),
    "UpsampleNearestExact3D": ("_upsample_nearest_exact3d", 3, False, False),
    "UpsampleLinear1D": ("upsample_linear1d", 1, True, False),
    "UpsampleBilinear2D": ("upsample_bilinear2d", 2, True, True),
    "UpsampleBilinear2DAa": ("_upsample_bilinear2d_aa", 2, True, True),
    "UpsampleBicubic2D": ("upsample_bicubic2d", 2, True, False),
    "UpsampleBicubic2DAa": ("_upsample_bicubic2d_aa", 2, True, False),
    "UpsampleTrilinear3D": ("upsample_trilinear3d", 3, True, True),
}
_BY_OP = {aten: (dims, align, follows) for aten, dims, align, follows in OPS.values()}
_SCALES = {1: ("scales",), 2: ("scales_h", "scales_w"), 3: ("scales_d", "scales_h", "scales_w")}


def _impl(grad, output_size, input_size, op, align_corners, s0, s1, s2):
    dims, align, _ = _BY_OP[op]
    args = [grad, output_size, input_size] + ([align_corners] if align else [])
    return getattr(torch.ops.aten, op + "_backward").default(*args, *(s0, s1, s2)[:dims])


_LIB.impl("upsample_backward", _impl, "CompositeExplicitAutograd")


@torch.library.register_fake("compiled_bw::upsample_backward", lib=_LIB)
def fake(grad, output_size, input_size, op, align_corners, s0, s1, s2):
    """The layout eager's kernel gives (Note [Upsampling backward with symbolic sizes])."""
    follows = _BY_OP[op][2]
    fmt = suggest_memory_format(grad) if follows else torch.contiguous_format
    return torch.empty(input_size, dtype=grad.dtype, device=grad.device, memory_format=fmt)


def _formula(aten, dims, align):
    scales = _SCALES[dims]

    def formula(g, v, saved, need):
        s = [v[k] for k in scales] + [None] * (3 - dims)
        return [torch.ops.compiled_bw.upsample_backward(
            g, list(g.shape[2:]), v["self_sym_sizes"], aten,
            v["align_corners"] if align else None, *s)]
    return formula


# class name -> (formula, the saved values that are sizes), for trace/dynamic.py's FORMULAS
FORMULAS = {name + "Backward0": (_formula(aten, dims, align), ("self_sym_sizes", "output_size"))
            for name, (aten, dims, align, _) in OPS.items()
            if hasattr(torch.ops.aten, aten + "_backward")}
