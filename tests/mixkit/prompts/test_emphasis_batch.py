"""Emphasis "Original" over one prompt's schedule batch, as A1111 v1.10: `prompt_parser.get_learned_conditioning`
encodes a prompt's schedule texts as one batch, and `sd_emphasis.EmphasisOriginal.after_transformers` restores
`z.mean()` of the whole [B, 77, D] batch of each chunk index (shorter texts padded with `empty_chunk()`), so one
ratio serves every text of the schedule. The oracle is a restatement (a1111_prompt_reference)."""

import pytest
import torch

from mixkit.prompts import PromptEncoder, build_conditioning_plan
from tests.mixkit.prompts.a1111_prompt_reference import a1111_original_emphasis_batch


@pytest.fixture(scope="module")
def text_encoder(sd1_pipe):
    """The tiny text encoder with a biased final LayerNorm: its outputs then have a mean far from 0, as real CLIP's do.

    The tiny model's LayerNorm has no bias, so its hidden states average ~1e-8 and the mean ratio is float noise.
    """
    import copy

    encoder = copy.deepcopy(sd1_pipe.text_encoder)
    norm = getattr(encoder, "text_model", encoder).final_layer_norm
    with torch.no_grad():
        norm.bias.copy_(0.5 + 0.1 * torch.randn(norm.bias.shape, generator=torch.Generator().manual_seed(0)))
    return encoder


@pytest.fixture
def sd1_encoder(sd1_pipe, text_encoder):
    return PromptEncoder([sd1_pipe.tokenizer], [text_encoder], is_sdxl=False)


@pytest.fixture
def raw_encoder(sd1_pipe, text_encoder):
    return PromptEncoder([sd1_pipe.tokenizer], [text_encoder], is_sdxl=False, emphasis="Ignore")


@pytest.mark.parametrize("prompt, steps", [
    ("a [(red:1.6) circle:blue square:2]", 4),  # the hunt's case: the un-emphasised text changes too
    ("[(cat:1.3)|dog]", 4),  # alternation: 4 texts, repeats included
    ("[a:(b:1.4):0.5] x", 6),
    ("[" + ", ".join(["(word:1.2)"] * 40) + ":short:2]", 4),  # 2 chunks vs 1: the padding chunk is rescaled too
])
def test_original_emphasis_restores_the_mean_over_the_schedule_batch(sd1_encoder, raw_encoder, prompt, steps):
    plan = build_conditioning_plan(sd1_encoder, [prompt], [""], steps)
    texts = [text for _, text in plan.cond_parts[0][0][0]]
    if prompt.startswith("[(word"):
        assert len(sd1_encoder.chunks_for(texts[0])) > 1 and len(sd1_encoder.chunks_for(texts[1])) == 1
    expected = a1111_original_emphasis_batch(raw_encoder, texts)
    got = torch.stack([sd1_encoder.encode_group(texts)[i].hidden for i in range(len(texts))])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    entries = [index for index, _ in enumerate(texts)]
    by_entry = {index: plan._row_encodings(0)[index].hidden for index in entries}
    for step in range(steps + 1):
        row = plan.at_step(step)
        entry = next(i for i, (end, _) in enumerate(plan.cond_parts[0][0][0]) if step <= end)
        torch.testing.assert_close(row.embeds[0, :row.row_tokens[0]], expected[entry], rtol=1e-5, atol=1e-6)
        assert torch.equal(row.embeds[0, :row.row_tokens[0]], by_entry[entry])


def test_one_text_alone_is_rescaled_on_its_own(sd1_encoder, raw_encoder):
    text = "a (red:1.6) circle"
    torch.testing.assert_close(sd1_encoder.encode(text).hidden, a1111_original_emphasis_batch(raw_encoder, [text])[0],
                               rtol=1e-5, atol=1e-6)


def test_joint_ratio_differs_from_per_text_ratios(sd1_encoder):
    # The un-emphasised "blue square" is no longer its raw encoding once it shares a batch with emphasis.
    alone = sd1_encoder.encode("a blue square").hidden
    together = sd1_encoder.encode_group(["a (red:1.6) circle", "a blue square"])[1].hidden
    assert not torch.equal(alone, together)
    ratio = (together / alone)[alone.abs() > 1e-3]
    torch.testing.assert_close(ratio, torch.full_like(ratio, ratio[0].item()), rtol=1e-4, atol=1e-5)


def test_sdxl_restores_each_encoders_mean_over_the_batch(sdxl_pipe):
    def encoder(mode):
        return PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                             [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True, emphasis=mode)

    original, raw = encoder("Original"), encoder("Ignore")
    texts = ["a (red:1.6) circle", "a blue square"]
    got = torch.stack([item.hidden for item in original.encode_group(texts)])
    z = torch.stack([raw.encode(text).hidden for text in texts])
    widths = [e.config.hidden_size for e in (sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2)]
    weights = torch.tensor([[1.0] + raw.chunks_for(t)[0].weights + [1.0] * (76 - len(raw.chunks_for(t)[0].weights))
                            for t in texts])
    parts, start = [], 0
    for width in widths:  # A1111's SDXL conditioner: each CLIP embedder applies emphasis to its own output
        part = z[..., start:start + width]
        weighted = part * weights[..., None]
        parts.append(weighted * (part.mean() / weighted.mean()))
        start += width
    torch.testing.assert_close(got, torch.cat(parts, dim=-1), rtol=1e-5, atol=1e-6)
