"""IP-Adapter with ControlNet units in one call, and IP-Adapter guidance windows (sd-webui-controlnet's
guidance_start/end), on the tiny SD 1.x model with tiny adapters in h94's layout."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter

from .ip_adapter_helpers import SMALL, pixels, reference


def box() -> Image.Image:
    image = Image.new("RGB", (64, 64), "black")
    ImageDraw.Draw(image).rectangle((16, 16, 48, 48), outline="white", width=3)
    return image


@pytest.fixture(scope="module")
def both_pipe(sd1_pipe):
    from pipelines.ip_adapter_controlnet import ControlNetIPAdapterTextToImage

    return ControlNetIPAdapterTextToImage.from_pipeline(sd1_pipe)


def unit(controlnet, weight=1.0):
    from pipelines.controlnet import ControlNetUnit

    return ControlNetUnit(controlnet, box(), weight=weight, resize_mode="just resize")


def test_units_and_adapter_together_equal_each_alone_when_the_other_is_off(both_pipe, controlnet, adapter_file):
    """The mixins compose: with the adapter at scale 0 the call is the ControlNet pipeline's image, with the unit at
    weight 0 the IP-Adapter pipeline's, and with both on the image differs from either."""
    from pipelines.controlnet import ControlNetTextToImage
    from pipelines.ip_adapter import IPAdapterTextToImage

    adapter = dict(ip_adapter=str(adapter_file), ip_adapter_image=reference(0))
    control_only = pixels(ControlNetTextToImage.from_pipeline(both_pipe)(**SMALL, controlnets=[unit(controlnet)]))
    adapter_only = pixels(IPAdapterTextToImage.from_pipeline(both_pipe)(**SMALL, **adapter, ip_adapter_scale=0.8))
    both = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)], **adapter, ip_adapter_scale=0.8))
    adapter_off = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)], **adapter, ip_adapter_scale=0.0))
    unit_off = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet, 0.0)], **adapter, ip_adapter_scale=0.8))
    # adapters all at scale 0 are not attached
    assert np.array_equal(adapter_off, control_only)
    assert np.array_equal(unit_off, adapter_only)
    assert np.abs(both - control_only).mean() > 2 and np.abs(both - adapter_only).mean() > 2


def test_both_are_recorded_and_the_pipe_is_left_as_found(both_pipe, controlnet, adapter_file):
    unet = both_pipe.model.unet
    processors = dict(unet.attn_processors)
    result = both_pipe(**SMALL, controlnets=[unit(controlnet)], ip_adapter=str(adapter_file),
                       ip_adapter_image=reference(0), ip_adapter_scale=0.5)
    infotext = result.infotexts[0]
    assert 'IP-Adapter: "ip-adapter_tiny: 0.5"' in infotext and "ControlNet 0:" in infotext
    assert unet.encoder_hid_proj is None and unet.config.encoder_hid_dim_type is None
    assert all(unet.attn_processors[name] is processors[name] for name in processors)


def test_an_adapter_failing_its_check_leaves_the_pipe_and_runs_nothing(both_pipe, controlnet, tmp_path):
    other = save_tiny_ip_adapter(tmp_path / "models", both_pipe.model.unet, cross_dim=48)  # another family
    processors = dict(both_pipe.model.unet.attn_processors)
    with pytest.raises(ValueError, match="cross-attention width 48"):
        both_pipe(**SMALL, controlnets=[unit(controlnet)], ip_adapter=str(other), ip_adapter_image=reference(0))
    assert dict(both_pipe.model.unet.attn_processors) == processors


# -- guidance windows ------------------------------------------------------------------------------------------


def with_window(pipe, adapter_file, window, scale=1.0):
    return pixels(pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_scale=scale,
                       ip_adapter_guidance=window))


