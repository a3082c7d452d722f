"""The prompt language inside the sampling loop: schedules switch at the right steps, AND parts
reach the UNet as extra rows, embeddings are used and recorded."""

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from .unet_spy import recorded_unet_contexts

SMALL = dict(width=64, height=64, steps=4, seed=9, sampler="Euler")


def test_prompt_editing_switches_inside_the_loop_at_a1111_steps(sd1_pipe):
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(prompt="[cat:dog:2]", negative_prompt="", **SMALL)
    encoder = sd1_pipe.session.encoder(1)
    cat, dog = encoder.encode("cat").hidden, encoder.encode("dog").hidden
    # rows: the prompt's AND parts first, then the negative prompt (A1111's order)
    used = ["cat" if torch.equal(ctx[0], cat) else "dog" if torch.equal(ctx[0], dog) else "?" for ctx in seen]
    assert used == ["cat", "cat", "cat", "dog"]  # A1111: [a:b:2] shows "a" through 0-based step 2


@pytest.mark.parametrize("sampler, expected", [
    # A1111 builds second-order samplers' schedules over steps x 2 and counts model calls: Heun's
    # 6 steps are 11 calls, [cat:dog:0.5] ends at call int(0.5 * 12) = 6.
    ("Heun", ["cat"] * 7 + ["dog"] * 4),
    ("DPM2", ["cat"] * 7 + ["dog"] * 4),
    ("Euler", ["cat"] * 4 + ["dog"] * 2),
])
def test_schedules_count_model_calls_for_second_order_samplers(sd1_pipe, sampler, expected):
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(prompt="[cat:dog:0.5]", negative_prompt="", width=64, height=64, steps=6, seed=9, sampler=sampler)
    encoder = sd1_pipe.session.encoder(1)
    cat, dog = encoder.encode("cat").hidden, encoder.encode("dog").hidden
    assert ["cat" if torch.equal(ctx[0], cat) else "dog" if torch.equal(ctx[0], dog) else "?" for ctx in seen] == expected


def test_a_long_prompt_and_a_short_negative_run_at_their_own_lengths(sd1_pipe):
    # A1111's default (no "Pad prompt/negative prompt"): one UNet call per length, nothing padded.
    long_prompt = "a red circle, " * 12
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(prompt=long_prompt, negative_prompt="blurry", **SMALL)
    encoder = sd1_pipe.session.encoder(1)
    assert [tuple(ctx.shape[:2]) for ctx in seen] == [(1, 154), (1, 77)] * SMALL["steps"]
    torch.testing.assert_close(seen[0][0], encoder.encode(long_prompt).hidden, rtol=0, atol=0)
    torch.testing.assert_close(seen[1][0], encoder.encode("blurry").hidden, rtol=0, atol=0)


def test_alternation_follows_a1111_steps(sd1_pipe):
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(prompt="[cat|dog]", **SMALL)
    encoder = sd1_pipe.session.encoder(1)
    cat = encoder.encode("cat").hidden
    # A1111 schedules [cat|dog] as ends 1,2,3,4 and its 0-based sampler step picks the first end >= step,
    # so the first option is shown twice before alternating: cat, cat, dog, cat.
    assert [torch.equal(ctx[0], cat) for ctx in seen] == [True, True, False, True]


def test_and_parts_are_separate_rows_combined_in_cfg(sd1_pipe):
    with recorded_unet_contexts(sd1_pipe) as seen:
        both = sd1_pipe(prompt="a cat AND a dog:0.5", **SMALL)
    assert all(ctx.shape[0] == 3 for ctx in seen)  # two AND parts + one negative row
    single = sd1_pipe(prompt="a cat", **SMALL)
    assert not np.array_equal(np.asarray(both.images[0]), np.asarray(single.images[0]))


def test_a_300_token_prompt_is_encoded_in_four_chunks(sd1_pipe):
    with recorded_unet_contexts(sd1_pipe) as seen:
        sd1_pipe(prompt="x" * 300, **{**SMALL, "steps": 1})  # the tiny tokenizer has one token per character
    assert seen[0].shape[1] == 4 * 77


def test_textual_inversion_from_the_embeddings_folder(sd1_pipe, tmp_path):
    from pipelines.txt2img import TextToImage

    torch.manual_seed(0)
    save_file({"emb_params": torch.randn(2, 32)}, str(tmp_path / "shinystyle.safetensors"))
    pipe = TextToImage(sd1_pipe.model, embeddings_dir=tmp_path)
    plain = pipe(prompt="a cat", **SMALL)
    styled = pipe(prompt="a cat, shinystyle", **SMALL)
    assert "TI hashes: \"shinystyle: " in styled.infotexts[0]
    assert "TI hashes" not in plain.infotexts[0]
    literal = sd1_pipe(prompt="a cat, shinystyle", **SMALL)  # without the folder it is plain text
    assert not np.array_equal(np.asarray(styled.images[0]), np.asarray(literal.images[0]))


def test_an_embedding_of_another_family_is_plain_text_in_a_generation(sdxl_pipe, tmp_path):
    from pipelines.txt2img import TextToImage

    save_file({"emb_params": torch.randn(1, 32)}, str(tmp_path / "sd1only.safetensors"))  # an SD1 file on SDXL
    with_folder = TextToImage(sdxl_pipe.model, embeddings_dir=tmp_path)(prompt="a sd1only cat", **SMALL)
    without = TextToImage(sdxl_pipe.model)(prompt="a sd1only cat", **SMALL)
    assert np.array_equal(np.asarray(with_folder.images[0]), np.asarray(without.images[0]))
    assert "TI hashes" not in with_folder.infotexts[0]


def test_clip_skip_changes_the_conditioning_and_is_recorded(sd1_pipe):
    skip1 = sd1_pipe(prompt="a cat", **SMALL)
    skip2 = sd1_pipe(prompt="a cat", clip_skip=2, **SMALL)
    assert not np.array_equal(np.asarray(skip1.images[0]), np.asarray(skip2.images[0]))
    assert "Clip skip: 2" in skip2.infotexts[0] and "Clip skip" not in skip1.infotexts[0]
