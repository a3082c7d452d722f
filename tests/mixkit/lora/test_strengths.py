"""How the strength scales each family's change: linear as in A1111's `finalize_updown` (DoRA included), with
A1111's own formulas restated in float64 as the oracle for DoRA, OFT, GLoRA and the `.scale` key."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraRequest, apply_loras
from tests.mixkit.lora.conftest import assert_bit_identical, make_peer_lora, snapshot

TARGET = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q"  # a Linear of the tiny SD 1.x UNet
KOHYA = "lora_unet_" + TARGET.replace(".", "_")


def _unet_change(model, path, strength, mode):
    """The float64 change of every UNet weight `path` makes (runtime: read back from the patched forward)."""
    before = snapshot(model)
    handle = apply_loras(model.unet, model.text_encoders, [LoraRequest(path, strength, strength)], mode=mode)
    if mode == "merge":
        after = snapshot(model)
        changes = {k: after[k].double() - before[k].double() for k in before}
    else:  # a Linear's output change on the identity is its weight change (transposed)
        module = model.unet.get_submodule(TARGET)
        eye = torch.eye(module.in_features)
        with torch.no_grad():
            changes = {f"unet.{TARGET}.weight": (module(eye) - torch.nn.functional.linear(eye, module.weight, module.bias)).t().double()}
    handle.remove()
    assert_bit_identical(model, before)
    return changes


def _write(tmp_path, name, tensors):
    path = tmp_path / f"{name}.safetensors"
    save_file({f"{KOHYA}.{k}": v.contiguous() for k, v in tensors.items()}, str(path))
    return path


def _a1111_dora(w0, delta, m, s):
    """A1111 `apply_weight_decompose` + multiplier: s * (W'·m/||W'|| - W0), the norm over all axes but 1."""
    merged = w0 + delta
    norm = merged.norm(dim=0, keepdim=True)
    return s * (merged * (m / norm) - w0)


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_dora_strength_scales_the_whole_change_as_a1111_does(tmp_path, sd1, mode):
    w0 = sd1.unet.get_submodule(TARGET).weight.detach().double()
    g = torch.Generator().manual_seed(5)
    down, up = torch.randn(4, w0.shape[1], generator=g) * 0.1, torch.randn(w0.shape[0], 4, generator=g) * 0.1
    m = (w0 + up.double() @ down.double()).norm(dim=0, keepdim=True) * (1 + 0.2 * torch.rand(1, w0.shape[1], generator=g).double())
    path = _write(tmp_path, "dora", {"lora_down.weight": down, "lora_up.weight": up, "alpha": torch.tensor(4.0),
                                     "dora_scale": m.float()})
    delta = up.double() @ down.double()
    full = _unet_change(sd1, path, 1.0, mode)[f"unet.{TARGET}.weight"]
    assert full.abs().max() > 1e-2
    for s in (1.0, 0.5, -1.0):
        change = _unet_change(sd1, path, s, mode)[f"unet.{TARGET}.weight"]
        assert torch.allclose(change, _a1111_dora(w0, delta, m, s), rtol=1e-4, atol=1e-7), s
        assert torch.allclose(change, s * full, rtol=1e-4, atol=1e-7), s
    # Linear, so a strength near 0 is nearly "no LoRA" (within float32 rounding of the merged weights).
    tiny = _unet_change(sd1, path, 1e-6, mode)[f"unet.{TARGET}.weight"]
    assert (tiny - 1e-6 * full).abs().max() < 1e-7


def test_lycoris_dora_at_strength_zero_changes_nothing(tmp_path, sd1):
    path = make_peer_lora(tmp_path, sd1, "lora", seed=21, dora_wd=True).path
    tiny = _unet_change(sd1, path, 1e-6, "merge")
    full = _unet_change(sd1, path, 1.0, "merge")
    assert max(float(change.abs().max()) for change in full.values()) > 1e-2
    for key, change in full.items():
        assert (tiny[key] - change * 1e-6).abs().max() < 1e-7, key


def _a1111_oft(w0, blocks, alpha, rescale, s):
    """A1111 `network_oft.calc_updown` (kohya / LyCORIS `oft_blocks`) and `finalize_updown`, float64."""
    q = blocks - blocks.transpose(1, 2)
    constraint = alpha * w0.shape[0]
    if constraint != 0:
        norm = q.flatten().norm()
        q = q * ((min(norm, constraint) + 1e-8) / (norm + 1e-8))
    eye = torch.eye(blocks.shape[1], dtype=torch.float64)
    r = (eye + q) @ torch.linalg.inv(eye - q)
    merged = torch.einsum("knm,kn...->km...", r, w0.reshape(blocks.shape[0], blocks.shape[1], -1)).reshape(w0.shape)
    if rescale is not None:
        merged = rescale.reshape(-1, 1) * merged
    return s * (merged - w0)


@pytest.mark.parametrize("alpha, rescaled", [(0.0, False), (1e-3, False), (0.0, True)])
@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_oft_matches_a1111_formula(tmp_path, sd1, mode, alpha, rescaled):
    w0 = sd1.unet.get_submodule(TARGET).weight.detach().double()
    g = torch.Generator().manual_seed(6)
    blocks = torch.randn(4, w0.shape[0] // 4, w0.shape[0] // 4, generator=g) * 0.05
    rescale = 1 + 0.1 * torch.randn(w0.shape[0], 1, generator=g) if rescaled else None
    tensors = {"oft_blocks": blocks, "alpha": torch.tensor(alpha), **({"rescale": rescale} if rescaled else {})}
    path = _write(tmp_path, "oft", tensors)
    for s in (1.0, 0.5):
        change = _unet_change(sd1, path, s, mode)[f"unet.{TARGET}.weight"]
        expected = _a1111_oft(w0, blocks.double(), alpha, None if rescale is None else rescale.double(), s)
        assert torch.allclose(change, expected, rtol=1e-4, atol=1e-6), s


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_glora_matches_lycoris_formula(tmp_path, sd1, mode):
    w0 = sd1.unet.get_submodule(TARGET).weight.detach().double()
    out, inp, r = w0.shape[0], w0.shape[1], 4
    g = torch.Generator().manual_seed(7)
    a1, a2 = torch.randn(inp, r, generator=g) * 0.1, torch.randn(r, inp, generator=g) * 0.1
    b1, b2 = torch.randn(out, r, generator=g) * 0.1, torch.randn(r, inp, generator=g) * 0.1
    path = _write(tmp_path, "glora", {"a1.weight": a1, "a2.weight": a2, "b1.weight": b1, "b2.weight": b2,
                                      "alpha": torch.tensor(2.0)})
    expected = (w0 @ a1.double() @ a2.double() + b1.double() @ b2.double()) * (2.0 / r)
    for s in (1.0, -0.5):
        change = _unet_change(sd1, path, s, mode)[f"unet.{TARGET}.weight"]
        assert torch.allclose(change, s * expected, rtol=1e-4, atol=1e-7), s


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_scale_key_replaces_alpha_over_rank(tmp_path, sd1, mode):
    """A1111's `NetworkModule.calc_scale`: a module's `.scale` wins over alpha/rank."""
    w0 = sd1.unet.get_submodule(TARGET).weight.detach()
    g = torch.Generator().manual_seed(8)
    down, up = torch.randn(4, w0.shape[1], generator=g) * 0.1, torch.randn(w0.shape[0], 4, generator=g) * 0.1
    path = _write(tmp_path, "scaled", {"lora_down.weight": down, "lora_up.weight": up, "alpha": torch.tensor(4.0),
                                       "scale": torch.tensor(0.25)})
    change = _unet_change(sd1, path, 0.8, mode)[f"unet.{TARGET}.weight"]
    assert torch.allclose(change, 0.8 * 0.25 * (up.double() @ down.double()), rtol=1e-4, atol=1e-7)