def test_full_window_is_the_default_and_an_empty_one_is_no_adapter(ip_pipe, adapter_file):
    full = with_window(ip_pipe, adapter_file, None)
    assert np.array_equal(with_window(ip_pipe, adapter_file, (0.0, 1.0)), full)
    plain = pixels(ip_pipe(**SMALL))
    off = with_window(ip_pipe, adapter_file, (0.0, 1.0), scale=0.0)
    # a window no step falls in (4 steps: fractions 0, .25, .5, .75) is scale 0 at every step
    assert np.array_equal(with_window(ip_pipe, adapter_file, (0.8, 0.9)), off)
    assert np.abs(off - plain).max() <= 1


def test_a_partial_window_sets_the_scale_per_step(ip_pipe, adapter_file, monkeypatch):
    """Steps 0 and 1 of 4 (fractions 0 and .25) lie in (0, 0.3): the processors' scale is 1 there, 0 after."""
    import pipelines.ip_adapter_layers as layers

    seen = []
    original = layers.windowed_scales

    def recording(unet, scales, windows, total):
        inner = original(unet, scales, windows, total)
        processors = [p for p in unet.attn_processors.values() if hasattr(p, "to_k_ip")]

        def scales_at(step):
            inner(step)
            seen.append((step, processors[0].scale))

        return scales_at

    monkeypatch.setattr(layers, "windowed_scales", recording)
    early = with_window(ip_pipe, adapter_file, (0.0, 0.3))
    assert [scale for _, scale in seen] == [[1.0], [1.0], [0.0], [0.0]]
    full = with_window(ip_pipe, adapter_file, None)
    off = with_window(ip_pipe, adapter_file, (0.0, 1.0), scale=0.0)
    late = with_window(ip_pipe, adapter_file, (0.5, 1.0))
    # early steps shape the picture: the early window is near the full one, the late one near no adapter
    assert not np.array_equal(early, full) and not np.array_equal(late, off)
    assert np.abs(early - off).mean() > 2 and np.abs(late - full).mean() > 2


def test_windows_per_adapter_and_bad_windows(ip_pipe, adapter_file):
    from pipelines.ip_adapter_inputs import check_ip_adapter_guidance

    assert check_ip_adapter_guidance(None, 2) == ((0.0, 1.0), (0.0, 1.0))
    assert check_ip_adapter_guidance((0.2, 0.6), 2) == ((0.2, 0.6), (0.2, 0.6))
    assert check_ip_adapter_guidance([(0, 0.5), [0.5, 1]], 2) == ((0.0, 0.5), (0.5, 1.0))
    for bad, fragment in [((0.6, 0.2), "0 <= start <= end <= 1"), ((0, 1.5), "0 <= start <= end <= 1"),
                          ([(0, 1)] * 3, "list of 2 pairs"), ("early", "list of 2 pairs")]:
        with pytest.raises(ValueError, match=fragment):
            check_ip_adapter_guidance(bad, 2)
    processors = dict(ip_pipe.model.unet.attn_processors)
    with pytest.raises(ValueError, match="ip_adapter_guidance window"):
        ip_pipe(**SMALL, ip_adapter=str(adapter_file), ip_adapter_image=reference(0), ip_adapter_guidance=(0.9, 0.1))
    with pytest.raises(ValueError, match="ip_adapter_guidance was given without ip_adapter"):
        ip_pipe(**SMALL, ip_adapter_guidance=(0.0, 0.5))
    assert dict(ip_pipe.model.unet.attn_processors) == processors


def test_masks_and_embeds_reach_the_unet_beside_the_units(both_pipe, controlnet, adapter_file):
    """ControlNet's residuals and the adapter's masks and precomputed embeddings travel in one UNet call."""
    adapter = dict(ip_adapter=str(adapter_file), ip_adapter_image_embeds=both_pipe.encode_ip_adapter_image(
        reference(0), ip_adapter=str(adapter_file)))
    control_only = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)]))
    masked_out = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)], **adapter,
                                  ip_adapter_mask=Image.new("L", (64, 64), 0)))
    with_image = pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)], ip_adapter=str(adapter_file),
                                  ip_adapter_image=reference(0)))
    assert np.abs(masked_out - control_only).max() <= 1
    assert np.array_equal(pixels(both_pipe(**SMALL, controlnets=[unit(controlnet)], **adapter)), with_image)
