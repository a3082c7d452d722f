"""Applying several LoRAs: strengths, sums of deltas, no-ops, ordering, duplicates, mismatches."""

from __future__ import annotations

import pytest
import torch

from mixkit.lora import LoraMismatchError, LoraRequest, apply_loras
from mixkit.lora.apply import applied_lora_records
from mixkit.errors import UnknownNameError
from tests.mixkit.lora.conftest import assert_bit_identical, make_peer_lora, relative_error, run_model, snapshot


def _merged_change(model, requests):
    before = snapshot(model)
    handle = apply_loras(model.unet, model.text_encoders, requests, mode="merge")
    after = snapshot(model)
    handle.remove()
    return {k: after[k].double() - before[k].double() for k in before}


def test_two_loras_merge_to_the_sum_of_their_deltas(tmp_path, sd1):
    first = make_peer_lora(tmp_path, sd1, "lokr", seed=11, name="first").path
    second = make_peer_lora(tmp_path, sd1, "loha", seed=12, name="second").path
    a, b = 0.8, -0.35
    delta_first = _merged_change(sd1, [LoraRequest(first)])
    delta_second = _merged_change(sd1, [LoraRequest(second)])
    combined = _merged_change(sd1, [LoraRequest(first, a, a), LoraRequest(second, b, b)])
    for key, change in combined.items():
        expected = a * delta_first[key] + b * delta_second[key]
        assert torch.allclose(change, expected, rtol=1e-4, atol=1e-6), key


def test_text_encoder_and_unet_strengths_are_separate(tmp_path, sd1):
    path = make_peer_lora(tmp_path, sd1, "lora", seed=13).path
    only_unet = _merged_change(sd1, [LoraRequest(path, te_weight=0.0, unet_weight=1.0)])
    only_te = _merged_change(sd1, [LoraRequest(path, te_weight=1.0, unet_weight=0.0)])
    assert all(not torch.any(v) for k, v in only_unet.items() if k.startswith("te0."))
    assert any(torch.any(v) for k, v in only_unet.items() if k.startswith("unet."))
    assert all(not torch.any(v) for k, v in only_te.items() if k.startswith("unet."))
    assert any(torch.any(v) for k, v in only_te.items() if k.startswith("te0."))


@pytest.mark.parametrize("algo, kwargs", [("lora", {}), ("lora", {"dora_wd": True}), ("ia3", {})])
def test_strength_zero_is_a_no_op(tmp_path, sd1, algo, kwargs):
    path = make_peer_lora(tmp_path, sd1, algo, seed=14, **kwargs).path
    before = snapshot(sd1)
    for mode in ("merge", "runtime"):
        handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 0.0, 0.0)], mode=mode)
        assert_bit_identical(sd1, before)
        handle.remove()


@pytest.mark.parametrize("algo, kwargs", [("lora", {}), ("loha", {}), ("ia3", {}), ("lora", {"dora_wd": True})],
                         ids=["lora-bypass", "loha-dense", "ia3-weight-dependent", "dora-weight-dependent"])
def test_a_merged_set_comes_off_under_a_later_runtime_set_which_stays_exact(tmp_path, sd1, algo, kwargs):
    """A1111's baked-in LoRA removed while a later runtime set is on: the weights come back bit for bit, and the
    runtime set then gives exactly what applying it alone gives (IA3's and DoRA's changes, which depend on the
    weight, computed again on the restored one)."""
    merged = make_peer_lora(tmp_path, sd1, "lokr", seed=15, name="merged").path
    runtime = make_peer_lora(tmp_path, sd1, algo, seed=16, name="runtime", **kwargs).path
    before = snapshot(sd1)
    with apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(runtime, 0.8, 0.6)], mode="runtime"):
        expected = run_model(sd1)  # the runtime set alone, on the base weights
    handle_merged = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(merged)], mode="merge")
    handle_runtime = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(runtime, 0.8, 0.6)], mode="runtime")
    both = run_model(sd1)
    assert any(not torch.equal(a, b) for a, b in zip(both, expected))  # the merged set did change the outputs
    handle_merged.remove()
    assert handle_merged.removed and not handle_runtime.removed
    restored = snapshot(sd1)  # the saved weights, bit for bit (runtime sets write no parameter)
    assert [key for key in before if not torch.equal(restored[key], before[key])] == []
    assert [record.split(":")[0] for record in applied_lora_records(sd1.unet)] == ["runtime"]
    for got, wanted in zip(run_model(sd1), expected):
        assert torch.equal(got, wanted)
    handle_runtime.remove()
    assert_bit_identical(sd1, before)  # the weights, and no forward left patched
    assert applied_lora_records(sd1.unet) == ()


