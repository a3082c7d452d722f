"""Low-memory loading keeps the weights exactly: every tensor equals the one stored on disk."""

import pytest
import torch
from safetensors.torch import load_file

from mixkit.models.diffusion.loading import load_diffusion_model


def _file_state(folder, part):
    (weights,) = sorted((folder / part).glob("*.safetensors"))
    return load_file(weights)


def _assert_same(module, stored, dtype):
    state = module.state_dict()
    # transformers 5 drops CLIPTextModel's `text_model.` level inside the module, not on disk
    stored = {k.removeprefix("text_model.") if k.removeprefix("text_model.") in state else k: v
              for k, v in stored.items()}
    assert set(stored) <= set(state), sorted(set(stored) - set(state))[:5]
    for key, tensor in stored.items():
        expected = tensor.to(dtype) if tensor.is_floating_point() else tensor
        assert state[key].dtype == expected.dtype, key
        assert torch.equal(state[key], expected), key


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_folder_load_has_exactly_the_stored_weights(tiny_sd1_dir, dtype):
    model = load_diffusion_model(tiny_sd1_dir, dtype=dtype, attention="diffusers")
    for part, module in (("unet", model.unet), ("vae", model.vae), ("text_encoder", model.text_encoders[0])):
        _assert_same(module, _file_state(tiny_sd1_dir, part), dtype)
        assert not any(t.is_meta for t in module.state_dict().values()), part


def test_single_file_load_equals_the_folder_load(tiny_sd1_dir, tmp_path):
    from mixkit.models.diffusion import save_ldm_checkpoint

    folder_model = load_diffusion_model(tiny_sd1_dir, attention="diffusers")
    checkpoint = save_ldm_checkpoint(folder_model, tmp_path / "tiny.safetensors")
    file_model = load_diffusion_model(checkpoint, config_dir=tiny_sd1_dir, attention="diffusers")
    for ours, theirs in ((file_model.unet, folder_model.unet), (file_model.vae, folder_model.vae),
                         (file_model.text_encoders[0], folder_model.text_encoders[0])):
        expected = theirs.state_dict()
        got = ours.state_dict()
        assert set(got) == set(expected)
        for key in expected:
            assert torch.equal(got[key], expected[key]), key


def test_loaded_weights_can_be_changed_in_place_without_touching_the_file(tiny_sd1_dir):
    """Memory-mapped weights are copy-on-write: merging a LoRA in place must not write to disk."""
    before = _file_state(tiny_sd1_dir, "unet")["conv_in.weight"].clone()
    model = load_diffusion_model(tiny_sd1_dir, attention="diffusers")
    with torch.no_grad():
        model.unet.conv_in.weight.add_(1.0)
    assert torch.equal(_file_state(tiny_sd1_dir, "unet")["conv_in.weight"], before)
    again = load_diffusion_model(tiny_sd1_dir, attention="diffusers")
    assert torch.equal(again.unet.conv_in.weight, before)
