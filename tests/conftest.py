import atexit
import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# One Inductor cache per test session, set before anything imports torch._inductor: identical
# graphs compiled by different tests (or steps) load the compiled artefact instead of
# recompiling, and nothing leaks in from earlier runs or other checkouts.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="compiled_bw_inductor_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)

# Tests run what users get: Inductor compiles in the background (a worker process), the
# first steps of a graph run on the eager backend meanwhile, and differential() waits for the
# compile after a run's first step so the later steps run Inductor's kernels.  A test marked
# `foreground_compile` compiles in the foreground (its first backward already runs Inductor's
# code): the special mode, for tests that inspect what Inductor made of the first capture.


def pytest_configure(config):
    config.addinivalue_line("markers", "both_backends: run each test on the eager backend and "
                            "on Inductor (differential.selected_backend() reads which)")
    config.addinivalue_line("markers", "foreground_compile: Inductor compiles in the foreground "
                            "(COMPILED_BW_BACKGROUND_COMPILE=0) for this test")
    config.addinivalue_line("markers", "slow: over ~10 s on 2 cores; `pytest -m 'not slow'` "
                            "is the quick edit-test loop")
    config.addinivalue_line("markers", "needs_feature(*names): skipped where "
                            "compiled_bw.torchapi.features_off() names one (Note [Release tests])")
    config.addinivalue_line("markers", "release: the quick tests of RELEASE_FILES, run by CI on "
                            "the oldest and newest torch release (tools/release_check.sh)")


# Note [Release tests]: CI runs the whole suite on one torch release and, on the oldest and
# newest supported ones, the quick tests of the files below: the ones that touch what differs
# between releases (private APIs and node tables, doctor's feature table, graph snapshots,
# Dynamo, checkpointing and selective checkpointing, AOT splicing, custom Functions and ops,
# hooks, the engine's core semantics, distributed, a real model, verify and warm starts: what
# Inductor stores and loads, the formulas that branch on subclass-like tensors).  A test that
# needs a feature some release turns off (doctor's table) says so with @pytest.mark.needs_feature(name): it is
# skipped there with that feature's reason, and tests/test_release_features.py checks the
# named fallback on that release instead.  `tools/release_check.sh V
# --quick` runs the whole quick suite on release V (tools/full_check.sh, every release).
RELEASE_FILES = {
    "test_private_api.py", "test_doctor.py", "test_graph_snapshots.py", "test_dynamo_unchanged.py",
    "test_core.py", "test_checkpoint.py", "test_checkpoint_dynamic.py", "test_recompute.py",
    "test_hooks.py",
    "test_custom_functions.py", "test_custom_op_traced.py", "test_saved_hooks.py",
    "test_api.py", "test_layers.py", "test_signature.py", "test_distributed.py",
    "test_real_models.py", "test_aot.py", "test_subclass.py", "test_verify.py",
    "test_warm_start.py", "test_formula_branches.py",
}
# slow tests that are release tests all the same: distributed, real models, AOT splicing
RELEASE_SLOW = {
    "test_distributed.py::test_world1_in_process[ddp-eager]",
    "test_distributed.py::test_world1_in_process[fsdp2_checkpointed-eager]",
    "test_real_models.py::test_real_model_eager_backend[gpt2-plain]",
    "test_real_models.py::test_real_model_eager_backend[llama-ckpt]",
    "test_real_models.py::test_real_model_compiled_forward[gpt2-eager-warm]",
    "test_aot.py::test_compiled_mlp_is_spliced[aot_eager]",
    "test_aot.py::test_graph_break_mixes_aot_and_eager_nodes",
    "test_aot.py::test_snapshot_of_spliced_mlp",
    # Inductor's compiled graph stored by one process and loaded by another (runtime/warm.py)
    "test_warm_start.py::test_second_process_loads_instead_of_capturing[inductor]",
    "test_warm_start.py::test_another_releases_entry_is_not_read",
    # Inductor's lowerings and decompositions change between releases (2.15 lowers
    # _efficientzerotensor to a constant the C++ wrapper hands out on cpu:0)
    "test_inductor_known_wrong.py::test_sgn_grad_device_on_inductor",
    "test_inductor_known_wrong.py::test_refused_arguments_of_the_decompositions",
    "test_inductor_known_wrong.py::test_nll_loss_with_a_grad_that_is_not_finite[mean]",
    ("test_inductor_known_wrong.py::test_kernels_whose_inf_or_nan_inductors_code_did_not_give"
     "[soft_margin_overflow]"),
    ("test_inductor_known_wrong.py::test_kernels_whose_inf_or_nan_inductors_code_did_not_give"
     "[smooth_l1_nan]"),
    ("test_inductor_known_wrong.py::test_kernels_whose_inf_or_nan_inductors_code_did_not_give"
     "[remainder_inf]"),
    # symbolic formulas whose torch side differs between releases: trace's backward (2.11's
    # fills past a tall matrix's diagonal), the upsample backward kernels' layouts, Inductor's
    # conv backward (a lowering on 2.13+, its aten kernel before)
    "test_dynamic_shapes.py::test_window_diagonal_trace_and_squeeze_sizes_are_symbolic[eager]",
    "test_dynamic_shapes.py::test_upsample_backward_op_lays_out_as_eagers_kernels[eager]",
    "test_dynamic_shapes.py::test_conv_lengths_with_an_input_grad[inductor]",
}