def test_a_merged_set_under_a_later_merged_set_is_still_refused(tmp_path, sd1):
    first = make_peer_lora(tmp_path, sd1, "lora", seed=15, name="first").path
    second = make_peer_lora(tmp_path, sd1, "ia3", seed=16, name="second").path
    third = make_peer_lora(tmp_path, sd1, "loha", seed=17, name="third").path
    before = snapshot(sd1)
    with apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(second)], mode="runtime"):
        only_second = run_model(sd1)
    handle_first = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(first)], mode="merge")
    handle_second = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(second)], mode="runtime")
    handle_third = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(third)], mode="merge")
    all_three = run_model(sd1)
    with pytest.raises(ValueError) as raised:
        handle_first.remove()
    assert str(raised.value) == (
        "LoRAs first were merged into the weights before third were merged too, which are still applied; remove the "
        "most recently applied merged LoRAs first (merged weights are put back from a copy taken before the later "
        "merges), or apply with mode='runtime', whose sets come off in any order.")
    assert all(torch.equal(a, b) for a, b in zip(run_model(sd1), all_three))  # the refused removal changed nothing
    assert not handle_first.removed and len(applied_lora_records(sd1.unet)) == 3
    handle_third.remove()
    handle_first.remove()  # the runtime set between them stays on
    handle_first.remove()  # idempotent
    assert all(torch.equal(a, b) for a, b in zip(run_model(sd1), only_second))
    handle_second.remove()
    assert_bit_identical(sd1, before)


def test_two_merged_sets_come_off_last_first_and_restore_the_weights(tmp_path, sd1):
    first = make_peer_lora(tmp_path, sd1, "lora", seed=15, name="first").path
    second = make_peer_lora(tmp_path, sd1, "lokr", seed=16, name="second").path
    before = snapshot(sd1)
    handle_first = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(first)], mode="merge")
    handle_second = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(second)], mode="merge")
    with pytest.raises(ValueError, match="remove the most recently applied"):
        handle_first.remove()
    handle_second.remove()
    handle_first.remove()
    assert_bit_identical(sd1, before)


def _outputs_with(model, requests_by_set) -> list[torch.Tensor]:
    """The model's outputs with each request list applied in runtime mode, in order (then all removed)."""
    handles = [apply_loras(model.unet, model.text_encoders, requests, mode="runtime") for requests in requests_by_set]
    try:
        return run_model(model)
    finally:
        for handle in reversed(handles):
            handle.remove()


@pytest.mark.parametrize("removal", [(0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 0, 1)])
def test_runtime_sets_come_off_in_any_order(tmp_path, sd1, removal):
    """Each removal leaves exactly what applying the remaining sets alone gives (the runtime changes are added to
    the layers' outputs in application order, so the oracle is exact), then the model bit for bit."""
    sets = [[LoraRequest(make_peer_lora(tmp_path, sd1, algo, seed=20 + index, name=f"set{index}").path, 0.7, 0.9)]
            for index, algo in enumerate(("lora", "loha", "lokr"))]
    before = snapshot(sd1)
    remaining = [sorted(removal[step + 1:]) for step in range(3)]
    expected = [_outputs_with(sd1, [sets[i] for i in left]) for left in remaining]  # before any set is applied
    handles = [apply_loras(sd1.unet, sd1.text_encoders, requests, mode="runtime") for requests in sets]
    for step, index in enumerate(removal):
        handles[index].remove()
        left = remaining[step]
        assert [record.split(":")[0] for record in applied_lora_records(sd1.unet)] == [f"set{i}" for i in left]
        for got, wanted in zip(run_model(sd1), expected[step]):
            assert torch.equal(got, wanted), f"after removing sets {removal[:step + 1]}"
    assert_bit_identical(sd1, before)


