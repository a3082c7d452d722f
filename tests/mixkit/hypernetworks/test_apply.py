"""Hypernetworks on a UNet's attention: the key/value context transformed exactly, stacked in order, undone."""

from __future__ import annotations

import pytest
import torch

from mixkit.hypernetworks import HypernetworkApplication, apply_hypernetworks, load_hypernetwork
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hypernetworks")
    return {name: write_a1111_hypernetwork(folder / f"{name}.pt", widths=(32, 64), seed=seed)
            for seed, name in enumerate(("first", "second"))}


def attention(unet, width: int, cross: bool):
    """The first attention of `unet` whose key projection reads `width`-wide context (cross: attn2, else attn1)."""
    from diffusers.models.attention_processor import Attention

    return next(module for name, module in unet.named_modules()
                if isinstance(module, Attention) and name.endswith("attn2" if cross else "attn1")
                and module.to_k.in_features == width)


def test_the_cross_attention_context_goes_through_the_key_and_value_mlps(sd1_model, files):
    unet = sd1_model.unet
    module = attention(unet, 32, cross=True)  # the tiny model's text context is 32 wide
    hypernetwork = load_hypernetwork(files["first"])
    context = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(0))
    key_mlp, value_mlp = hypernetwork.layers[32]
    with torch.no_grad():
        expected_k = torch.nn.functional.linear(key_mlp(context, 0.6), module.to_k.weight, module.to_k.bias)
        expected_v = torch.nn.functional.linear(value_mlp(context, 0.6), module.to_v.weight, module.to_v.bias)
        with apply_hypernetworks(unet, [HypernetworkApplication(hypernetwork, 0.6)]):
            assert torch.equal(module.to_k(context), expected_k)
            assert torch.equal(module.to_v(context), expected_v)
        assert torch.equal(module.to_k(context), torch.nn.functional.linear(context, module.to_k.weight,
                                                                            module.to_k.bias))
    assert "forward" not in module.to_k.__dict__ and "forward" not in module.to_v.__dict__


def test_self_attention_of_a_matching_width_is_transformed_too(sd1_model, files):
    # A1111 applies the hypernetwork in every CrossAttention; in self-attention the context is the hidden states,
    # which is what the 320/640/1280 entries of real files are for
    unet = sd1_model.unet
    hypernetwork = load_hypernetwork(files["first"])
    with apply_hypernetworks(unet, [HypernetworkApplication(hypernetwork, 1.0)]) as applied:
        assert "forward" in attention(unet, 64, cross=False).to_k.__dict__
        assert applied.widths == {"first": [32, 64]}


def test_two_hypernetworks_stack_in_prompt_order(sd1_model, files):
    unet = sd1_model.unet
    module = attention(unet, 32, cross=True)
    first, second = load_hypernetwork(files["first"]), load_hypernetwork(files["second"])
    context = torch.randn(1, 4, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        chained = second.layers[32][0](first.layers[32][0](context, 0.5), 0.8)  # the first sees the raw context
        expected = torch.nn.functional.linear(chained, module.to_k.weight, module.to_k.bias)
        with apply_hypernetworks(unet, [HypernetworkApplication(first, 0.5), HypernetworkApplication(second, 0.8)]):
            assert torch.equal(module.to_k(context), expected)
        with apply_hypernetworks(unet, [HypernetworkApplication(second, 0.8), HypernetworkApplication(first, 0.5)]):
            assert not torch.equal(module.to_k(context), expected)


def test_another_forward_patch_underneath_is_kept_and_restored(sd1_model, files):
    module = attention(sd1_model.unet, 32, cross=True)
    calls = []

    def patched(x):
        calls.append(x)
        return torch.nn.functional.linear(x, module.to_k.weight, module.to_k.bias)

    module.to_k.forward = patched
    try:
        hypernetwork = load_hypernetwork(files["first"])
        context = torch.randn(1, 2, 32)
        with torch.no_grad(), apply_hypernetworks(sd1_model.unet, [HypernetworkApplication(hypernetwork, 1.0)]):
            module.to_k(context)
        assert torch.equal(calls[0], hypernetwork.layers[32][0](context, 1.0))  # it saw the transformed context
        assert module.to_k.__dict__["forward"] is patched
    finally:
        del module.to_k.forward


def test_a_file_for_other_widths_does_nothing_with_a_warning(sd1_model, tmp_path):
    hypernetwork = load_hypernetwork(write_a1111_hypernetwork(tmp_path / "sd15.pt", widths=(768, 320)))
    with pytest.warns(UserWarning, match=r"'sd15' not applied: its context widths \[320, 768\].*\[32, 64\]"):
        applied = apply_hypernetworks(sd1_model.unet, [HypernetworkApplication(hypernetwork, 1.0)])
    assert applied.widths == {"sd15": []}
    applied.remove()


@pytest.mark.parametrize("strength", [float("nan"), float("inf"), 101.0, True, "1"])
def test_strength_bounds(files, strength):
    with pytest.raises(ValueError, match="hypernetwork 'first': strength"):
        HypernetworkApplication(load_hypernetwork(files["first"]), strength)


def test_sdxl_cross_attention_takes_a_file_of_its_context_width(sdxl_model, tmp_path):
    unet = sdxl_model.unet
    module = attention(unet, 64, cross=True)  # the tiny SDXL context is 64 wide (2048 in the real model)
    hypernetwork = load_hypernetwork(write_a1111_hypernetwork(tmp_path / "xl.pt", widths=(64,)))
    context = torch.randn(1, 3, 64, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        expected = torch.nn.functional.linear(hypernetwork.layers[64][1](context, 0.3), module.to_v.weight,
                                              module.to_v.bias)
        with apply_hypernetworks(unet, [HypernetworkApplication(hypernetwork, 0.3)]):
            assert torch.equal(module.to_v(context), expected)
    assert not any("forward" in m.__dict__ for m in unet.modules())


def test_an_error_half_way_through_applying_leaves_no_projection_wrapped(sd1_model, files, monkeypatch):
    from mixkit.hypernetworks import apply as hypernetwork_apply

    unet = sd1_model.unet
    real_install, installed = hypernetwork_apply.install_forward_patch, []

    def failing_third(module, body, name, **options):
        if len(installed) == 2:
            raise KeyboardInterrupt  # the user stops the call while the projections are being wrapped
        installed.append(module)
        return real_install(module, body, name, **options)

    monkeypatch.setattr(hypernetwork_apply, "install_forward_patch", failing_third)
    with pytest.raises(KeyboardInterrupt):
        apply_hypernetworks(unet, [HypernetworkApplication(load_hypernetwork(files["first"]), 1.0)])
    assert len(installed) == 2
    assert not any("forward" in m.__dict__ or "_mixkit_forward_input_transforms" in m.__dict__ for m in unet.modules())