# Note [Full check]: CI has 50 minutes for the whole suite on one release, the benchmark's
# quick run and the release matrix (.ci/run).  The tests below are left to tools/full_check.sh
# (COMPILED_BW_FULL_CHECK=1), which a developer runs before resolving an issue: each took
# over ~12 s on 2 cores (2026-11-27 and 2026-12-01, `--durations`), and each is either the Inductor variant of
# a test whose eager variant CI runs, a scale or sweep test CI runs a smaller form of, or a
# command CI runs itself.  Without the variable they are skipped, saying so.  The OpInfo sweep
# on the eager backend runs every 4th op in CI, all of them in the full check.
FULL_CHECK_ENV = "COMPILED_BW_FULL_CHECK"
FULL_CHECK = os.environ.get(FULL_CHECK_ENV, "") not in ("", "0")
FULL_CHECK_ONLY = {
    "test_api.py::test_benchmarks_quick_smoke",         # CI runs `python -m benchmarks --quick`
    "test_core.py::test_deep_chain_3000_ops[inductor]",  # the eager variant stays
    "test_checkpoint.py::test_bidirectional_gru_under_checkpoint[inductor]",  # ~100 opaque calls
    "test_fastwalk.py::test_signature_distinguishes_what_python_does_opinfo",
    "test_fastwalk.py::test_suites_pass_with_python_walk",
    "test_aot.py::test_warm_aot_cache_constants_are_spliced[inductor]",
    "test_aot.py::test_resnet_under_torch_compile_is_spliced[inductor-channels_last-warm]",
    "test_aot.py::test_resnet_under_torch_compile_is_spliced[eager-channels_last-cold]",
    "test_custom_auto_traced.py::test_set_materialize_grads_false[inductor-both]",
    "test_custom_auto_traced.py::test_side_effect_zoo[inductor-bw_ctx_list]",
    "test_custom_auto_traced.py::test_side_effect_zoo[inductor-bw_global_scale]",
    "test_custom_auto_traced.py::test_side_effect_zoo[inductor-bw_autograd_grad]",
    ("test_custom_auto_traced.py::test_backward_reading_globals_sees_each_steps_values"
     "[inductor-reassigned]"),
    "test_custom_auto_traced_semantics.py::test_ctx_mutable_same_object[inductor-ListCtx]",
    "test_custom_auto_traced_semantics.py::test_closure_cell_changes[inductor]",
    "test_custom_auto_traced_semantics.py::test_needs_input_grad_varies[inductor]",
    ("test_custom_function_cases.py::test_traced_function_ctx_attribute_changes_recapture_never"
     "_stale[inductor]"),
    "test_custom_function_cases.py::test_once_differentiable_used_several_times[inductor-opaque]",
    "test_checkpoint.py::test_bf16_compression_pack_unpack[inductor]",
    "test_checkpoint.py::test_save_on_cpu[inductor]",
    "test_checkpoint.py::test_hf_gradient_checkpointing_gpt2[inductor-False]",
    "test_core.py::test_accumulate_into_existing_grad[inductor]",
    "test_core.py::test_multiple_roots_with_grad_tensors[inductor]",
    "test_core.py::test_lstm[inductor]",
    # (2026-11-28, `--durations`: 40-120 s each on 2 cores; the eager variants stay)
    "test_core.py::test_copyslices_inplace_on_view[inductor]",
    "test_core.py::test_unused_input_error_and_allow_unused[inductor]",
    "test_dynamic_shapes.py::test_image_batch_height_and_width_through_a_conv_stem[inductor]",
    "test_gradient_edges.py::test_a_pipeline_stages_split_backward[inductor-True]",
    # create_graph on Inductor: CI keeps the PINN, double backprop, HVP / third order, MAML,
    # dropout and the fallback cases (every eager variant stays; test_inductor.py has the
    # size-1 strides of WGAN-GP's and R1's conv in a smaller test)
    *(f"test_create_graph.py::{t}[inductor]" for t in (
        "test_wgan_gp_gradient_penalty", "test_r1_penalty", "test_functional_hvp_and_hessian",
        "test_input_gradient_penalty_through_common_layers",
        "test_heat_residual_2d_with_grad_outputs",
        "test_input_gradient_regularization_accumulates_into_grad_with_history",
        "test_engine_warning_only_for_backward_create_graph")),
    *(f"test_create_graph.py::test_gradgradcheck_through_compiled_bw[inductor-{op}]" for op in (
        "cdist", "conv1d", "layer_norm", "log_softmax", "matmul_pow", "silu", "softplus",
        "tanh")),
    "test_memory.py::test_peak_backward_memory_at_most_eagers[ckpt4-inductor]",
    "test_memory.py::test_peak_backward_memory_at_most_eagers[ckpt4_sac-inductor]",
    # real models on Inductor: CI keeps gpt2-hooks and llama-ckpt (and every eager variant)
    *(f"test_real_models.py::test_real_model_inductor[{m}]" for m in (
        "llama-plain", "llama-hooks", "t5-plain", "t5-hooks", "t5-ckpt", "gpt2-plain",
        "gpt2-ckpt", "bert-plain", "bert-hooks", "bert-ckpt", "vit-hooks", "vit-ckpt")),
    "test_real_models.py::test_real_model_compiled_forward[gpt2-inductor-cold]",
    # checkpointed families on Inductor: CI keeps llama, phi3 (Note [Inductor: views of
    # intermediates]) and deberta_v2 (and every eager variant)
    *(f"test_real_models.py::test_checkpointed_blocks_are_traced[inductor-{m}]" for m in (
        "mistral", "qwen3", "gemma2", "olmo", "gpt_neox", "falcon", "modernbert")),
    # mutations in an AOT backward on our Inductor: CI keeps mul_ under an Inductor forward
    # (and every eager variant)
    *(f"test_aot.py::test_an_aot_backward_mutating_a_forward_input[inductor-{x}-{how}-{fw}]"
      for x in ("leaf requiring grad", "non-leaf", "buffer") for how in ("copy_", "view add_")
      for fw in ("aot_eager", "inductor")),
    ("test_aot.py::test_an_aot_backward_mutating_a_forward_input"
     "[inductor-leaf requiring grad-mul_-aot_eager]"),
    # (2026-12-01, `--durations`: 12-57 s each, ~660 s of the suite's ~4800; each test's eager
    # variant stays, and CI keeps the shorter Inductor tests of the same files: in
    # test_dynamic_shapes the transformer lengths, data-dependent sizes, changing strides and
    # the views; in test_recompute GPT-2's plain checkpointing and the
    # policies; the llama, phi3 and deberta_v2 blocks of test_real_models)
    *(f"test_hooks.py::{t}" for t in (
        "test_global_module_hooks_see_only_user_modules[inductor-forward_pre]",
        "test_full_backward_hook_zeros_for_an_argument_without_grad_follow_this_step[inductor]",
    )),
    *(f"test_recompute.py::{t}" for t in (
        "test_checkpointed_gru_is_traced[inductor]",
        "test_hf_gpt2_with_dropout_is_traced[inductor]",
        "test_timm_checkpoint_seq_closures_are_traced[inductor-1-False]",
        "test_timm_checkpoint_seq_closures_are_traced[inductor-3-False]",
        "test_hf_gpt2_selective_checkpointing_is_traced[inductor]",
        "test_torch_checkpoint_sequential_is_traced[inductor]",
    )),
    "test_gradient_edges.py::test_a_pipeline_stages_split_backward[inductor-False]",
    *(f"test_real_models.py::{t}" for t in (
        "test_checkpointed_blocks_are_traced[inductor-t5]",
        "test_moe_over_varying_lengths[inductor]",
        "test_real_model_sequence_lengths_one_dynamic_graph[gpt2-inductor]",
    )),
    *(f"test_dynamic_shapes.py::{t}" for t in (
        "test_independent_dims_one_broadcasting_against_the_other[inductor]",
        "test_slice_ends_that_follow_the_size[inductor]",
        "test_sizes_in_reduction_and_loss_formulas[inductor]",
        "test_a_batch_of_one_that_builds_another_graph[inductor]",
        "test_size_one_and_back_broadcasting[inductor]",
        "test_grad_inputs_and_retain_graph[inductor]",
        "test_bmm_with_a_batch_going_to_one[inductor]",
        "test_a_node_without_a_symbolic_formula_stays_static_and_says_why[inductor]",
        "test_image_batch_through_a_conv_stem[inductor]",
        "test_dynamic_true_first_capture_at_a_batch_of_one[inductor]",
        "test_dynamic_false_one_capture_per_shape[inductor]",
    )),
    *(f"test_core.py::{t}" for t in (
        "test_opaque_output_with_overlapping_layout_returned_by_grad[inductor]",
        "test_custom_function_compiles_as_opaque_call[inductor]",
    )),
    *(f"test_aot.py::{t}" for t in (
        "test_resnet_under_torch_compile_is_spliced[inductor-contiguous-cold]",
        "test_compiled_checkpointed_dropout_draws_the_forwards_mask[inductor-aot_eager]",
    )),
    "test_custom_auto_traced.py::test_ctx_attributes_change_between_steps_recapture[inductor]",
    *(f"test_traceable_hooks.py::{t}" for t in (
        "test_new_unpack_function_or_packed_value_is_a_new_graph[inductor]",
        "test_packed_plain_values_keyed_with_their_type[inductor]",
    )),
    ("test_custom_function_cases.py::"
     "test_traced_backward_reading_a_reassigned_global_is_never_stale[inductor]"),
    # (2026-12-02, `--durations`: 33-48 s each; CI keeps the eager variant, or a sibling:
    # timm's eager 1-True and 1-False; fuzz_aliasing's Inductor seed 1000 and every eager
    # seed; warm start's corrupted-entry test and the Inductor loads of a second process)
    "test_core.py::test_formula_reading_tensor_data_runs_as_the_real_node[inductor]",
    "test_recompute.py::test_timm_checkpoint_seq_closures_are_traced[inductor-1-True]",
    "test_fuzz_aliasing.py::test_random_aliasing_between_steps_inductor[1004]",
    "test_warm_start.py::test_a_compiled_graph_that_does_not_load_is_captured_again",
    "test_warm_start.py::test_inductor_cache_dir_cleaned_between_runs",
}


