"""File layouts round 2: kohya's own OFT (`oft_unet_`), ComfyUI-saved LoRAs, fp8 files and PEFT's `lora_bias`.

Expected weights are restated from each writer's own definition (cited per test), never read back from mixkit.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.errors import CheckpointFormatError
from mixkit.lora import LoraRequest, apply_loras, load_lora
from tests.mixkit.lora.conftest import assert_bit_identical, relative_error, run_model, snapshot

TO_Q = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q"  # Linear(32, 32) of the tiny UNet
TO_Q_LDM = "input_blocks.1.1.transformer_blocks.0.attn1.to_q"  # the same module in LDM/SGM numbering
CONV1 = "down_blocks.0.resnets.0.conv1"  # Conv2d 3x3
CONV1_LDM = "input_blocks.1.0.in_layers.2"


def _module(root: torch.nn.Module, path: str) -> torch.nn.Module:
    """A module by path, with or without CLIPTextModel's `text_model.` level (transformers 5 dropped it)."""
    modules = dict(root.named_modules())
    return modules.get(path) or modules[path.removeprefix("text_model.")]


def _weights(root: torch.nn.Module, path: str) -> torch.Tensor:
    return _module(root, path).weight.detach().clone()


# --- kohya OFT -------------------------------------------------------------------------------------------------

def _kohya_oft_rotation(blocks: torch.Tensor, constraint: float, multiplier: float) -> torch.Tensor:
    """kohya sd-scripts `networks/oft.py` `OFTModule.get_weight`: Q = B - Bᵀ, ‖Q‖ clamped to the constraint,
    R = (I + Q)(I - Q)⁻¹ per block, blended with I by the multiplier, as one block-diagonal matrix."""
    q = blocks - blocks.transpose(1, 2)
    norm = torch.norm(q.flatten())
    q = q * ((torch.clamp(norm, max=constraint) + 1e-8) / (norm + 1e-8))
    eye = torch.eye(blocks.shape[-1]).unsqueeze(0).repeat(blocks.shape[0], 1, 1)
    rotation = torch.matmul(eye + q, (eye - q).inverse())
    return torch.block_diag(*(multiplier * rotation + (1 - multiplier) * eye))


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_a_kohya_oft_file_is_applied_as_kohya_rotates_the_output(tmp_path, sd1, mode):
    # kohya's OFT forward is `org_forward(x) @ R`: the weight becomes Rᵀ W. A1111 (`load_network`: "kohya_ss OFT
    # module", `oft_unet` -> `diffusion_model`) merges that into the weight and leaves the bias alone.
    generator = torch.Generator().manual_seed(3)
    blocks = torch.randn(4, 8, 8, generator=generator) * 0.05
    alpha = 0.01  # constraint alpha * out_dim = 0.32: the clamp is active for these blocks
    path = tmp_path / "kohya_oft.safetensors"
    key = "oft_unet_" + TO_Q.replace(".", "_")
    save_file({f"{key}.oft_blocks": blocks, f"{key}.alpha": torch.tensor(alpha)}, str(path))
    assert torch.norm((blocks - blocks.transpose(1, 2)).flatten()) > alpha * 32

    original = _weights(sd1.unet, TO_Q)
    x = torch.randn(3, 32, generator=generator)
    with torch.no_grad():
        expected = (x @ original.t()) @ _kohya_oft_rotation(blocks, alpha * 32, 0.6)
    before = snapshot(sd1)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, unet_weight=0.6)], mode=mode)
    with torch.no_grad():
        ours = _module(sd1.unet, TO_Q)(x)
    torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-6)
    handle.remove()
    assert_bit_identical(sd1, before)


# --- ComfyUI ---------------------------------------------------------------------------------------------------

def _comfy_pair(generator, out_features: int, in_shape: tuple[int, ...], rank: int = 2):
    down = torch.randn(rank, *in_shape, generator=generator) * 0.1
    up = torch.randn(out_features, rank, *([1] * (len(in_shape) - 1)), generator=generator) * 0.1
    return down, up


