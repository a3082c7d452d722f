"""Precomputed IP-Adapter image embeddings (`ip_adapter_image_embeds`, diffusers' layout) and
`encode_ip_adapter_image`, which computes them so they can be cached."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from .ip_adapter_helpers import SMALL, pixels, reference, unet_as_found


def test_embeds_give_the_same_picture_as_the_images(ip_pipe, adapter_file, plus_adapter_file):
    for file in (adapter_file, plus_adapter_file):
        with_image = ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image=[reference(0), reference(1)],
                             ip_adapter_scale=0.7)
        embeds = ip_pipe.encode_ip_adapter_image([reference(0), reference(1)], ip_adapter=str(file))
        with_embeds = ip_pipe(**SMALL, ip_adapter=str(file), ip_adapter_image_embeds=embeds, ip_adapter_scale=0.7)
        assert np.array_equal(pixels(with_embeds), pixels(with_image))
        assert with_embeds.infotexts[0] == with_image.infotexts[0]


def test_encoded_layout_is_diffusers(ip_pipe, adapter_file, plus_adapter_file):
    """[2, images, projection_dim] (plain) / [2, images, tokens, hidden] (plus), negative first: zeros for a plain
    adapter, a blank picture's hidden states for a plus one; CPU float32, one tensor per adapter."""
    from mixkit.testing.tiny_ip_adapter import PROJECTION_DIM

    plain, plus = ip_pipe.encode_ip_adapter_image([reference(0), [reference(1), reference(2)]],
                                                  ip_adapter=[str(adapter_file), str(plus_adapter_file)])
    assert plain.shape == (2, 1, PROJECTION_DIM) and plus.shape == (2, 2, 17, 32)
    assert plain.dtype == plus.dtype == torch.float32 and plain.device.type == "cpu"
    assert torch.count_nonzero(plain[0]) == 0 and torch.count_nonzero(plain[1]) > 0
    assert torch.count_nonzero(plus[0]) > 0 and torch.equal(plus[0, 0], plus[0, 1])  # one blank picture's states


def test_saved_embeds_need_no_image_encoder(ip_pipe, adapter_file, tmp_path):
    """A cache of embeddings is all a call needs: the adapter's encoder folder may be gone (diffusers'
    `image_encoder_folder=None`)."""
    from safetensors.torch import load_file, save_file

    embeds = ip_pipe.encode_ip_adapter_image(reference(0), ip_adapter=str(adapter_file))
    save_file({"embeds": embeds[0]}, tmp_path / "cat.safetensors")
    expected = pixels(ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0)))
    lone = tmp_path / "lone" / adapter_file.name
    lone.parent.mkdir()
    shutil.copy(adapter_file, lone)  # no image_encoder folder beside it
    cached = [load_file(tmp_path / "cat.safetensors")["embeds"]]
    assert np.array_equal(pixels(ip_pipe(**SMALL, ip_adapter=str(lone), ip_adapter_image_embeds=cached)), expected)
    ip_pipe.load_ip_adapter(str(lone.parent), weight_name=lone.name, image_encoder_folder=None)
    try:
        assert np.array_equal(pixels(ip_pipe(**SMALL, ip_adapter_image_embeds=cached)), expected)
        with pytest.raises(ValueError, match="image_encoder_folder=None"):
            ip_pipe(**SMALL, ip_adapter_image=reference(0))
    finally:
        ip_pipe.unload_ip_adapter()


def test_images_for_one_adapter_and_embeds_for_another(ip_pipe, adapter_file, second_adapter):
    two = [str(adapter_file), str(second_adapter)]
    both_images = pixels(ip_pipe(**SMALL, ip_adapter=two, ip_adapter_image=[reference(0), reference(1)]))
    second = ip_pipe.encode_ip_adapter_image(reference(1), ip_adapter=str(second_adapter))[0]
    mixed = ip_pipe(**SMALL, ip_adapter=two, ip_adapter_image=[reference(0), None],
                    ip_adapter_image_embeds=[None, second])
    assert np.array_equal(pixels(mixed), both_images)


def test_bad_embeds_name_the_shape_and_leave_the_pipe(ip_pipe, adapter_file, plus_adapter_file, second_adapter):
    from mixkit.testing.tiny_ip_adapter import PROJECTION_DIM

    processors = dict(ip_pipe.model.unet.attn_processors)
    good = torch.zeros(2, 1, PROJECTION_DIM)
    one, two = str(adapter_file), [str(adapter_file), str(second_adapter)]
    cases = [
        (dict(ip_adapter=one, ip_adapter_image_embeds=good), TypeError, r"wrap it in a list: \[embeds\]"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=[good, good]), ValueError, "2 entries for 1 IP-Adapters"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=[good[1:]]), ValueError,
         r"shape \(1, 1, 16\); it must be \[2, images, projection_dim\].*negative half first"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=[good[..., :8]]), ValueError,
         r"shape \(2, 1, 8\), but IP-Adapter 'ip-adapter_tiny' \(plain\) reads \[2, images, 16\]"),
        (dict(ip_adapter=str(plus_adapter_file), ip_adapter_image_embeds=[good]), ValueError,
         r"\(plus\) reads \[2, images, tokens, 32\]"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=[good.long()]), ValueError, "finite floating-point"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=[good * float("nan")]), ValueError, "NaN or inf"),
        (dict(ip_adapter=one, ip_adapter_image_embeds=["cat.pt"]), TypeError, "torch tensor or None"),
        (dict(ip_adapter=one, ip_adapter_image=reference(0), ip_adapter_image_embeds=[good]), ValueError,
         "IP-Adapter 0 has both an ip_adapter_image entry and an ip_adapter_image_embeds entry"),
        (dict(ip_adapter=two, ip_adapter_image=[reference(0), None], ip_adapter_image_embeds=[None, None]),
         ValueError, "IP-Adapter 1 has neither"),
        (dict(ip_adapter=two, ip_adapter_image_embeds=[good, None]), ValueError, "IP-Adapter 1 has neither"),
        (dict(ip_adapter_image_embeds=[good]), ValueError, "ip_adapter_image_embeds was given without ip_adapter"),
    ]
    for keywords, error, message in cases:
        with pytest.raises(error, match=message):
            ip_pipe(**SMALL, **keywords)
        unet_as_found(ip_pipe, processors)


def test_encode_needs_adapters(ip_pipe):
    with pytest.raises(ValueError, match="pass ip_adapter= or call load_ip_adapter"):
        ip_pipe.encode_ip_adapter_image(reference(0))