def _feature_off(item, off: dict) -> str | None:
    """Why a feature the test needs is off on this torch release, or None."""
    for m in item.iter_markers("needs_feature"):
        for name in m.args:
            if name in off:
                return f"{off[name]} (tests/test_release_features.py checks the fallback)"
    return None


def pytest_collection_modifyitems(config, items):
    from compiled_bw.torchapi import features_off
    off = features_off()
    skip = pytest.mark.skip(reason=f"left to tools/full_check.sh ({FULL_CHECK_ENV}=1; "
                                   "tests/conftest.py Note [Full check])")
    for item in items:
        name = item.nodeid.rsplit("/", 1)[-1]
        if name in RELEASE_SLOW or (item.path.name in RELEASE_FILES
                                    and item.get_closest_marker("slow") is None):
            item.add_marker(pytest.mark.release)
        if name in FULL_CHECK_ONLY and not FULL_CHECK:
            item.add_marker(skip)
        why = _feature_off(item, off) if off else None
        if why is not None:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(autouse=True)
def cbw_compile_mode(request, monkeypatch):
    if request.node.get_closest_marker("foreground_compile") is not None:
        monkeypatch.setenv("COMPILED_BW_BACKGROUND_COMPILE", "0")


@pytest.fixture(autouse=True)
def cbw_backend(request, monkeypatch):
    backend = getattr(request, "param", None)
    if backend is not None:
        monkeypatch.setenv("COMPILED_BW_TEST_BACKEND", backend)
    return backend