def test_a_runtime_set_applied_before_a_merged_one_can_come_off_first(tmp_path, sd1):
    runtime = make_peer_lora(tmp_path, sd1, "lora", seed=31, name="runtime").path
    merged = make_peer_lora(tmp_path, sd1, "loha", seed=32, name="merged").path
    before = snapshot(sd1)
    handle_runtime = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(runtime)], mode="runtime")
    handle_merged = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(merged)], mode="merge")
    handle_runtime.remove()
    only_merged = run_model(sd1)
    handle_merged.remove()
    assert_bit_identical(sd1, before)
    with apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(merged)], mode="merge"):
        assert all(torch.equal(a, b) for a, b in zip(run_model(sd1), only_merged))
    assert_bit_identical(sd1, before)


def test_a_lora_listed_twice_is_applied_once_at_the_sum_of_its_strengths(tmp_path, sd1):
    # Two requests of one file stack, as two LoRA loaders on one file do in ComfyUI (prompt tags of one name are
    # first given their last mention's strengths, as in A1111: test_tags_same_name.py).
    path = make_peer_lora(tmp_path, sd1, "lora", seed=17).path
    before = snapshot(sd1)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 0.5, 0.25), LoraRequest(str(path), 0.3, 0.5)])
    twice = snapshot(sd1)
    handle.remove()
    assert_bit_identical(sd1, before)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 0.8, 0.75)])
    once = snapshot(sd1)
    handle.remove()
    assert twice.keys() == once.keys() and all(torch.equal(twice[k], once[k]) for k in once)
    assert any(not torch.equal(once[k], before[k]) for k in once)
    assert [item.request.te_weight for item in handle.loaded] == [0.8]


def test_sdxl_lora_on_sd1_lists_keys_and_leaves_model_untouched(tmp_path, sd1, sdxl):
    good = make_peer_lora(tmp_path, sd1, "lora", seed=18, name="good").path
    xl = make_peer_lora(tmp_path, sdxl, "lora", seed=18, name="xl").path
    before = snapshot(sd1)
    with pytest.raises(LoraMismatchError) as caught:
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(good), LoraRequest(xl)], mode="merge")
    message = str(caught.value)
    assert "xl.safetensors" in message and "SDXL" in message and "second text encoder" in message
    assert any(p.startswith("lora_te2_") for p in caught.value.problems)
    assert_bit_identical(sd1, before)


def test_sd2_lora_on_sd1_differs_only_by_the_pointwise_proj_layout_here(tmp_path, tiny_sd2v_dir, sd1):
    """Real SD 2.x LoRAs do not fit SD 1.x (cross-attention k/v read 1024-wide text, not 768: shape mismatches, as the
    SDXL test above shows for another family). The tiny SD 2.x shares every width with the tiny SD 1.x, so its only
    difference is proj_in/proj_out: Linear in SD 2.x, 1x1 Conv in SD 1.x, the same numbers, which A1111 reshapes and
    applies (test_pointwise_layouts); so does mixkit, and removal restores the model."""
    from tests.mixkit.lora.conftest import _load

    sd2 = _load(tiny_sd2v_dir, sdxl=False)
    path = make_peer_lora(tmp_path, sd2, "lora", seed=19, name="sd2").path
    before = snapshot(sd1)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode="runtime")
    assert any(match.target.path.endswith("proj_in") for match in handle.loaded[0].matched)
    handle.remove()
    assert_bit_identical(sd1, before)


