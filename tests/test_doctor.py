"""`python -m compiled_bw.doctor`: the release, its build and the feature table, as the
package itself decides them (each feature's probe agrees with the code that uses it)."""
from __future__ import annotations

import json
import subprocess
import sys

import torch

from compiled_bw import doctor, torchapi
from compiled_bw.graph import aot
from compiled_bw.torchapi import checkpoint as torch_checkpoint
from compiled_bw.torchapi import dynamo as torch_dynamo


def test_report_names_release_build_and_features():
    r = doctor.report()
    assert r["torch"] == torch.__version__
    assert r["build"] == (f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU")
    assert set(r["features"]) == set(doctor.FEATURES)
    for name, f in r["features"].items():
        assert isinstance(f["on"], bool) and f["detail"], name
    off = torchapi.features_off()
    for name in (torch_checkpoint.SAC_FEATURE, torch_dynamo.AOT_SPLICE_FEATURE,
                 torch_checkpoint.RECOMPUTE_FEATURE):
        assert r["features"][name]["on"] == (name not in off), name
    # AOT splicing's verdict is graph/aot.py's own for a compiled forward
    f = torch.compile(lambda x: x.cos() * 3, backend="aot_eager")
    cf = type(f(torch.randn(2, requires_grad=True)).grad_fn)._forward_cls
    torch.compiler.reset()
    spliced = aot._make_plan(cf).bw_module is not None
    assert r["features"][torch_dynamo.AOT_SPLICE_FEATURE]["on"] == spliced


def test_doctor_command_prints_json():
    out = subprocess.run([sys.executable, "-m", "compiled_bw.doctor", "--json"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    r = json.loads(out)
    assert r["torch"] == torch.__version__ and "C++ walk" in r["features"]


def test_recompute_feature_follows_this_releases_closure():
    """Traced checkpoint recomputation is on exactly where recompute_fn closes over every
    variable checkpoint/recompute.py reads (off on torch 2.11: kwargs are an input there)."""
    import types

    import torch.utils.checkpoint as cp
    # 2.15 moved the generator's body (recompute_fn with it) into an _impl it calls
    gens = [getattr(cp, n) for n in ("_checkpoint_without_reentrant_generator_impl",
                                     "_checkpoint_without_reentrant_generator") if hasattr(cp, n)]
    code = next(c for g in gens for c in g.__code__.co_consts
                if isinstance(c, types.CodeType) and c.co_name == "recompute_fn")
    closes = set(torch_checkpoint.RECOMPUTE_VARS) <= set(code.co_freevars)
    assert (torch_checkpoint.RECOMPUTE_OFF is None) == closes, torch_checkpoint.RECOMPUTE_OFF
    assert (torch_checkpoint.RECOMPUTE_FEATURE in torchapi.features_off()) == (not closes)
