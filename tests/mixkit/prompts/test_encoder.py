"""Prompt encoding on tiny CLIP models; diffusers' encode_prompt is the oracle for plain prompts."""

import pytest
import torch

from mixkit.errors import UnknownNameError
from mixkit.prompts import PromptEncoder

PROMPT = "a photo of a cat, red"


def test_sd1_plain_prompt_equals_diffusers(sd1_pipe, sd1_encoder):
    expected, _ = sd1_pipe.encode_prompt(PROMPT, "cpu", 1, False)
    encoded = sd1_encoder.encode(PROMPT)
    assert encoded.hidden.shape == (77, 32) and encoded.pooled is None
    torch.testing.assert_close(encoded.hidden, expected[0], atol=1e-6, rtol=0)


def test_sdxl_plain_prompt_equals_diffusers(sdxl_pipe, sdxl_encoder):
    embeds, _, pooled, _ = sdxl_pipe.encode_prompt(PROMPT, device="cpu", num_images_per_prompt=1,
                                                   do_classifier_free_guidance=False)
    encoded = sdxl_encoder.encode(PROMPT)
    assert encoded.hidden.shape == (77, 64) and encoded.pooled.shape == (32,)
    torch.testing.assert_close(encoded.hidden, embeds[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(encoded.pooled, pooled[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("clip_skip", [2, 3, 5])
def test_sd1_clip_skip_uses_earlier_layer_with_final_norm(sd1_pipe, clip_skip):
    encoder = PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, clip_skip=clip_skip)
    ids = sd1_pipe.tokenizer(PROMPT, padding="max_length", max_length=77, return_tensors="pt").input_ids
    with torch.no_grad():
        states = sd1_pipe.text_encoder(ids, output_hidden_states=True).hidden_states
        expected = sd1_pipe.text_encoder.final_layer_norm(states[-clip_skip])[0]
    torch.testing.assert_close(encoder.encode(PROMPT).hidden, expected, atol=1e-6, rtol=0)
    assert not torch.allclose(expected, PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder],
                                                      is_sdxl=False).encode(PROMPT).hidden)


@pytest.mark.parametrize("clip_skip", [0, 6, 1.5, True])
def test_clip_skip_range_is_validated(sd1_pipe, clip_skip):
    with pytest.raises(ValueError, match=r"clip_skip must be an int in 1\.\.5"):
        PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, clip_skip=clip_skip)


def test_unknown_emphasis_lists_valid_names(sd1_pipe):
    with pytest.raises(UnknownNameError, match="'Original', 'No norm', 'Ignore', 'None'"):
        PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False, emphasis="Orginal")


def test_weight_one_everywhere_equals_plain(sd1_encoder, sdxl_encoder):
    for encoder in (sd1_encoder, sdxl_encoder):
        torch.testing.assert_close(encoder.encode("(a photo:1.0) of (a cat:1), red").hidden,
                                   encoder.encode(PROMPT).hidden, atol=0, rtol=0)


@pytest.fixture
def biased_sd1_encoder(sd1_pipe):
    """SD1 encoder whose final layer norm has a non-zero bias, so chunk means are not ~0."""
    from mixkit.testing.tiny_models import tiny_text_encoder

    text_encoder = tiny_text_encoder(7)
    with torch.no_grad():
        text_encoder.final_layer_norm.bias.copy_(torch.linspace(-0.5, 1.0, 32))
    return lambda emphasis: PromptEncoder([sd1_pipe.tokenizer], [text_encoder], is_sdxl=False, emphasis=emphasis)


