"""Textual-inversion vectors in training: where the token string goes, how the vectors start, and that a caption is
conditioned exactly as generation conditions the same prompt with the saved embedding file."""

from __future__ import annotations

import pytest
import torch

from mixkit.prompts.chunking import PLACEHOLDER_TOKEN
from mixkit.prompts.embeddings import EmbeddingLibrary
from mixkit.prompts.encoder import PromptEncoder
from mixkit.training.text_conditioning import CaptionEncoding, encode_sd, encode_sdxl
from mixkit.training.ti_export import save_embedding
from mixkit.training.ti_vectors import (TextualInversionVectors, expand_token_string, holds_token_string,
                                        initial_vectors, occurrences, vectors_from_file)

BOS, EOS, PAD = 100, 101, 102


def _row(text: list[int], length: int = 77, pad: int = PAD) -> list[int]:
    return [BOS, *text, EOS] + [pad] * (length - len(text) - 2)


def test_occurrences_scan_left_to_right_and_skip_each_match():
    assert occurrences([1, 2, 1, 2, 2, 1], (1, 2)) == [0, 2]
    assert occurrences([1, 1, 1], (1, 1)) == [0]  # a match is consumed, as the prompt chunker consumes a name
    assert occurrences([1], (1, 2)) == []


def test_the_token_string_becomes_as_many_placeholders_as_vectors():
    row, places = expand_token_string(_row([5, 7, 8, 6, 7, 8]), (7, 8), 3, EOS, PAD)
    assert row == _row([5, 0, 0, 0, 6, 0, 0, 0]) and places == [2, 6]
    assert PLACEHOLDER_TOKEN == 0
    row, places = expand_token_string(_row([5, 7, 8, 6]), (7, 8), 1, EOS, PAD)  # two name tokens, one vector
    assert row == _row([5, 0, 6]) and places == [2]
    untouched = _row([5, 6])
    assert expand_token_string(untouched, (7, 8), 3, EOS, PAD) == (untouched, [])
    # SD 1.x pads with EOS itself: the text still ends at the first EOS.
    row, places = expand_token_string(_row([7], pad=EOS), (7,), 2, EOS, EOS)
    assert row == _row([0, 0], pad=EOS) and places == [1]


def test_text_stays_within_a_chunk_and_an_embedding_never_crosses_its_end():
    # 74 text tokens, the name last: 2 vectors would need 75 + 1 tokens, so the embedding goes (as the prompt chunker
    # moves it to the next chunk, which one-chunk training does not have).
    row, places = expand_token_string(_row([5] * 74 + [7]), (7,), 2, EOS, PAD)
    assert row == _row([5] * 74) and places == []
    row, places = expand_token_string(_row([7] + [5] * 74), (7,), 2, EOS, PAD)  # grows past 75: the end is cut
    assert row == _row([0, 0] + [5] * 73) and places == [1]


def test_init_word_vectors_repeat_its_tokens_as_kohya_and_none_gives_zeros(sd1_model):
    tokenizer, encoder = sd1_model.tokenizers[0], sd1_model.text_encoders[0]
    table = encoder.get_input_embeddings().weight
    ids = tokenizer("red", add_special_tokens=False).input_ids
    assert len(ids) == 3  # the tiny tokenizer: one token a character
    [vectors] = initial_vectors([encoder], [tokenizer], 5, "red")
    assert torch.equal(vectors, table[[ids[0], ids[1], ids[2], ids[0], ids[1]]])  # vector i: token i mod 3
    [two] = initial_vectors([encoder], [tokenizer], 2, "red")
    assert torch.equal(two, table[ids[:2]])
    [zeros] = initial_vectors([encoder], [tokenizer], 4, None)
    assert torch.equal(zeros, torch.zeros(4, table.shape[1]))
    with pytest.raises(ValueError, match="init_word ' '"):
        initial_vectors([encoder], [tokenizer], 1, " ")


def test_weights_file_must_fit_the_model_and_the_vector_count(sd1_model, sdxl_model, tmp_path):
    vectors = torch.randn(2, sd1_model.text_encoders[0].get_input_embeddings().embedding_dim)
    path = save_embedding({"emb_params": vectors}, tmp_path / "start.safetensors", metadata={}, name="start", step=0,
                          checkpoint_name="tiny")
    [loaded] = vectors_from_file(path, sd1_model.text_encoders, False, 2)
    assert torch.equal(loaded, vectors)
    with pytest.raises(ValueError, match="holds 2 vectors per token but num_vectors_per_token is 3"):
        vectors_from_file(path, sd1_model.text_encoders, False, 3)
    with pytest.raises(ValueError, match="cannot start this run.*SDXL"):
        vectors_from_file(path, sdxl_model.text_encoders, True, 2)


def _saved_library(vectors: TextualInversionVectors, folder, name: str) -> EmbeddingLibrary:
    save_embedding(vectors.file_tensors(), folder / f"{name}.safetensors", metadata={}, name=name, step=1,
                   checkpoint_name="tiny")
    return EmbeddingLibrary(folder)


def _random_vectors(model, token: str, count: int) -> TextualInversionVectors:
    generator = torch.Generator().manual_seed(7)
    initial = [torch.randn(count, e.get_input_embeddings().embedding_dim, generator=generator)
               for e in model.text_encoders]
    return TextualInversionVectors(model.text_encoders, model.tokenizers, token, initial)


