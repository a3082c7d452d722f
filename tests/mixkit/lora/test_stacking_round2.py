"""Several LoRAs on one module act in prompt order, each on the weight the earlier ones left.

A1111's `network_apply_weights` loops over the loaded networks and re-reads `self.weight` after each
`self.weight.copy_(...)`, and ComfyUI's `calculate_weight` loops over the patches on the running `weight`: a
weight-dependent family (IA3, OFT, DoRA, GLoRA) therefore also transforms the changes made before it. The
expected weights below restate that sequence by hand, from each family's A1111 definition.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraRequest, apply_loras
from tests.mixkit.lora.conftest import assert_bit_identical, relative_error, run_model, snapshot

TO_Q = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q"  # Linear(32, 32) of the tiny UNet
KEY = "lora_unet_" + TO_Q.replace(".", "_")


def _weight(model) -> torch.Tensor:
    return dict(model.unet.named_modules())[TO_Q].weight.detach().clone()


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _plain(folder: Path) -> tuple[Path, torch.Tensor]:
    """A rank-2 LoRA (alpha 1: scale 1/2) and its full-strength change up @ down / 2."""
    generator = _generator(1)
    down, up = torch.randn(2, 32, generator=generator) * 0.1, torch.randn(32, 2, generator=generator) * 0.1
    path = folder / "plain.safetensors"
    save_file({f"{KEY}.lora_down.weight": down, f"{KEY}.lora_up.weight": up, f"{KEY}.alpha": torch.tensor(1.0)},
              str(path))
    return path, up @ down / 2


def _ia3(folder: Path) -> tuple[Path, torch.Tensor]:
    """An IA3 module on the outputs; A1111's `network_ia3`: change = W * w per output row."""
    w = torch.randn(32, generator=_generator(2)) * 0.3
    path = folder / "ia3.safetensors"
    save_file({f"{KEY}.weight": w, f"{KEY}.on_input": torch.tensor(False)}, str(path))
    return path, w


def _oft(folder: Path) -> tuple[Path, torch.Tensor]:
    """A kohya-style OFT module (no clamp: alpha 0); A1111's `network_oft`: W' = Rᵀ W per block of outputs."""
    blocks = torch.randn(4, 8, 8, generator=_generator(3)) * 0.1
    path = folder / "oft.safetensors"
    save_file({f"{KEY}.oft_blocks": blocks, f"{KEY}.alpha": torch.tensor(0.0)}, str(path))
    q = blocks - blocks.transpose(1, 2)
    eye = torch.eye(8)
    return path, torch.block_diag(*((eye + q) @ torch.linalg.inv(eye - q)))


def _dora(folder: Path) -> tuple[Path, torch.Tensor, torch.Tensor]:
    """A rank-2 LoRA with a per-input `dora_scale` [1, 32] (A1111's `apply_weight_decompose` layout)."""
    generator = _generator(4)
    down, up = torch.randn(2, 32, generator=generator) * 0.1, torch.randn(32, 2, generator=generator) * 0.1
    magnitude = 1 + torch.rand(1, 32, generator=generator)
    path = folder / "dora.safetensors"
    save_file({f"{KEY}.lora_down.weight": down, f"{KEY}.lora_up.weight": up, f"{KEY}.alpha": torch.tensor(2.0),
               f"{KEY}.dora_scale": magnitude}, str(path))
    return path, up @ down, magnitude


def _apply(model, requests, mode="merge") -> torch.Tensor:
    handle = apply_loras(model.unet, model.text_encoders, requests, mode=mode)
    weight = _weight(model)
    handle.remove()
    return weight


def _close(ours: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-6)


def test_ia3_after_a_lora_rescales_the_loras_change_too(tmp_path, sd1):
    plain, delta = _plain(tmp_path)
    ia3, w = _ia3(tmp_path)
    w0 = _weight(sd1)
    after_plain = w0 + 0.7 * delta
    expected = after_plain + 0.5 * after_plain * w.reshape(-1, 1)
    _close(_apply(sd1, [LoraRequest(plain, unet_weight=0.7), LoraRequest(ia3, unet_weight=0.5)]), expected)
    # The other order: IA3 on the original weight, then the LoRA's change unscaled.
    reverse = w0 + 0.5 * w0 * w.reshape(-1, 1) + 0.7 * delta
    _close(_apply(sd1, [LoraRequest(ia3, unet_weight=0.5), LoraRequest(plain, unet_weight=0.7)]), reverse)
    assert (expected - reverse).abs().max() > 1e-3  # the two orders really differ


def test_oft_after_a_lora_rotates_the_loras_change(tmp_path, sd1):
    plain, delta = _plain(tmp_path)
    oft, rotation = _oft(tmp_path)
    running = _weight(sd1) + delta
    expected = running + 0.8 * (rotation.t() @ running - running)  # A1111: finalize_updown scales R^T W - W
    _close(_apply(sd1, [LoraRequest(plain), LoraRequest(oft, unet_weight=0.8)]), expected)


def test_dora_after_a_lora_normalises_the_running_weight(tmp_path, sd1):
    plain, delta = _plain(tmp_path)
    dora, dora_delta, magnitude = _dora(tmp_path)
    running = _weight(sd1) + 0.6 * delta
    merged = running + dora_delta  # alpha 2 / rank 2: scale 1
    norm = merged.norm(dim=0, keepdim=True)  # A1111 `apply_weight_decompose`: per input column
    expected = running + 0.9 * (merged * (magnitude / norm) - running)
    _close(_apply(sd1, [LoraRequest(plain, unet_weight=0.6), LoraRequest(dora, unet_weight=0.9)]), expected)


def test_an_ia3_file_named_twice_is_applied_twice(tmp_path, sd1):
    # A1111 keeps both mentions in `loaded_networks` and applies each in turn: W (1 + s1 w)(1 + s2 w).
    ia3, w = _ia3(tmp_path)
    w0 = _weight(sd1)
    expected = w0 * (1 + 0.5 * w.reshape(-1, 1)) * (1 + 0.25 * w.reshape(-1, 1))
    _close(_apply(sd1, [LoraRequest(ia3, unet_weight=0.5), LoraRequest(ia3, unet_weight=0.25)]), expected)


def test_a_lora_mentioned_around_an_ia3_is_not_folded_across_it(tmp_path, sd1):
    plain, delta = _plain(tmp_path)
    ia3, w = _ia3(tmp_path)
    running = _weight(sd1) + 0.4 * delta
    expected = running * (1 + 0.5 * w.reshape(-1, 1)) + 0.3 * delta
    requests = [LoraRequest(plain, unet_weight=0.4), LoraRequest(ia3, unet_weight=0.5),
                LoraRequest(plain, unet_weight=0.3)]
    _close(_apply(sd1, requests), expected)


@pytest.mark.parametrize("second", ["ia3", "oft"])
def test_runtime_mode_stacks_like_merge_mode(tmp_path, sd1, second):
    plain, _ = _plain(tmp_path)
    other = (_ia3 if second == "ia3" else _oft)(tmp_path)[0]
    requests = [LoraRequest(plain), LoraRequest(other, unet_weight=0.7)]
    before = snapshot(sd1)
    handle = apply_loras(sd1.unet, sd1.text_encoders, requests, mode="merge")
    merged = run_model(sd1)
    handle.remove()
    handle = apply_loras(sd1.unet, sd1.text_encoders, requests, mode="runtime")
    runtime = run_model(sd1)
    handle.remove()
    assert_bit_identical(sd1, before)
    for ours, reference in zip(runtime, merged):
        assert relative_error(ours, reference) < 1e-5
