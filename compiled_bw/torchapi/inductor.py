"""Inductor's private API (and FX's graph pickler): the Inductor backend and its artefacts.

Consumes torch._inductor (importing this module imports it: seconds; backends/ import it on
first use of the Inductor backend); produces the symbols below under stable names.
"""
from __future__ import annotations

import torch._inductor.debug  # CompiledFxGraph.__call__ reads it but never imports it
from torch._inductor import codecache, comms, config, cpu_vec_isa, inductor_prims, ir, lowering
from torch._inductor.codegen import cpp as codegen_cpp
from torch._inductor.codegen.wrapper import ExternKernelAllocLine, FreeLine, PythonWrapperCodegen
from torch._inductor.compile_fx import compile_fx_inner
from torch._inductor.decomposition import select_decomp_table
from torch._inductor.dependencies import WeakDep
from torch._inductor.output_code import CompiledFxGraph, CompiledFxGraphConstants
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.utils import BoxedBool, clear_caches
from torch._inductor.virtualized import V
from torch.fx._graph_pickler import GraphPickler, Options

from .patching import is_patched
from .patching import original as _original
from .patching import patch as _patch

force_stride_order = inductor_prims.force_stride_order

USED = {
    "torch._inductor.codecache": "backends/inductor_artifact.py",
    "torch._inductor.comms": "backends/inductor.py",
    "torch._inductor.cpu_vec_isa": "backends/inductor_artifact.py",
    "torch._inductor.ir": "backends/inductor.py",
    "torch._inductor.lowering": "backends/inductor.py",
    "torch._inductor.config": "backends/inductor.py, backends/inductor_artifact.py",
    "torch._inductor.config.reorder_for_peak_memory": "passes/reorder_for_memory.py (a comment's claim)",
    "torch._inductor.codegen.cpp": "backends/compile_worker.py (pre-import)",
    "torch._inductor.codegen.wrapper.PythonWrapperCodegen": "backends/inductor.py",
    "torch._inductor.codegen.wrapper.FreeLine": "backends/inductor.py",
    "torch._inductor.codegen.wrapper.ExternKernelAllocLine": "backends/inductor.py",
    "torch._inductor.compile_fx.compile_fx_inner": "backends/inductor.py",
    "torch._inductor.decomposition.select_decomp_table": "backends/inductor.py",
    "torch._inductor.dependencies.WeakDep": "backends/inductor.py",
    "torch._inductor.output_code.CompiledFxGraph": "backends/inductor.py, backends/inductor_artifact.py",
    "torch._inductor.output_code.CompiledFxGraphConstants": "backends/inductor_artifact.py",
    "torch._inductor.runtime.cache_dir_utils.cache_dir": "backends/inductor_artifact.py",
    "torch._inductor.utils.BoxedBool": "backends/inductor_artifact.py, backends/inductor.py",
    "torch._inductor.utils.clear_caches": "backends/inductor_artifact.py",
    "torch._inductor.virtualized.V": "backends/inductor.py",
    "torch.fx._graph_pickler.GraphPickler": "backends/inductor_artifact.py",
    "torch.fx._graph_pickler.Options": "backends/inductor_artifact.py",
    "torch._inductor.debug": "backends/inductor_artifact.py (CompiledFxGraph.__call__)",
    "torch._inductor.inductor_prims.force_stride_order":
        "backends/inductor.py (Note [Inductor: unbatched max_pool3d backward])",
}

# What compiled_bw replaces in Inductor (name -> owner, attribute), all by backends/inductor.py;
# `lowering_patch(op)` adds an op's entry in Inductor's lowering table.
PATCHED = {
    "codegen_input_size_asserts": (PythonWrapperCodegen, "codegen_input_size_asserts"),
    "codegen_free": (PythonWrapperCodegen, "codegen_free"),
    "generate_fallback_kernel": (PythonWrapperCodegen, "generate_fallback_kernel"),
    "decide_global_ordering_of_comms": (comms, "decide_global_ordering_of_comms"),
}


def lowering_patch(op) -> str:
    name = f"lowering {op}"
    PATCHED[name] = (lowering.lowerings, op)
    return name


def patch(name: str, replacement) -> None:
    _patch(PATCHED, name, replacement)


def original(name: str):
    return _original(PATCHED, name)