@pytest.mark.parametrize("clip_skip", [1, 2])
@pytest.mark.parametrize("count", [1, 4])
def test_sd_training_conditions_as_generation_with_the_saved_file(sd1_model, tmp_path, clip_skip, count):
    vectors = _random_vectors(sd1_model, "zqx", count)
    library = _saved_library(vectors, tmp_path, "zqx")
    prompts = PromptEncoder(sd1_model.tokenizers, sd1_model.text_encoders, is_sdxl=False, clip_skip=clip_skip,
                            emphasis="None", embeddings=library)
    captions = ["a photo of zqx, red", "zqx and zqx", "a red square"]
    with torch.no_grad():
        plain = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, captions, "cpu", CaptionEncoding(clip_skip))
        vectors.attach()
        try:
            trained = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, captions, "cpu",
                                CaptionEncoding(clip_skip))
            # One caption at a time for the exact comparison: a batch of three may round differently in the last bit.
            alone = [encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [caption], "cpu",
                               CaptionEncoding(clip_skip)) for caption in captions]
        finally:
            vectors.detach()
        after = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, captions, "cpu", CaptionEncoding(clip_skip))
    for caption, encoding in zip(captions, alone):
        assert torch.equal(encoding["encoder_hidden_states"][0], prompts.encode(caption).hidden)
        assert torch.allclose(trained["encoder_hidden_states"][captions.index(caption)],
                              encoding["encoder_hidden_states"][0], atol=1e-6)
    assert set(prompts.encode(captions[0]).embeddings_used) == {"zqx"}
    assert not torch.equal(trained["encoder_hidden_states"][0], plain["encoder_hidden_states"][0])
    assert torch.equal(trained["encoder_hidden_states"][2], plain["encoder_hidden_states"][2])  # no token string
    assert torch.equal(after["encoder_hidden_states"], plain["encoder_hidden_states"])  # detached: the model as it was


def test_sdxl_training_conditions_as_generation_with_the_saved_file(sdxl_model, tmp_path):
    vectors = _random_vectors(sdxl_model, "zqx", 3)
    tensors = vectors.file_tensors()
    assert set(tensors) == {"clip_l", "clip_g"}
    widths = [e.get_input_embeddings().embedding_dim for e in sdxl_model.text_encoders]
    assert [t.shape[1] for t in tensors.values()] == widths
    library = _saved_library(vectors, tmp_path, "zqx")
    prompts = PromptEncoder(sdxl_model.tokenizers, sdxl_model.text_encoders, is_sdxl=True, emphasis="None",
                            embeddings=library)
    caption = "a painting in the style of zqx"
    vectors.attach()
    try:
        with torch.no_grad():
            trained = encode_sdxl(sdxl_model.text_encoders, sdxl_model.tokenizers, [caption], "cpu", [(64, 64)],
                                  [(0, 0)], (64, 64))
    finally:
        vectors.detach()
    encoded = prompts.encode(caption)
    assert torch.equal(trained["encoder_hidden_states"][0], encoded.hidden)
    assert torch.equal(trained["added_cond_kwargs"]["text_embeds"][0], encoded.pooled)


def test_gradients_reach_only_the_vectors(sd1_model):
    vectors = _random_vectors(sd1_model, "zqx", 2).attach()
    try:
        before = {name: p.requires_grad for name, p in sd1_model.text_encoders[0].named_parameters()}
        sd1_model.text_encoders[0].requires_grad_(False)
        hidden = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, ["zqx"], "cpu")["encoder_hidden_states"]
        hidden.square().sum().backward()
    finally:
        vectors.detach()
        for name, p in sd1_model.text_encoders[0].named_parameters():
            p.requires_grad_(before[name])
    assert vectors.vectors[0].grad is not None and vectors.vectors[0].grad.abs().sum() > 0
    assert all(p.grad is None for p in sd1_model.text_encoders[0].parameters())


def test_sdxl_pt_file_holds_clip_l_and_clip_g_as_kohya_writes_it(sdxl_model, tmp_path):
    vectors = _random_vectors(sdxl_model, "zqx", 2)
    path = save_embedding(vectors.file_tensors(), tmp_path / "zqx.pt", metadata={}, name="zqx", step=3,
                          checkpoint_name="tiny")
    assert set(torch.load(path, weights_only=True)) == {"clip_l", "clip_g"}
    library = EmbeddingLibrary(tmp_path)
    assert library.names_for(sdxl_model.text_encoders, True) == ["zqx"]
    loaded = library.get("zqx")
    assert torch.equal(loaded.vectors["clip_g"], vectors.vectors[1].detach())


def test_a_caption_holds_the_token_string_where_training_puts_the_vectors(sd1_model):
    """Tokens, not text: the (byte-level, lower-casing) tokenizer makes "SksDog" the "sksdog" of a caption, "cat" is
    no token run of "concatenate", and a token string past the first 75 tokens is cut off unless max_token_length
    gives the caption a second chunk."""
    [tokenizer] = sd1_model.tokenizers
    captions = ["a photo of sksdog", "concatenate shapes", "a cat", "x" * 80 + " cat", "x" * 72 + " cat"]
    assert holds_token_string(captions[:1], tokenizer, "SksDog", 1) == [True]
    assert holds_token_string(captions[1:], tokenizer, "cat", 1) == [False, True, False, True]
    assert holds_token_string(captions[3:4], tokenizer, "cat", 1, max_token_length=150) == [True]
    # "cat" (3 tokens) ends the chunk at 75: 3 vectors fit there, 5 do not
    assert [holds_token_string(captions[4:], tokenizer, "cat", n) for n in (3, 5)] == [[True], [False]]
