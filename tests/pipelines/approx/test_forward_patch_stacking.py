"""Every forward patch mixkit stacks on one UNet (runtime LoRA, hypernetworks, DeepCache, oneDNN routing, over fused
QKV or not), applied in one order and removed in another: each removal takes out only its own patch, and the last
one gives back the base UNet's output bit for bit with nothing left on any module."""

from __future__ import annotations

import pytest
import torch
from diffusers import UNet2DConditionModel

from mixkit.hypernetworks import HypernetworkApplication, apply_hypernetworks, load_hypernetwork
from mixkit.lora import LoraRequest, apply_loras
from mixkit.runtime import cpu_linear
from mixkit.runtime.fused_qkv import fuse_qkv
from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from mixkit.testing.tiny_lora import write_attention_lora
from pipelines.approx.deepcache import DeepCacheSettings, apply_deepcache, deepcache_state, remove_deepcache

pytestmark = pytest.mark.skipif(not cpu_linear.onednn_linear_available(),
                                reason="the oneDNN routing is one of the stacked patches")


@pytest.fixture(scope="module")
def files(tiny_sd1_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("patches")
    unet = UNet2DConditionModel.from_pretrained(tiny_sd1_dir, subfolder="unet")
    return {"lora": write_attention_lora(unet, folder / "lora.safetensors", scale=0.5),
            "hypernetwork": write_a1111_hypernetwork(folder / "hypernetwork.pt", widths=(32, 64))}


def fresh_unet(folder, fused: bool):
    unet = UNet2DConditionModel.from_pretrained(folder, subfolder="unet").eval()
    if fused:
        assert fuse_qkv(unet) > 0
    return unet


def installers(files, monkeypatch):
    """name -> install(unet) returning its remover: the patches as the pipelines install them."""
    # the tiny model's layers are far below the routing's size floor: route them all, so routing really patches
    monkeypatch.setattr(cpu_linear, "MIN_WEIGHT_ELEMENTS", 0)

    def lora(unet):
        return apply_loras(unet, [], [LoraRequest(files["lora"], unet_weight=0.7)], mode="runtime").remove

    def hypernetwork(unet):
        return apply_hypernetworks(unet, [HypernetworkApplication(load_hypernetwork(files["hypernetwork"]), 0.8)]).remove

    def deepcache(unet):
        apply_deepcache(unet, DeepCacheSettings(interval=2))
        return lambda: remove_deepcache(unet)

    def routing(unet):
        block = cpu_linear.onednn_small_batch_linears(unet)
        assert block.__enter__() > 0
        return lambda: block.__exit__(None, None, None)

    return {"lora": lora, "hypernetwork": hypernetwork, "deepcache": deepcache, "routing": routing}


def outputs(unet) -> torch.Tensor:
    """Two denoising steps (with DeepCache on, the second reuses the first's deep feature), from a fresh cache."""
    state = deepcache_state(unet)
    if state is not None:
        state.reset()
    generator = torch.Generator().manual_seed(0)
    sample = torch.randn(2, 4, 16, 16, generator=generator)
    context = torch.randn(2, 77, unet.config.cross_attention_dim, generator=generator)
    with torch.no_grad():
        return torch.stack([unet(sample, t, context).sample for t in (500, 400)])


def leftovers(unet) -> list[str]:
    """Instance forwards, DeepCache state and forward hooks still on any module of `unet`."""
    found = []
    for name, module in unet.named_modules():
        found += [f"{name or 'unet'}: {what}" for what in ("forward", "_mixkit_deepcache") if what in module.__dict__]
        if module._forward_hooks or module._forward_pre_hooks:
            found.append(f"{name or 'unet'}: hook")
    return found


PLAIN = ["lora", "hypernetwork", "deepcache", "routing"]
ORDERS = [  # (apply order, removal order)
    (PLAIN, PLAIN[::-1]),  # last applied first off
    (PLAIN, PLAIN),  # first applied first off: every removal but the last is from under another patch
    (PLAIN[::-1], ["hypernetwork", "routing", "lora", "deepcache"]),
    (["routing", "lora", "deepcache", "hypernetwork"], ["lora", "hypernetwork", "routing", "deepcache"]),
    (["deepcache", "hypernetwork", "routing", "lora"], ["routing", "deepcache", "lora", "hypernetwork"]),
]
FUSED = ["lora", "deepcache", "routing"]  # hypernetworks refuse fused key/value projections
FUSED_ORDERS = [(FUSED, FUSED[::-1]), (FUSED, FUSED), (FUSED[::-1], ["deepcache", "lora", "routing"])]


@pytest.mark.parametrize("fused, applied, removed", [(False, *order) for order in ORDERS]
                         + [(True, *order) for order in FUSED_ORDERS])
def test_patches_come_off_in_any_order_and_the_base_output_returns_exactly(tiny_sd1_dir, files, monkeypatch, fused,
                                                                           applied, removed):
    install = installers(files, monkeypatch)
    unet = fresh_unet(tiny_sd1_dir, fused)
    base = outputs(unet)
    removers = {name: install[name](unet) for name in applied}
    everything = outputs(unet)
    assert (everything - base).abs().max() > 1e-3  # the patches do change the output
    for step, name in enumerate(removed):
        removers.pop(name)()
        remaining = [other for other in applied if other in removers]
        # the same patches put on a fresh UNet in the same order: what should be left (oneDNN routing may cover a
        # different set of layers than when it came after a LoRA, which changes rounding only)
        oracle = fresh_unet(tiny_sd1_dir, fused)
        undo = [install[other](oracle) for other in remaining]
        expected = outputs(oracle)
        for remover in reversed(undo):
            remover()
        torch.testing.assert_close(outputs(unet), expected, rtol=0, atol=1e-5,
                                   msg=lambda text: f"after removing {removed[:step + 1]}: {text}")
    assert torch.equal(outputs(unet), base)
    assert leftovers(unet) == []
