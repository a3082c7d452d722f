"""`pipelines.ip_adapter_reuse.ReferenceEmbeddings`: a run of many generations (a batch over a folder, X/Y/Z cells)
encodes each reference picture once, and every generation gives exactly the picture its own encoding would."""

from __future__ import annotations

import numpy as np
import pytest

from .ip_adapter_helpers import SMALL, pixels, reference


@pytest.fixture
def encoder_calls(monkeypatch):
    """Every run of an adapter's image encoder, as (adapter name, number of pictures)."""
    import pipelines.ip_adapter_embeds as embeds

    calls, real = [], embeds.encode_ip_images

    def counted(adapter, images):
        calls.append((adapter.name, len(images)))
        return real(adapter, images)

    monkeypatch.setattr(embeds, "encode_ip_images", counted)
    return calls


def params(adapter, picture, **extra):
    from pipelines.ip_adapter import IPAdapterTxt2ImgParams

    adapter = [str(item) for item in adapter] if isinstance(adapter, list) else str(adapter)
    return IPAdapterTxt2ImgParams(**{**SMALL, **extra}, ip_adapter=adapter, ip_adapter_image=picture,
                                  ip_adapter_scale=0.8)


def test_many_generations_encode_once_and_match_their_own_encoding(ip_pipe, adapter_file, encoder_calls):
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    expected = [pixels(ip_pipe(params(adapter_file, reference(0), seed=seed))) for seed in (1, 2, 3)]
    encoder_calls.clear()
    reuse = ReferenceEmbeddings()
    results = []
    for seed in (1, 2, 3):
        # a fresh picture object each time, as a batch reads its files again: same pixels, one encoding
        reused = reuse.params_with_embeds(ip_pipe, params(adapter_file, reference(0), seed=seed))
        assert reused.ip_adapter_image is None and len(reused.ip_adapter_image_embeds) == 1
        results.append(pixels(ip_pipe(reused)))
    assert encoder_calls == [("ip-adapter_tiny", 1)] and reuse.encoder_runs == 1
    assert all(np.array_equal(got, want) for got, want in zip(results, expected))


def test_other_pictures_are_encoded_each_once(ip_pipe, adapter_file, second_adapter, encoder_calls):
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    reuse = ReferenceEmbeddings()
    for picture in (reference(0), reference(1), reference(0), reference(1)):
        reuse.params_with_embeds(ip_pipe, params(adapter_file, picture))
    both = reuse.params_with_embeds(ip_pipe, params([adapter_file, second_adapter], [reference(0), reference(0)]))
    # the second adapter's encoder is its own: the same picture is encoded for it once more
    assert encoder_calls == [("ip-adapter_tiny", 1), ("ip-adapter_tiny", 1), ("ip-adapter_other", 1)]
    assert both.ip_adapter_image_embeds[0] is reuse.params_with_embeds(
        ip_pipe, params(adapter_file, reference(0))).ip_adapter_image_embeds[0]


def test_a_plain_pipeline_is_given_an_encoder_on_its_model(sd1_pipe, ip_pipe, adapter_file, encoder_calls):
    """A server's X/Y/Z plot runs a plain or hires-fix pipeline: the embeddings are made on its model."""
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    reused = ReferenceEmbeddings().params_with_embeds(sd1_pipe, params(adapter_file, reference(2)))
    direct = ip_pipe.encode_ip_adapter_image(reference(2), ip_adapter=str(adapter_file))
    assert np.array_equal(reused.ip_adapter_image_embeds[0].numpy(), direct[0].numpy())


def test_a_mask_stays_with_its_pictures_embeddings(ip_pipe, adapter_file, encoder_calls):
    from PIL import Image

    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    left = Image.new("L", (64, 64), 0)
    left.paste(255, (0, 0, 32, 64))
    masked = params(adapter_file, reference(0), ip_adapter_mask=[[left]])
    expected = pixels(ip_pipe(masked))
    reused = ReferenceEmbeddings().params_with_embeds(ip_pipe, masked)
    assert np.array_equal(pixels(ip_pipe(reused)), expected)


def test_nothing_is_encoded_at_scale_zero_or_without_adapters(ip_pipe, adapter_file, encoder_calls):
    from dataclasses import replace

    from pipelines.ip_adapter_reuse import ReferenceEmbeddings
    from pipelines.params import Txt2ImgParams

    reuse = ReferenceEmbeddings()
    off = replace(params(adapter_file, reference(0)), ip_adapter_scale=0.0)
    plain = Txt2ImgParams(**SMALL)
    assert reuse.params_with_embeds(ip_pipe, off) is off and reuse.params_with_embeds(ip_pipe, plain) is plain
    assert encoder_calls == []


def test_bad_fields_are_refused_before_any_encoding(ip_pipe, adapter_file, encoder_calls):
    from dataclasses import replace

    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    too_strong = replace(params(adapter_file, reference(0)), ip_adapter_scale=3.0)
    with pytest.raises(ValueError, match=r"ip_adapter_scale must be a number in \[0, 2\]"):
        ReferenceEmbeddings().params_with_embeds(ip_pipe, too_strong)
    assert encoder_calls == []


def test_a_hires_fix_job_reuses_the_encoding_in_both_passes(sd1_pipe, adapter_file, encoder_calls):
    """A server's hires-fix X/Y/Z plot hands a `HiresFix` over a plain pipeline: the embeddings are made on its model
    and both passes of every generation use them."""
    from pipelines.hires import HiresFix
    from pipelines.ip_adapter_hires import IPAdapterHiresParams
    from pipelines.ip_adapter_reuse import ReferenceEmbeddings

    hires = HiresFix(sd1_pipe)
    given = IPAdapterHiresParams(**{**SMALL, "steps": 2}, sampler="Euler", hr_scale=2.0, hr_upscaler="Latent",
                                 denoising_strength=0.6, ip_adapter=str(adapter_file), ip_adapter_image=reference(0),
                                 ip_adapter_scale=0.8)
    expected = pixels(hires(given))
    encoder_calls.clear()
    reuse = ReferenceEmbeddings()
    for _ in range(2):
        assert np.array_equal(pixels(hires(reuse.params_with_embeds(hires, given))), expected)
    assert encoder_calls == [("ip-adapter_tiny", 1)]


def test_the_least_recently_used_encodings_are_dropped_first(ip_pipe, adapter_file, encoder_calls, monkeypatch):
    """A batch whose unit takes every input's own picture would otherwise keep one encoding per input; the run's
    shared reference, used by every generation, stays."""
    import pipelines.ip_adapter_reuse as reuse_module

    monkeypatch.setattr(reuse_module, "MAX_KEPT_ENCODINGS", 2)
    reuse = reuse_module.ReferenceEmbeddings()
    for seed in (0, 1, 0, 2, 0, 1):  # 0 used throughout; 1 dropped when 2 came in
        reuse.params_with_embeds(ip_pipe, params(adapter_file, reference(seed)))
    assert reuse.encoder_runs == 4 and len(encoder_calls) == 4
