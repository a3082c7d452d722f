"""Pivotal tuning: a LoRA run that also trains its trigger word's input vectors and bundles them in the file."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.word_vectors import TrainedWordVectors, _occurrences


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=3, learning_rate=1e-2, rank=4, alpha=4.0, seed=3, train_word_vectors=["square"],
                    word_vectors_learning_rate=0.05)
    return SDLoraTrainingConfig(**{**settings, **overrides})


def test_occurrences_find_every_run_of_the_word_tokens():
    ids = torch.tensor([[1, 5, 6, 2, 5, 6], [5, 1, 6, 5, 6, 5]])
    assert _occurrences(ids, torch.tensor([5, 6])) == [(0, 1), (0, 4), (1, 3)]
    assert _occurrences(ids[:, :1], torch.tensor([5, 6])) == []


def test_vectors_start_as_the_encoder_own_and_replace_only_the_word(tiny_sd1_dir):
    model = load_diffusion_model(tiny_sd1_dir)
    encoder, tokenizer = model.text_encoders[0], model.tokenizers[0]
    ids = tokenizer(["a red square", "a red circle"], padding="max_length", max_length=77, return_tensors="pt").input_ids
    with torch.no_grad():
        plain = encoder(ids).last_hidden_state
        words = TrainedWordVectors([encoder], [tokenizer], ["square"]).attach()
        assert torch.equal(encoder(ids).last_hidden_state, plain)  # step 0 is the unchanged model
        words.vectors[0].add_(1.0)
        changed = encoder(ids).last_hidden_state
        words.detach()
        assert torch.equal(encoder(ids).last_hidden_state, plain)
    assert not torch.equal(changed[0], plain[0]) and torch.equal(changed[1], plain[1])  # only the row with the word


def test_a_run_bundles_the_trained_vectors_and_leaves_the_base_table_alone(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    from mixkit.lora.lora_file import load_lora

    model = load_diffusion_model(tiny_sd1_dir)
    tokenizer = model.tokenizers[0]
    square_ids = tokenizer("square", add_special_tokens=False).input_ids
    before = model.text_encoders[0].get_input_embeddings().weight[square_ids].detach().clone()
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "sq.safetensors"), model=model)
    tensors = load_file(result.output)
    vectors = tensors["bundle_emb.square.string_to_param.*"]
    assert vectors.shape == before.shape and not torch.allclose(vectors, before)
    # The base model is untouched: its own table still holds the old vectors.
    assert torch.equal(model.text_encoders[0].get_input_embeddings().weight[square_ids], before)
    lora = load_lora(result.output)
    # What generation reads (tests/pipelines: a bundled word acts as an embeddings-folder file) is what was saved.
    assert lora.unclaimed_keys == [] and torch.equal(lora.embeddings["square"].vectors[""], vectors)


def test_sdxl_runs_save_vectors_for_both_encoders(tiny_sdxl_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    result = train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, tmp_path / "xl.safetensors", max_steps=1,
                                   batch_size=2))
    keys = {k for k in load_file(result.output) if k.startswith("bundle_emb.")}
    assert keys == {"bundle_emb.square.clip_l", "bundle_emb.square.clip_g"}


@pytest.mark.parametrize("words, message", [
    (["sq.uare"], "cannot contain '.'"),
    (["square", "square"], "lists a word twice"),
    ([" square"], "without surrounding spaces"),
    ("square", "must be a list"),
])
def test_bad_words_fail_before_loading_anything(tmp_path, words, message):
    with pytest.raises(ValueError, match=message):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "o.safetensors", train_word_vectors=words))


def test_a_word_the_tokenizer_drops_is_named(tiny_sd1_dir):
    from types import SimpleNamespace

    model = load_diffusion_model(tiny_sd1_dir)
    dropping = lambda text, add_special_tokens=True: SimpleNamespace(input_ids=[])  # noqa: E731  e.g. a filtered word
    with pytest.raises(ValueError, match="no tokens"):
        TrainedWordVectors(model.text_encoders, [dropping], ["square"])