@pytest.fixture(autouse=True)
def cbw_device():
    """COMPILED_BW_TEST_DEVICE=cuda runs a suite with tensors made on that device by default
    (tools/gpu_check.sh runs the differential suites so on a GPU)."""
    dev = os.environ.get("COMPILED_BW_TEST_DEVICE")
    if not dev:
        yield None
        return
    import torch
    torch.set_default_device(dev)
    try:
        yield dev
    finally:
        torch.set_default_device(None)


def pytest_generate_tests(metafunc):
    if metafunc.definition.get_closest_marker("both_backends") is not None \
            and "cbw_backend" in metafunc.fixturenames:
        metafunc.parametrize("cbw_backend", ["eager", pytest.param("inductor", marks=pytest.mark.slow)],
                             indirect=True)


def _fastwalk_requested() -> bool:
    return os.environ.get("COMPILED_BW_FASTWALK", "1") not in ("", "0")


# counters of pytest-xdist's workers (`-n 2`), sent to the controller as they finish
_WORKER_COUNTERS: list = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    c = getattr(node, "workeroutput", {}).get("cbw_fastwalk")
    if c is not None:
        _WORKER_COUNTERS.append(c)


def _counters() -> dict:
    from compiled_bw.walk import fastwalk
    if not _WORKER_COUNTERS:
        return fastwalk.counters()
    total = {"fast_walks": 0, "py_walks": 0, "gave_up": {}, "error": None}
    for c in _WORKER_COUNTERS:
        total["fast_walks"] += c["fast_walks"]
        total["py_walks"] += c["py_walks"]
        total["error"] = total["error"] or c["error"]
        for k, v in c["gave_up"].items():
            total["gave_up"][k] = total["gave_up"].get(k, 0) + v
    return total


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The C++ walk on (the default): say how many steps it did (walk/fastwalk.py)."""
    if not _fastwalk_requested():
        return
    c = _counters()
    terminalreporter.write_line(
        f"C++ walk: {c['fast_walks']} steps walked in C++, {c['py_walks']} by the Python walk "
        f"(gave up: {c['gave_up']}){' UNAVAILABLE: ' + c['error'] if c['error'] else ''}")


def pytest_sessionfinish(session, exitstatus):
    if _fastwalk_requested():
        from compiled_bw.walk import fastwalk
        c = fastwalk.counters()
        if hasattr(session.config, "workeroutput"):     # an xdist worker: tell the controller
            session.config.workeroutput["cbw_fastwalk"] = {
                "fast_walks": c["fast_walks"], "py_walks": c["py_walks"],
                "gave_up": dict(c["gave_up"]), "error": c["error"]}
        if c["error"]:
            session.exitstatus = 1      # the C++ walk was asked for but could not be loaded


def pytest_runtest_logreport(report):
    """COMPILED_BW_FAILURE_LOG=FILE: each failure's traceback is appended to FILE as it
    happens (tools/gpu_check.sh: a run cut off by its time limit never prints pytest's
    summary, so the failures of a lent GPU machine's run were names without a reason)."""
    path = os.environ.get("COMPILED_BW_FAILURE_LOG")
    if not path or not report.failed or hasattr(report, "node"):   # node: xdist's copy
        return
    with open(path, "a") as f:
        f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n")
