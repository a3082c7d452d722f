"""A LoRA whose tensors for a 1x1 Conv are 2-D (Linear-shaped), or 4-D [r, in, 1, 1] for a Linear, applies with the
same numbers, as A1111's `network_lora.create_module` reshapes them to the layer (and ComfyUI reshapes the change);
mixkit used to refuse them. Kernels larger than 1x1 still need 4-D tensors."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraMismatchError, LoraRequest, apply_loras

PROJ_IN = "down_blocks.0.attentions.0.proj_in"  # a 1x1 Conv in SD 1.x (32 -> 32 here)
TO_Q = "down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q"  # a Linear


def _lora(path, down, up):
    tensors = {}
    for name, (d, u) in {PROJ_IN: down, TO_Q: up}.items():
        key = "lora_unet_" + name.replace(".", "_")
        tensors[f"{key}.lora_down.weight"], tensors[f"{key}.lora_up.weight"] = d, u
        tensors[f"{key}.alpha"] = torch.tensor(2.0)
    save_file(tensors, str(path))
    return path


def _factors(seed: int):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(2, 32, generator=generator), torch.randn(32, 2, generator=generator)


def test_pointwise_tensors_in_either_layout_give_the_same_change(tmp_path, sd1):
    down, up = _factors(0)
    q_down, q_up = _factors(1)
    as_written = _lora(tmp_path / "a.safetensors", (down[:, :, None, None], up[:, :, None, None]), (q_down, q_up))
    swapped = _lora(tmp_path / "b.safetensors", (down, up), (q_down[:, :, None, None], q_up[:, :, None, None]))
    changed = {}
    for name, path in (("written", as_written), ("swapped", swapped)):
        model = sd1.copy()
        before = {key: value.clone() for key, value in model.unet.state_dict().items()}
        handle = apply_loras(model.unet, [], [LoraRequest(str(path), 1.0, 1.0)], mode="merge")
        changed[name] = {key: value - before[key] for key, value in model.unet.state_dict().items()
                         if key.startswith((PROJ_IN, TO_Q)) and key.endswith("weight")}
        handle.remove()
    assert set(changed["written"]) == {f"{PROJ_IN}.weight", f"{TO_Q}.weight"}
    for key in changed["written"]:
        assert torch.equal(changed["written"][key], changed["swapped"][key])
    expected = (up @ down).reshape(32, 32, 1, 1)  # alpha 2 / rank 2 = scale 1
    torch.testing.assert_close(changed["swapped"][f"{PROJ_IN}.weight"], expected, rtol=0, atol=1e-6)


def test_runtime_mode_takes_them_too(tmp_path, sd1):
    down, up = _factors(2)
    path = _lora(tmp_path / "c.safetensors", (down, up), _factors(3))
    model = sd1.copy()
    conv = model.unet.get_submodule(PROJ_IN)
    x = torch.randn(1, 32, 4, 4, generator=torch.Generator().manual_seed(4))
    plain = conv(x)
    handle = apply_loras(model.unet, [], [LoraRequest(str(path), 1.0, 1.0)], mode="runtime")
    try:
        patched = conv(x)
    finally:
        handle.remove()
    expected = plain + torch.nn.functional.conv2d(x, (up @ down).reshape(32, 32, 1, 1))
    torch.testing.assert_close(patched, expected, rtol=1e-5, atol=1e-5)


def test_a_linear_lora_on_a_larger_kernel_is_still_refused(tmp_path, sd1):
    conv = next(name for name, module in sd1.unet.named_modules()
                if isinstance(module, torch.nn.Conv2d) and module.kernel_size == (3, 3) and module.in_channels == 32
                and module.out_channels == 32)
    key = "lora_unet_" + conv.replace(".", "_")
    save_file({f"{key}.lora_down.weight": torch.randn(2, 32 * 9), f"{key}.lora_up.weight": torch.randn(32, 2)},
              str(tmp_path / "d.safetensors"))
    with pytest.raises(LoraMismatchError, match=r"2-D \(Linear\) tensor \[2, 288\] for Conv2d"):
        apply_loras(sd1.unet, [], [LoraRequest(str(tmp_path / "d.safetensors"), 1.0, 1.0)], mode="merge")