def test_a_comfyui_saved_lora_targets_ldm_unet_paths_and_clip_l(tmp_path, sd1):
    # ComfyUI's LoraSave (`comfy_extras/nodes_lora_extract.py`) writes `<state-dict key>.lora_up/down.weight` with no
    # alpha; its loader (`model_lora_keys_unet` / `_clip`, the "generic lora format") maps `diffusion_model.<LDM>`
    # and `text_encoders.clip_l.transformer.<HF path>` back, and uses scale 1 when alpha is absent.
    generator = torch.Generator().manual_seed(5)
    te_path = "text_model.encoder.layers.0.self_attn.q_proj"
    te_module = _module(sd1.text_encoders[0], te_path)
    pairs = {
        f"diffusion_model.{TO_Q_LDM}": _comfy_pair(generator, 32, (32,)),
        f"diffusion_model.{CONV1_LDM}": _comfy_pair(generator, 32, (32, 3, 3)),
        f"text_encoders.clip_l.transformer.{te_path}": _comfy_pair(generator, te_module.out_features,
                                                                   (te_module.in_features,)),
    }
    tensors = {}
    for prefix, (down, up) in pairs.items():
        tensors[f"{prefix}.lora_down.weight"], tensors[f"{prefix}.lora_up.weight"] = down, up
    path = tmp_path / "comfy_lora.safetensors"
    save_file(tensors, str(path))
    assert load_lora(path).format.name == "comfyui"

    def low_rank(prefix):
        down, up = pairs[prefix]
        return (up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1))

    expected = {
        TO_Q: _weights(sd1.unet, TO_Q) + 0.7 * low_rank(f"diffusion_model.{TO_Q_LDM}"),
        CONV1: _weights(sd1.unet, CONV1) + 0.7 * low_rank(f"diffusion_model.{CONV1_LDM}").reshape(32, 32, 3, 3),
    }
    te_change = low_rank(f"text_encoders.clip_l.transformer.{te_path}")
    expected_te = _weights(sd1.text_encoders[0], te_path) + 0.4 * te_change
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path, te_weight=0.4, unet_weight=0.7)])
    for module_path, weight in expected.items():
        torch.testing.assert_close(_weights(sd1.unet, module_path), weight, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(_weights(sd1.text_encoders[0], te_path), expected_te, rtol=1e-6, atol=1e-7)
    handle.remove()


def test_a_comfyui_sdxl_lora_sends_clip_g_to_the_second_text_encoder(tmp_path, sdxl):
    generator = torch.Generator().manual_seed(6)
    te_path = "text_model.encoder.layers.0.self_attn.q_proj"
    module = _module(sdxl.text_encoders[1], te_path)
    down, up = _comfy_pair(generator, module.out_features, (module.in_features,))
    path = tmp_path / "comfy_xl.safetensors"
    save_file({f"text_encoders.clip_g.transformer.{te_path}.lora_down.weight": down,
               f"text_encoders.clip_g.transformer.{te_path}.lora_up.weight": up}, str(path))
    first_before = snapshot(sdxl)
    expected = _weights(sdxl.text_encoders[1], te_path) + up @ down
    handle = apply_loras(sdxl.unet, sdxl.text_encoders, [LoraRequest(path)])
    torch.testing.assert_close(_weights(sdxl.text_encoders[1], te_path), expected, rtol=1e-6, atol=1e-7)
    changed = [k for k, v in snapshot(sdxl).items() if not torch.equal(v, first_before[k])]
    assert changed == [f"te1.{dict((id(m), n) for n, m in sdxl.text_encoders[1].named_modules())[id(module)]}.weight"]
    handle.remove()


def test_a_comfyui_full_checkpoint_is_still_not_taken_for_a_lora(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    save_file({f"diffusion_model.{TO_Q_LDM}.weight": torch.zeros(32, 32),
               "diffusion_model.input_blocks.0.0.bias": torch.zeros(32)}, str(path))
    with pytest.raises(CheckpointFormatError, match="not a LoRA"):
        load_lora(path)


# --- fp8 -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_an_fp8_lora_is_upcast_and_applied(tmp_path, sd1, dtype):
    # ComfyUI saves and loads fp8 LoRAs (its `calculate_weight` upcasts every patch to float32 first).
    generator = torch.Generator().manual_seed(7)
    key = "lora_unet_" + TO_Q.replace(".", "_")
    down, up = (t.to(dtype) for t in _comfy_pair(generator, 32, (32,)))
    path = tmp_path / "fp8.safetensors"
    save_file({f"{key}.lora_down.weight": down, f"{key}.lora_up.weight": up,
               f"{key}.alpha": torch.tensor(1.0).to(dtype)}, str(path))
    expected = _weights(sd1.unet, TO_Q) + (up.float() @ down.float()) * (1.0 / 2)
    handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)])
    torch.testing.assert_close(_weights(sd1.unet, TO_Q), expected, rtol=1e-6, atol=1e-7)
    handle.remove()


def test_an_fp8_lora_holding_nan_is_refused_naming_the_tensor(tmp_path):
    key = "lora_unet_" + TO_Q.replace(".", "_")
    up = torch.zeros(32, 2)
    up[3, 1] = float("nan")
    path = tmp_path / "fp8_nan.safetensors"
    save_file({f"{key}.lora_down.weight": torch.zeros(2, 32).to(torch.float8_e4m3fn),
               f"{key}.lora_up.weight": up.to(torch.float8_e4m3fn)}, str(path))
    with pytest.raises(CheckpointFormatError, match=r"lora_up\.weight'? contains NaN"):
        load_lora(path)


# --- PEFT lora_bias --------------------------------------------------------------------------------------------

def test_a_peft_lora_with_lora_bias_matches_peft(tmp_path, sd1):
    # PEFT's `lora_bias=True` gives lora_B a bias; its forward adds lora_B(lora_A(x)) * scaling, its merge adds
    # `lora_B.bias * scaling` to the base bias (peft `Linear.merge`); diffusers loads `lora_B.bias` keys (>= 0.32).
    from diffusers import StableDiffusionPipeline
    from peft import LoraConfig
    from peft.utils import get_peft_model_state_dict

    wrapped = sd1.copy()
    torch.manual_seed(11)
    wrapped.unet.add_adapter(LoraConfig(r=4, lora_alpha=8, target_modules=["to_out.0", "proj_in"], lora_bias=True,
                                        init_lora_weights=False))
    with torch.no_grad():
        for name, parameter in wrapped.unet.named_parameters():
            if "lora_B" in name and name.endswith(".bias"):
                parameter.copy_(torch.randn_like(parameter) * 0.1)
    layers = get_peft_model_state_dict(wrapped.unet)
    assert any(k.endswith("lora_B.bias") for k in layers)
    StableDiffusionPipeline.save_lora_weights(tmp_path, unet_lora_layers=layers,
                                              unet_lora_adapter_metadata=wrapped.unet.peft_config["default"].to_dict())
    path = tmp_path / "pytorch_lora_weights.safetensors"
    before = snapshot(sd1)
    reference = run_model(wrapped)[0]
    for mode in ("merge", "runtime"):
        handle = apply_loras(sd1.unet, sd1.text_encoders, [LoraRequest(path)], mode=mode)
        assert relative_error(run_model(sd1)[0], reference) < 1e-5, mode
        handle.remove()
        assert_bit_identical(sd1, before)
