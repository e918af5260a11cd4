"""torch's private API, all of what compiled_bw uses: one module per torch subsystem.

  autograd.py  the autograd engine, the dispatcher and functorch state (torch._C), the legacy
               vmap, torch's Function/Tensor internals
  dynamo.py    AOTAutograd, Dynamo, fake tensors, FX internals, pytree, Python dispatch
  inductor.py  Inductor (imported on first use: importing it costs seconds)

No other module of compiled_bw names `torch._*` or a private torch submodule
(tests/test_private_api.py checks it).  Each module lists what it takes from torch and who uses
it in `USED` (`"dotted.path": "user"`); tests/test_private_api.py resolves every entry on the
installed torch and fails naming the symbol and its user when torch moved it.  A symbol listed
also in the module's `OPTIONAL` (symbol -> feature) may be missing from a release: that feature
is then off there, and `features_off()` says why, naming the release.

Patches: what compiled_bw replaces in torch is named in the subsystem modules' `PATCHED`
tables (name -> (owner, attribute); an owner may be a dict, for Inductor's lowering table), and
replaced through `patch()` here only, so `uninstall()` gives torch back exactly as it was
(`compiled_bw.uninstall()`).  Bottom layer: these modules import torch only.
"""
from __future__ import annotations

from .patching import is_patched, original, patch, uninstall

INDUCTOR = "torch._inductor"     # inductor.py imports it; backends/ check it can be found first


def features_off() -> dict:
    """{feature: why it is off on the installed torch} over the subsystem modules: features
    whose private API this release lacks (each module's `OPTIONAL` symbols name the feature
    their absence turns off, `FEATURES_OFF` says why, naming the release)."""
    from . import checkpoint, dynamo
    off = dict(checkpoint.FEATURES_OFF)
    if (why := dynamo.aot_splice_off()) is not None:
        off[dynamo.AOT_SPLICE_FEATURE] = why
    return off
