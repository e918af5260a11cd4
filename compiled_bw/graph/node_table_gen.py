"""The installed torch release's node table, generated from the derivatives.yaml it ships.

Consumes torchgen's packaged derivatives.yaml (every torch wheel ships it; needs pyyaml);
produces GENERATED's form (graph/node_table.py): each generated autograd node class name ->
(args, hidden), the saved state its Python binding hides (torch's codegen skips getters for
these types).  tools/gen_node_table.py writes it as a committed table; graph/node_table.py
generates it here for a release with none (Note [A node table for every release]).
"""
import os
import re

import torchgen
from torchgen.api.types import BaseCType, ListCType, OptionalCType
from torchgen.packaged.autograd.gen_autograd_functions import MISC_GETTER_DEFS
from torchgen.packaged.autograd.load_derivatives import load_derivatives


def _kind(cpp_type: str) -> str:
    t = cpp_type.replace("::", "").replace("torchautogradgenerated", "")
    if "TensorGeometry" in t:
        return "geometry"
    if "Layout" in t:
        return "layout"
    if "optional<bool>" in t:
        return "optbool"
    # ScalarType, TypeAndSize, TensorOptions, vector<ScalarType>, vector<vector<int>>:
    # each describes the dtype/size/options of a forward input.
    return "input_meta"


def build_table() -> dict:
    from torchgen.api import types as T

    root = os.path.dirname(torchgen.__file__)
    infos, _ = load_derivatives(
        os.path.join(root, "packaged/autograd/derivatives.yaml"),
        os.path.join(root, "packaged/ATen/native/native_functions.yaml"),
        os.path.join(root, "packaged/ATen/native/tags.yaml"),
    )
    tensorish = {
        BaseCType(T.tensorT), OptionalCType(BaseCType(T.tensorT)),
        T.MutRefCType(OptionalCType(BaseCType(T.tensorT))), BaseCType(T.tensorListT),
        BaseCType(T.iTensorListRefT), T.VectorCType(BaseCType(T.tensorT)),
        ListCType(OptionalCType(BaseCType(T.tensorT))), BaseCType(T.scalarT),
    }
    exposed = tensorish | {
        BaseCType(T.intArrayRefT), BaseCType(T.symIntArrayRefT),
        BaseCType(T.optionalIntArrayRefT), BaseCType(T.optionalSymIntArrayRefT),
        OptionalCType(BaseCType(T.intArrayRefT)), OptionalCType(BaseCType(T.symIntArrayRefT)),
        OptionalCType(T.ArrayRefCType(BaseCType(T.doubleT))), BaseCType(T.longT),
        BaseCType(T.SymIntT), BaseCType(T.stringT), OptionalCType(BaseCType(T.stringT)),
        T.ArrayRefCType(elem=BaseCType(type=T.BaseCppType(ns="at", name="Scalar"))),
    } | set(MISC_GETTER_DEFS)
    table = {}
    for per in infos.values():
        for info in per.values():
            if info.op is None:
                continue
            args = tuple((a.name, "TensorList" in str(a.type) or "ITensorListRef" in str(a.type))
                         for a in info.args_with_derivatives)
            names = [a for a, _ in args]
            hidden = []
            for sv in list(info.all_saved_inputs) + list(info.all_saved_outputs):
                if sv.nctype.type in exposed:
                    continue
                name = sv.nctype.name
                srcs = [a for a in names if re.search(rf"\b{a}\b", sv.expr)]
                users = sorted({v for d in info.derivatives
                                if any(x.nctype.name == name for x in d.saved_inputs)
                                for v in d.var_names})
                hidden.append((_kind(sv.nctype.type.cpp_type()), srcs[0] if len(srcs) == 1 else None,
                               tuple(users)))
            table[info.op] = (args, tuple(sorted(set(hidden), key=repr)))
    return table
