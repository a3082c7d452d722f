"""IP-Adapter Plus (h94's ip-adapter-plus_sd15 / ip-adapter-plus-face_sd15): a Resampler over the image encoder's
penultimate hidden states, from a tiny file in h94's single-file key layout, run end to end on the tiny SD 1.x."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .ip_adapter_helpers import SMALL, pixels, reference, unet_as_found


def test_plus_file_loads_as_a_resampler_and_changes_the_image(ip_pipe, plus_adapter_file):
    from diffusers.models.embeddings import IPAdapterPlusImageProjection

    from mixkit.testing.tiny_ip_adapter import PLUS_TOKENS

    processors = dict(ip_pipe.model.unet.attn_processors)
    seen = []

    def look(progress):  # while sampling: diffusers' resampler reads the image, 16 tokens per image
        projection = ip_pipe.model.unet.encoder_hid_proj.image_projection_layers[0]
        ip_layer = next(p for p in ip_pipe.model.unet.attn_processors.values() if hasattr(p, "to_k_ip"))
        seen.append((type(projection), ip_layer.num_tokens))

    plain = pixels(ip_pipe(**SMALL))
    call = dict(SMALL, ip_adapter=str(plus_adapter_file), ip_adapter_image=reference(0))
    full = ip_pipe(**call, callback=look)
    assert seen[0] == (IPAdapterPlusImageProjection, [PLUS_TOKENS])
    assert np.abs(pixels(full) - plain).mean() > 2
    assert np.array_equal(pixels(ip_pipe(**call, ip_adapter_scale=0.0)), plain)  # not attached at scale 0
    assert np.abs(pixels(ip_pipe(**dict(call, ip_adapter_image=reference(1)))) - pixels(full)).mean() > 1
    assert 'IP-Adapter: "ip-adapter-plus_tiny: 1"' in full.infotexts[0]
    unet_as_found(ip_pipe, processors)


def test_plus_reads_the_penultimate_hidden_states_and_a_blank_image_for_the_negative(ip_pipe, plus_adapter_file):
    """diffusers' `encode_image(output_hidden_states=True)`: hidden_states[-2] of the picture for prompt rows and of
    an all-zero picture for negative rows (a plain adapter's negative is zeros)."""
    from pipelines.ip_adapter_embeds import encode_ip_images
    from pipelines.ip_adapter_files import IPAdapterSource

    adapter = ip_pipe._loaded_ip_adapters([IPAdapterSource.of(str(plus_adapter_file))])[0]
    assert adapter.kind == "plus" and adapter.uses_hidden_states
    calls = []
    forward = adapter.encoder.forward

    def spy(*args, **kwargs):
        calls.append(kwargs.get("output_hidden_states"))
        return forward(*args, **kwargs)

    adapter.encoder.forward = spy
    try:
        embeds = encode_ip_images(adapter, (reference(0).convert("RGB"),))
    finally:
        del adapter.encoder.forward
    assert calls == [True, True]
    pixels_in = adapter.processor(images=[reference(0).convert("RGB")], return_tensors="pt").pixel_values
    with torch.no_grad():
        hidden = adapter.encoder(pixels_in, output_hidden_states=True).hidden_states
        blank = adapter.encoder(torch.zeros_like(pixels_in), output_hidden_states=True).hidden_states
    # 32 px / 8 px patches = 16 patches + the class token, at the encoder's hidden width (32)
    assert embeds.positive.shape == (1, 1, 17, 32)
    assert torch.equal(embeds.positive[0], hidden[-2])
    assert torch.equal(embeds.negative[0], blank[-2])
    assert not torch.equal(hidden[-2], hidden[-1])


def test_plus_and_plain_adapters_together(ip_pipe, adapter_file, plus_adapter_file):
    both = dict(SMALL, ip_adapter=[str(adapter_file), str(plus_adapter_file)],
                ip_adapter_image=[reference(0), reference(1)])
    plain_only = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0),
                                ip_adapter_scale=0.7))
    assert np.abs(pixels(ip_pipe(**both, ip_adapter_scale=[0.7, 0.0])) - plain_only).max() <= 1
    assert np.abs(pixels(ip_pipe(**both, ip_adapter_scale=[0.7, 0.7])) - plain_only).mean() > 1


def test_plus_adapter_with_a_too_narrow_encoder_is_refused(ip_pipe, tmp_path):
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

    file = save_tiny_ip_adapter(tmp_path / "models", ip_pipe.model.unet, name="ip-adapter-plus_x", kind="plus",
                                encoder=False)

    config = CLIPVisionConfig(hidden_size=16, intermediate_size=20, num_hidden_layers=2, num_attention_heads=2,
                              image_size=32, patch_size=8, projection_dim=16)
    CLIPVisionModelWithProjection(config).save_pretrained(tmp_path / "models" / "image_encoder")
    processors = dict(ip_pipe.model.unet.attn_processors)
    with pytest.raises(ValueError, match="reads 32-wide image embeddings but its image encoder gives 16 "
                                         r"\(hidden_size\)"):
        ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0))
    unet_as_found(ip_pipe, processors)


def test_sdxl_plus_adapter(sdxl_pipe, tmp_path):
    """h94's ip-adapter-plus_sdxl_vit-h layout on the tiny SDXL: the resampler writes the SDXL cross-attention width."""
    from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
    from pipelines.ip_adapter import IPAdapterTextToImage

    pipe = IPAdapterTextToImage.from_pipeline(sdxl_pipe)
    file = save_tiny_ip_adapter(tmp_path, pipe.model.unet, name="ip-adapter-plus_sdxl_tiny", kind="plus")
    processors = dict(pipe.model.unet.attn_processors)
    plain = pixels(pipe(**SMALL))
    full = pixels(pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=reference(0)))
    assert np.abs(full - plain).mean() > 1
    unet_as_found(pipe, processors)
