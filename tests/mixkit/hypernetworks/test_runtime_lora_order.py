"""A runtime LoRA and hypernetworks on the same key/value projections give A1111's result whichever was applied
first: the LoRA's change is computed on the hypernetwork's output, `W·hn(x) + B·hn(x)`, never on the raw context."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mixkit.hypernetworks import HypernetworkApplication, apply_hypernetworks, load_hypernetwork
from mixkit.lora import LoraRequest, apply_loras
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from mixkit.testing.tiny_lora import write_attention_lora
from safetensors.torch import load_file

from .test_apply import attention

STRENGTH, HN_STRENGTH = 0.5, 0.8  # alpha = rank in the file, so the LoRA's factor is exactly STRENGTH


@pytest.fixture(scope="module")
def files(sd1_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("lora-and-hypernetwork")
    return {"lora": write_attention_lora(sd1_model.unet, folder / "lora.safetensors", projections=("to_k", "to_v"),
                                         scale=0.5),
            "hypernetwork": write_a1111_hypernetwork(folder / "hypernetwork.pt", widths=(32, 64))}


def apply_in_order(unet, files, order: tuple[str, str]) -> list:
    """Apply the LoRA (runtime mode) and the hypernetwork in `order`; returns their removers, in that order."""
    apply = {"lora": lambda: apply_loras(unet, [], [LoraRequest(files["lora"], unet_weight=STRENGTH)],
                                         mode="runtime").remove,
             "hypernetwork": lambda: apply_hypernetworks(unet, [HypernetworkApplication(
                 load_hypernetwork(files["hypernetwork"]), HN_STRENGTH)]).remove}
    return [apply[name]() for name in order]


def a1111_key(unet, module, hypernetwork, lora: dict, context: torch.Tensor, lora_input: str = "transformed"):
    """A1111's key: the context through the hypernetwork's key MLP, then the LoRA-patched `to_k` on that
    (`network_Linear_forward`: the layer's output plus `up(down(x)) * scale * multiplier`, on the same input).
    `lora_input="raw"`: the LoRA's change on the raw context instead, the wrong result."""
    key = "lora_unet_" + next(name for name, m in unet.named_modules() if m is module.to_k).replace(".", "_")
    transformed = hypernetwork.layers[32][0](context, HN_STRENGTH)
    seen = transformed if lora_input == "transformed" else context
    low_rank = F.linear(F.linear(seen, lora[f"{key}.lora_down.weight"]), lora[f"{key}.lora_up.weight"])
    return F.linear(transformed, module.to_k.weight, module.to_k.bias) + low_rank * STRENGTH


@pytest.mark.parametrize("order", [("hypernetwork", "lora"), ("lora", "hypernetwork")])
@pytest.mark.parametrize("removal", ["last first", "first first"])
def test_either_order_gives_a1111s_key_and_comes_off_exactly(sd1_model, files, order, removal):
    unet = sd1_model.unet
    module = attention(unet, 32, cross=True)
    context = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = module.to_k(context)
        hypernetwork, lora = load_hypernetwork(files["hypernetwork"]), load_file(str(files["lora"]))
        expected = a1111_key(unet, module, hypernetwork, lora, context)
        wrong = a1111_key(unet, module, hypernetwork, lora, context, lora_input="raw")
        removers = apply_in_order(unet, files, order)
        try:
            got = module.to_k(context)
        finally:
            for remove in (removers[::-1] if removal == "last first" else removers):
                remove()
        assert torch.equal(module.to_k(context), plain)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    assert (wrong - expected).abs().max() > 1e-2  # what a LoRA applied over the hypernetwork used to compute
    assert "forward" not in module.to_k.__dict__ and "_mixkit_forward_input_transforms" not in module.to_k.__dict__


def test_the_whole_unet_computes_the_same_in_both_orders(sd1_model, files):
    unet = sd1_model.unet
    generator = torch.Generator().manual_seed(1)
    sample = torch.randn(1, 4, 8, 8, generator=generator)
    context = torch.randn(1, 7, unet.config.cross_attention_dim, generator=generator)
    results = []
    with torch.no_grad():
        for order in (("hypernetwork", "lora"), ("lora", "hypernetwork")):
            removers = apply_in_order(unet, files, order)
            try:
                results.append(unet(sample, 500, context).sample)
            finally:
                for remove in reversed(removers):
                    remove()
    assert torch.equal(results[0], results[1])


def test_a_hypernetwork_hidden_under_a_foreign_wrapper_refuses_the_lora_and_changes_nothing(sd1_model, files):
    """The LoRA cannot be put below a hypernetwork a spy has wrapped, and on top it would compute on the raw context:
    refused, naming the module, and the projections the LoRA had already patched are put back."""
    unet = sd1_model.unet
    module = attention(unet, 32, cross=True)
    remove_hypernetwork, = apply_in_order(unet, files, ("hypernetwork",))
    captured = module.to_v.forward
    module.to_v.forward = lambda x: captured(x)  # a spy over the hypernetwork on one projection
    generator = torch.Generator().manual_seed(1)
    sample = torch.randn(1, 4, 8, 8, generator=generator)
    context = torch.randn(1, 7, unet.config.cross_attention_dim, generator=generator)
    try:
        with torch.no_grad():
            before = unet(sample, 500, context).sample
            with pytest.raises(ValueError, match=r"unet module .*attn2\.to_v: cannot install runtime LoRA on "
                                                 r"Linear\.forward: 1 input-transforming .*apply runtime LoRA before"):
                apply_in_order(unet, files, ("lora",))
            assert torch.equal(unet(sample, 500, context).sample, before)
    finally:
        del module.to_v.forward
        remove_hypernetwork()
    assert not any("forward" in m.__dict__ or "_mixkit_forward_input_transforms" in m.__dict__ for m in unet.modules())