def test_unknown_mode_and_bad_requests(tmp_path, sd1):
    path = make_peer_lora(tmp_path, sd1, "lora", seed=20).path
    with pytest.raises(UnknownNameError, match="runtime"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode="fast")
    with pytest.raises(TypeError, match="LoraRequest"):
        apply_loras(sd1.unet, sd1.text_encoders, [str(path)])
    with pytest.raises(ValueError, match="finite"):
        LoraRequest(path, te_weight=float("nan"))
    with pytest.raises(FileNotFoundError, match="not a file"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest("no_such_lora")])


def test_unmatched_key_is_reported_not_ignored(tmp_path, sd1):
    from safetensors.torch import save_file

    peer = make_peer_lora(tmp_path, sd1, "lora", seed=21)
    state = dict(peer.state_dict)
    state["lora_unet_down_blocks_9_attentions_0_proj_in.lora_down.weight"] = torch.zeros(4, 32)
    state["lora_unet_down_blocks_9_attentions_0_proj_in.lora_up.weight"] = torch.zeros(32, 4)
    state["lora_unet_down_blocks_0_attentions_0_proj_in.mystery"] = torch.zeros(1)
    path = tmp_path / "extra.safetensors"
    save_file(state, str(path))
    before = snapshot(sd1)
    with pytest.raises(LoraMismatchError) as caught:
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])
    assert "lora_unet_down_blocks_9_attentions_0_proj_in" in str(caught.value)
    assert "mystery" in str(caught.value)
    assert_bit_identical(sd1, before)


def test_infotext_hashes_format(tmp_path, sd1):
    import hashlib
    import struct

    first = make_peer_lora(tmp_path, sd1, "lora", seed=22, name="first").path
    second = make_peer_lora(tmp_path, sd1, "lora", seed=23, name="second",
                            metadata={"sshs_model_hash": "abcdef0123456789" * 4}).path
    data = first.read_bytes()
    (header_length,) = struct.unpack("<Q", data[:8])
    expected_first = hashlib.sha256(data[8 + header_length:]).hexdigest()[:12]
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(first), LoraRequest(second, name="styled")])
    assert handle.infotext_hashes() == f"first: {expected_first}, styled: abcdef012345"
    handle.remove()


def test_one_module_under_two_names_is_a_conflict(tmp_path, sd1):
    from safetensors.torch import save_file

    lora = {"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.ones(1, 32, 1, 1),
            "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.ones(32, 1, 1, 1),
            "lora_unet_input_blocks_1_1_proj_in.lora_down.weight": torch.ones(1, 32, 1, 1),
            "lora_unet_input_blocks_1_1_proj_in.lora_up.weight": torch.ones(32, 1, 1, 1)}
    path = tmp_path / "twice.safetensors"
    save_file(lora, str(path))
    with pytest.raises(LoraMismatchError, match="both target down_blocks.0.attentions.0.proj_in"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])


