"""A1111's Create embedding (`mixkit.training.ti_create`): the start vectors taken from the model's token table as
A1111 picks them, the file A1111 writes, and names or files it must refuse without writing anything."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.prompts.embeddings import EmbeddingLibrary
from mixkit.training.ti_create import create_embedding


def token_rows(model, text: str, encoder: int = 0) -> torch.Tensor:
    ids = model.tokenizers[encoder](text, add_special_tokens=False).input_ids
    return model.text_encoders[encoder].get_input_embeddings().weight[ids].detach()


@pytest.mark.parametrize("text, count, picks", [
    ("red", 4, [0, 0, 1, 2]),  # 3 tokens for 4 vectors: i * 3 // 4 (kohya would take 0, 1, 2, 0)
    ("red square", 3, [0, 3, 6]),  # 9 tokens for 3 vectors
    ("red", 1, [0]),
])
def test_vectors_are_the_init_texts_token_rows_spread_as_a1111(sd1_model, tmp_path, text, count, picks):
    rows = token_rows(sd1_model, text)
    path = create_embedding(sd1_model, tmp_path, "zqx", num_vectors_per_token=count, init_text=text,
                            checkpoint_name="tiny")
    data = torch.load(path, weights_only=True)
    assert path == tmp_path / "zqx.pt"
    assert torch.equal(data["string_to_param"]["*"], rows[picks])
    assert (data["name"], data["step"], data["sd_checkpoint_name"]) == ("zqx", 0, "tiny")
    assert EmbeddingLibrary(tmp_path).get("zqx").num_vectors == count


def test_empty_init_text_gives_zero_vectors(sd1_model, tmp_path):
    path = create_embedding(sd1_model, tmp_path, "blank", num_vectors_per_token=2, init_text="")
    data = torch.load(path, weights_only=True)
    assert torch.equal(data["string_to_param"]["*"], torch.zeros(2, 32))


def test_sdxl_writes_both_encoders_vectors(tiny_sdxl_dir, tmp_path):
    model = load_diffusion_model(tiny_sdxl_dir)
    data = torch.load(create_embedding(model, tmp_path, "xl", num_vectors_per_token=2, init_text="red"),
                      weights_only=True)
    assert torch.equal(data["clip_l"], token_rows(model, "red", 0)[[0, 1]])
    assert torch.equal(data["clip_g"], token_rows(model, "red", 1)[[0, 1]])
    assert EmbeddingLibrary(tmp_path).names_for(model.text_encoders, True) == ["xl"]


def test_an_existing_name_is_refused_unless_overwrite_old_which_keeps_its_format(sd1_model, tmp_path):
    (tmp_path / "sub").mkdir()
    save_file({"emb_params": torch.ones(1, 32)}, str(tmp_path / "sub" / "old.safetensors"))
    with pytest.raises(ValueError, match="already exists .*overwrite_old"):
        create_embedding(sd1_model, tmp_path, "old", init_text="red")
    assert torch.equal(load_file(tmp_path / "sub" / "old.safetensors")["emb_params"], torch.ones(1, 32))
    path = create_embedding(sd1_model, tmp_path, "old", init_text="red", overwrite_old=True)
    assert path == tmp_path / "sub" / "old.safetensors" and not (tmp_path / "old.pt").exists()
    assert torch.equal(load_file(path)["emb_params"], token_rows(sd1_model, "red")[[0]])


@pytest.mark.parametrize("kwargs, message", [
    (dict(name="../up"), "holds '/'"),
    (dict(name="a/b"), "holds '/'"),
    (dict(name=".secret"), "must not start with a dot"),
    (dict(name=" pad"), "start or end with a space"),
    (dict(name=""), "non-empty"),
    (dict(name="a" * 201), "is 201 bytes long; use at most 200"),
    (dict(name="é" * 101), "is 202 bytes long; use at most 200"),
    (dict(name="ok", num_vectors_per_token=0), "1..75"),
    (dict(name="ok", num_vectors_per_token=True), "1..75"),
    (dict(name="ok", init_text=None), "init_text must be a string"),
    # the tokenizer's "TextEncodeInput must be Union[...]" was the message
    (dict(name="ok", init_text="cat \ud800"), "init_text contains a lone surrogate"),
])
def test_bad_input_is_refused_and_writes_nothing(sd1_model, tmp_path, kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        create_embedding(sd1_model, tmp_path, **kwargs)
    assert list(tmp_path.rglob("*")) == []
