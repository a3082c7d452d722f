"""Clip skip on SDXL is A1111 1.10's: no effect on either encoder, unless "Clip skip SDXL" (`sdxl_clip_l_skip`)
is on, which moves CLIP-L alone to `hidden_states[-clip_skip]` (sd_hijack_clip.FrozenCLIPEmbedderForSDXLWithCustomWords;
CLIP-G is always "penultimate" in sd_hijack_open_clip)."""

import numpy as np
import pytest
import torch

from mixkit.prompts import PromptEncoder

PROMPT = "a photo of a cat, (red:1.2)"


def _encoder(sdxl_pipe, **kwargs):
    return PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                         [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True, emphasis="None", **kwargs)


def _hidden_states(text_encoder, tokenizer, text):
    ids = tokenizer(text, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    with torch.no_grad():
        return text_encoder(ids, output_hidden_states=True).hidden_states


@pytest.mark.parametrize("clip_skip", [2, 3])
def test_sdxl_clip_skip_changes_nothing(sdxl_pipe, clip_skip):
    default = _encoder(sdxl_pipe).encode(PROMPT)
    skipped = _encoder(sdxl_pipe, clip_skip=clip_skip).encode(PROMPT)
    assert torch.equal(skipped.hidden, default.hidden) and torch.equal(skipped.pooled, default.pooled)


def test_sdxl_default_is_both_penultimate_layers_as_diffusers(sdxl_pipe):
    """diffusers' default SDXL encode_prompt (clip_skip=None) reads both encoders' hidden_states[-2]."""
    embeds, _, pooled, _ = sdxl_pipe.encode_prompt("a photo of a cat, red", device="cpu", num_images_per_prompt=1,
                                                   do_classifier_free_guidance=False)
    encoded = _encoder(sdxl_pipe, clip_skip=2).encode("a photo of a cat, red")
    torch.testing.assert_close(encoded.hidden, embeds[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(encoded.pooled, pooled[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("clip_skip", [1, 2, 3])
def test_sdxl_clip_l_skip_moves_clip_l_only(sdxl_pipe, clip_skip):
    text = "a photo of a cat, red"
    encoded = _encoder(sdxl_pipe, clip_skip=clip_skip, sdxl_clip_l_skip=True).encode(text)
    clip_l = _hidden_states(sdxl_pipe.text_encoder, sdxl_pipe.tokenizer, text)[-clip_skip][0]
    clip_g = _hidden_states(sdxl_pipe.text_encoder_2, sdxl_pipe.tokenizer_2, text)[-2][0]
    width = clip_l.shape[-1]
    torch.testing.assert_close(encoded.hidden[:, :width], clip_l, atol=1e-6, rtol=0)
    torch.testing.assert_close(encoded.hidden[:, width:], clip_g, atol=1e-6, rtol=0)
    default = _encoder(sdxl_pipe).encode(text)
    assert torch.equal(encoded.pooled, default.pooled)
    assert torch.equal(encoded.hidden, default.hidden) == (clip_skip == 2)


def test_sdxl_clip_l_skip_changes_nothing_on_sd1(sd1_pipe):
    """As A1111's option says: "Has no effect on SD 1.5 or SD 2.0/2.1"."""
    plain = PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, clip_skip=2)
    flagged = PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, clip_skip=2,
                            sdxl_clip_l_skip=True)
    assert torch.equal(plain.encode(PROMPT).hidden, flagged.encode(PROMPT).hidden)


def test_sdxl_clip_l_skip_must_be_a_bool(sdxl_pipe):
    with pytest.raises(TypeError, match=r"sdxl_clip_l_skip must be True or False .*got 'yes'"):
        _encoder(sdxl_pipe, sdxl_clip_l_skip="yes")


def test_pasted_clip_skip_2_gives_the_clip_skip_1_image_and_stays_in_the_infotext(sdxl_pipe_t2i):
    """A1111 writes "Clip skip: 2" for SDXL whenever the setting is 2 (create_infotext writes it for any model),
    and its image is the "Clip skip: 1" image."""
    kwargs = dict(prompt="a red circle", negative_prompt="ugly", seed=7, width=64, height=64, steps=3)
    one = sdxl_pipe_t2i(**kwargs)
    two = sdxl_pipe_t2i(clip_skip=2, **kwargs)
    assert np.array_equal(np.asarray(one.images[0]), np.asarray(two.images[0]))
    assert "Clip skip: 2" in two.infotexts[0] and "Clip skip" not in one.infotexts[0]


@pytest.fixture(scope="module")
def sdxl_pipe_t2i(tiny_sdxl_dir):
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sdxl_dir)


def test_changed_clip_skip_is_not_answered_from_the_cache(sdxl_pipe):
    """One SDXL encoder reused with another clip skip (or "Clip skip SDXL" turned off) re-encodes a prompt it has
    cached: before, its cache was keyed by text and weights only, so the second call got the first call's layer."""
    reused = _encoder(sdxl_pipe, clip_skip=1, sdxl_clip_l_skip=True)
    first = reused.encode(PROMPT)
    reused.clip_skip = 3
    fresh = _encoder(sdxl_pipe, clip_skip=3, sdxl_clip_l_skip=True).encode(PROMPT)
    again = reused.encode(PROMPT)
    assert not torch.equal(fresh.hidden, first.hidden)  # the layers differ, so a stale answer would show
    assert torch.equal(again.hidden, fresh.hidden)
    reused.sdxl_clip_l_skip = False
    assert torch.equal(reused.encode(PROMPT).hidden, _encoder(sdxl_pipe, clip_skip=3).encode(PROMPT).hidden)
    assert torch.equal(reused.encode_group([PROMPT, "a dog"])[0].hidden,
                       _encoder(sdxl_pipe, clip_skip=3).encode_group([PROMPT, "a dog"])[0].hidden)