def test_dyn_cuts_a_lora_to_its_first_ranks_at_the_full_files_scale(tmp_path, sd1):
    # A1111's `<lora:name:1:1:dyn=2>` (DyLoRA): rebuild_conventional slices up[:, :dyn] and down[:dyn], and the scale
    # stays alpha over the file's full rank (its calc_scale reads the rank from the stored lora_down).
    from safetensors.torch import load_file

    path = make_peer_lora(tmp_path, sd1, "lora", seed=19, dim=4, alpha=2.0).path
    tensors = load_file(path)
    name = next(k[:-len(".lora_down.weight")] for k in tensors if k.endswith(".lora_down.weight") and "lora_unet" in k)
    down, up, alpha = tensors[f"{name}.lora_down.weight"], tensors[f"{name}.lora_up.weight"], tensors[f"{name}.alpha"]
    expected = (up[:, :2].reshape(up.shape[0], -1) @ down[:2].reshape(2, -1)) * (alpha.item() / 4) * 0.5
    before = snapshot(sd1)
    outputs = {}
    for mode in ("merge", "runtime"):
        handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 0.5, 0.5, dyn_dim=2)], mode=mode)
        if mode == "merge":
            changed = {k: v - before[k] for k, v in snapshot(sd1).items() if not torch.equal(v, before[k])}
            key = next(k for k in changed if k.replace(".", "_").startswith("unet_" + name[len("lora_unet_"):]))
            assert torch.allclose(changed[key].reshape(expected.shape), expected, atol=1e-6)
        outputs[mode] = run_model(sd1)
        handle.remove()
        assert_bit_identical(sd1, before)
    assert all(relative_error(a, b) < 1e-5 for a, b in zip(outputs["merge"], outputs["runtime"]))
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, 0.5, 0.5)])
    full = run_model(sd1)
    handle.remove()
    assert relative_error(outputs["merge"][0], full[0]) > 1e-4  # the cut changes the result
    with pytest.raises(ValueError, match="named twice with different dyn"):
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, dyn_dim=2), LoraRequest(path, dyn_dim=3)])


def test_lora_hashes_names_lose_colons_and_commas_as_in_a1111(tmp_path, sd1):
    """A1111 writes `Lora hashes` with ':' and ',' removed from the names (readers split on them)."""
    path = make_peer_lora(tmp_path, sd1, "lora", seed=17, name="a,b").path
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, name="a,b")])
    short = handle.loaded[0].lora.short_hash()
    assert handle.infotext_hashes() == f"ab: {short}"
    handle.remove()
    other = make_peer_lora(tmp_path, sd1, "loha", seed=18, name="other").path
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, name="a,b"), LoraRequest(other, name="c:d")])
    assert handle.infotext_hashes() == f"ab: {short}, cd: {handle.loaded[1].lora.short_hash()}"
    handle.remove()


def test_partial_applies_the_modules_that_fit_and_lists_the_rest(tmp_path, sd1):
    """`partial=True` (A1111's per-layer patching, used for a refiner): the fitting modules change the model exactly as
    the whole file would, an unmatched module and a wrong shape are left out and listed, and removal restores it."""
    from safetensors.torch import save_file

    peer = make_peer_lora(tmp_path, sd1, "lora", seed=22)
    whole = _merged_change(sd1, [LoraRequest(peer.path)])
    state = dict(peer.state_dict)
    state["lora_unet_down_blocks_9_attentions_0_proj_in.lora_down.weight"] = torch.ones(4, 32)
    state["lora_unet_down_blocks_9_attentions_0_proj_in.lora_up.weight"] = torch.ones(32, 4)
    shaped = next(key for key in state if key.startswith("lora_unet_") and key.endswith(".lora_down.weight"))
    wrong = shaped.removesuffix(".lora_down.weight")
    state[shaped] = torch.ones(state[shaped].shape[0], state[shaped].shape[1] + 1)  # one input too many
    path = tmp_path / "partly.safetensors"
    save_file(state, str(path))
    before = snapshot(sd1)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], partial=True)
    after = snapshot(sd1)
    applied, left_out = handle.left_out()["partly"]
    assert applied == handle.module_count() > 0
    assert any("down_blocks_9" in key for key in left_out) and any(wrong in key for key in left_out)
    skipped = []
    for key, change in whole.items():
        got = after[key].double() - before[key].double()
        if not got.any() and change.any():
            skipped.append(key)  # the wrong-shaped module's layer: left out, unchanged
            continue
        assert torch.allclose(got, change, rtol=1e-6, atol=1e-7), key
    assert len(skipped) == 1
    handle.remove()
    assert_bit_identical(sd1, before)
    with pytest.raises(LoraMismatchError):  # the default stays all-or-nothing
        apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])
