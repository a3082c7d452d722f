"""backend='openvino' on a whole DiffusionModel: every part converted, refusals before any change."""

import pytest
import torch

pytest.importorskip("openvino", reason="openvino not installed: pip install 'mixkit[openvino]'")

from mixkit.runtime import PRESETS, apply_runtime, check_backend_supports  # noqa: E402
from mixkit.runtime.openvino_text import OpenVinoTextEncoder  # noqa: E402
from mixkit.runtime.openvino_unet import OpenVinoUNet  # noqa: E402
from mixkit.runtime.openvino_vae import OpenVinoVae  # noqa: E402


@pytest.fixture(scope="module")
def converted(tiny_sd1_dir, ov_cache):
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model(tiny_sd1_dir)
    torch_parts = (model.unet, model.vae, list(model.text_encoders))
    report = apply_runtime(model, PRESETS.get("exact"), backend="openvino", cache_dir=ov_cache)
    return model, torch_parts, report


def test_unet_vae_and_text_encoders_are_replaced(converted):
    model, (unet, vae, encoders), report = converted
    # the torch UNet is only needed to convert: the stand-in does not keep its weights alive
    assert isinstance(model.unet, OpenVinoUNet) and model.unet.torch_module is None
    assert isinstance(model.vae, OpenVinoVae) and model.vae.torch_module is vae
    assert [type(e) for e in model.text_encoders] == [OpenVinoTextEncoder]
    assert model.text_encoders[0].torch_module is encoders[0]
    assert model.extras["execution_backend"] == "openvino"
    assert any(f"model hash {model.model_hash}" in step for step in report.applied)
    # the pipelines' own reads keep working on the stand-ins
    assert model.vae_scale_factor == 2 ** (len(vae.config.block_out_channels) - 1)
    assert model.vae.config.latent_channels == 4 and model.dtype == torch.float32


def test_converted_unet_matches_torch(converted, unet_inputs):
    model, (unet, _, _), _ = converted
    sample, t, context = unet_inputs
    with torch.no_grad():
        expected = unet(sample, t, context).sample
    torch.testing.assert_close(model.unet(sample, t, context).sample, expected, rtol=1e-4, atol=1e-4)


def test_lora_merges_into_converted_parts_are_refused(converted):
    from mixkit.lora import apply_loras

    model, _, _ = converted
    with pytest.raises(TypeError, match="unet must be a torch.nn.Module.*OpenVinoUNet"):
        apply_loras(model.unet, model.text_encoders, [])


@pytest.mark.parametrize("option", ["vae_tiling", "vae_slicing", "attention_slicing", "compile"])
def test_settings_the_graphs_cannot_honour_are_refused(option):
    config = PRESETS.get("exact").with_changes(**{option: True})
    with pytest.raises(ValueError, match=rf"cannot honour \['{option}'\]; drop them or use backend='torch'"):
        check_backend_supports(config, "openvino")
    check_backend_supports(config, "torch")  # the torch backend honours all of them


def test_refusal_happens_before_the_model_changes(tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    model = load_diffusion_model(tiny_sd1_dir)
    before = (model.unet, model.vae, list(model.text_encoders))
    with pytest.raises(ValueError, match="vae_slicing"):
        apply_runtime(model, PRESETS.get("low-memory").with_changes(attention_slicing=False), backend="openvino")
    assert (model.unet, model.vae, list(model.text_encoders)) == before
    assert "execution_backend" not in model.extras


def test_loras_merged_before_conversion_are_recorded(tiny_sd1_dir, ov_cache, tmp_path):
    """A LoRA merged with apply_loras before the conversion is named in the report and in each graph's .json
    (the cache key changes with its strength), and removing a LoRA before converting leaves no record."""
    import json

    from mixkit.lora import LoraRequest, apply_loras
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.runtime.backends import export_identity
    from mixkit.testing.tiny_lora import write_attention_lora

    model = load_diffusion_model(tiny_sd1_dir)
    lora = write_attention_lora(model.unet, tmp_path / "my, style.safetensors", scale=0.2)
    removed = apply_loras(model.unet, model.text_encoders, [LoraRequest(str(lora), 1.0, 0.5)])
    removed.remove()
    assert export_identity(model).loras == ()
    handle = apply_loras(model.unet, model.text_encoders, [LoraRequest(str(lora), 1.0, 0.7)])
    short_hash = handle.loaded[0].lora.short_hash()
    record = f"my style:{short_hash}:1:0.7"
    assert export_identity(model).loras == (record,)
    model.extras["merged_loras"] = ["hand-made:0.5", record]  # a record written by hand is not listed twice
    assert export_identity(model).loras == ("hand-made:0.5", record)

    report = apply_runtime(model, PRESETS.get("exact"), backend="openvino", cache_dir=ov_cache)
    assert any(f"LoRAs ['hand-made:0.5', '{record}']" in step for step in report.applied)
    written = json.loads(model.unet.cache_path.with_suffix(".json").read_text())
    assert written["loras"] == ["hand-made:0.5", record]