def test_original_emphasis_multiplies_then_restores_the_mean(biased_sd1_encoder):
    plain = biased_sd1_encoder("Original").encode("cat dog").hidden
    weighted = biased_sd1_encoder("Original").encode("(cat:1.5) dog").hidden
    no_norm = biased_sd1_encoder("No norm").encode("(cat:1.5) dog").hidden
    weights = torch.ones(77, 1)
    weights[1:4] = 1.5  # BOS, then c, a, t</w>
    torch.testing.assert_close(no_norm, plain * weights, atol=1e-6, rtol=0)
    expected = plain * weights * (plain.mean() / (plain * weights).mean())
    torch.testing.assert_close(weighted, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(weighted.mean(), plain.mean(), atol=1e-6, rtol=0)
    assert not torch.allclose(weighted, plain)


def test_emphasis_none_and_ignore(biased_sd1_encoder):
    literal = biased_sd1_encoder("None").encode("(cat) dog").hidden
    ignore = biased_sd1_encoder("Ignore").encode("(cat) dog").hidden
    torch.testing.assert_close(ignore, biased_sd1_encoder("Original").encode("cat dog").hidden, atol=0, rtol=0)
    assert not torch.allclose(literal, ignore)  # brackets were tokenized as text


def test_300_tokens_give_4_chunks(sd1_encoder):
    assert sd1_encoder.encode("a" * 300).hidden.shape == (4 * 77, 32)
    assert sd1_encoder.encode("a" * 301).hidden.shape == (5 * 77, 32)


def test_break_starts_a_new_chunk(sd1_encoder, sdxl_encoder):
    for encoder in (sd1_encoder, sdxl_encoder):
        both = encoder.encode("a cat BREAK a dog")
        assert both.hidden.shape[0] == 154
        torch.testing.assert_close(both.hidden[:77], encoder.encode("a cat").hidden, atol=0, rtol=0)
        torch.testing.assert_close(both.hidden[77:], encoder.encode("a dog").hidden, atol=0, rtol=0)
    torch.testing.assert_close(sdxl_encoder.encode("a cat BREAK a dog").pooled, sdxl_encoder.encode("a cat").pooled)


def test_long_prompt_chunks_are_encoded_independently(sd1_encoder):
    text = "b" * 75 + " " + "c" * 10
    encoded = sd1_encoder.encode(text).hidden
    # Chunks share one batched text-encoder call; a batch of two may round the last bit differently from a
    # batch of one on some CPUs (AMD EPYC: 2.4e-7), which says nothing about chunks seeing each other.
    torch.testing.assert_close(encoded[:77], sd1_encoder.encode("b" * 75).hidden, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(encoded[77:], sd1_encoder.encode("c" * 10).hidden, atol=1e-6, rtol=1e-5)


def test_cache_returns_the_same_object_until_weights_change(sd1_pipe):
    from mixkit.testing.tiny_models import tiny_text_encoder

    text_encoder = tiny_text_encoder(3)
    encoder = PromptEncoder([sd1_pipe.tokenizer], [text_encoder], is_sdxl=False)
    first = encoder.encode(PROMPT)
    assert encoder.encode(PROMPT) is first
    with torch.no_grad():
        text_encoder.final_layer_norm.bias.add_(0.5)  # in place, like a merged LoRA
    second = encoder.encode(PROMPT)
    assert second is not first and not torch.allclose(second.hidden, first.hidden)


@pytest.mark.parametrize("prompt", ["(a:-1) cat", "(a:0) cat", "(a:1e9) cat", "(a:nan) cat", "[" * 60 + "a"])
def test_odd_weights_stay_finite(biased_sd1_encoder, prompt):
    assert torch.isfinite(biased_sd1_encoder("Original").encode(prompt).hidden).all()


def test_overflowing_weight_is_a_clear_error(sd1_encoder):
    with pytest.raises(ValueError, match="not a finite number"):
        sd1_encoder.encode("(a:" + "9" * 400 + ")")


def test_bad_text_is_refused_before_tokenizing(sd1_encoder):
    with pytest.raises(ValueError, match="limit is 32,768"):
        sd1_encoder.encode("a" * 1_048_576)
    with pytest.raises(ValueError, match="NUL"):
        sd1_encoder.encode("a\x00")
