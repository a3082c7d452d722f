"""Training conditions the UNet exactly as inference does: the same layer (clip_skip) and, for long captions
(max_token_length), the same 75-token chunks; checked against mixkit's inference prompt encoder."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.prompts.encoder import PromptEncoder
from mixkit.training.text_conditioning import CaptionEncoding, encode_sd, encode_sdxl, tokenize

SHORT = "a red square"
# About 130 tokens with the tiny byte-level tokenizer (one token a character): two chunks, commas inside.
LONG = ", ".join(f"tag{i} red" for i in range(16))


def _inference(model, text: str, clip_skip: int):
    encoder = PromptEncoder(model.tokenizers, model.text_encoders, is_sdxl=model.family.value == "sdxl",
                            clip_skip=clip_skip, emphasis="None")
    return encoder.encode(text), len(encoder.chunks_for(text))


@pytest.mark.parametrize("clip_skip", [1, 2])
@pytest.mark.parametrize("text", [SHORT, LONG])
def test_sd_training_conditioning_is_the_inference_encoding(sd1_model, clip_skip, text):
    expected, chunks = _inference(sd1_model, text, clip_skip)
    assert chunks == (2 if text is LONG else 1)
    with torch.no_grad():
        got = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [text], "cpu", CaptionEncoding(clip_skip, 225))
    assert torch.equal(got["encoder_hidden_states"][0], expected.hidden)


@pytest.mark.parametrize("clip_skip", [1, 2])  # 2 changes nothing on SDXL, in inference as in training (as A1111, kohya)
def test_sdxl_training_conditioning_is_the_inference_encoding(sdxl_model, clip_skip):
    expected, chunks = _inference(sdxl_model, LONG, clip_skip)
    with torch.no_grad():
        got = encode_sdxl(sdxl_model.text_encoders, sdxl_model.tokenizers, [LONG], "cpu", [(64, 64)], [(0, 0)],
                          (64, 64), CaptionEncoding(clip_skip, 150))
    assert chunks == 2 and got["encoder_hidden_states"].shape[1] == 154
    assert torch.equal(got["encoder_hidden_states"][0], expected.hidden)
    assert torch.equal(got["added_cond_kwargs"]["text_embeds"][0], expected.pooled)


def test_the_default_is_one_truncated_chunk_as_before(sd1_model):
    tokenizer, encoder = sd1_model.tokenizers[0], sd1_model.text_encoders[0]
    ids = tokenizer([SHORT, LONG], padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    with torch.no_grad():
        got = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [SHORT, LONG], "cpu")["encoder_hidden_states"]
        assert torch.equal(got, encoder(ids)[0])


def test_a_batch_pads_shorter_captions_with_empty_chunks(sd1_model):
    ids = tokenize(sd1_model.tokenizers[0], [SHORT, LONG], 225)
    assert ids.shape == (2, 2, 77)
    assert torch.equal(ids[0, 1], tokenize(sd1_model.tokenizers[0], [""])[0, 0])  # BOS, EOS, padding
    with torch.no_grad():
        batch = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [SHORT, LONG], "cpu", CaptionEncoding(1, 225))
        alone = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [SHORT], "cpu", CaptionEncoding(1, 225))
        empty = encode_sd(sd1_model.text_encoders, sd1_model.tokenizers, [""], "cpu")
    hidden = batch["encoder_hidden_states"]
    assert torch.equal(hidden[0, :77], alone["encoder_hidden_states"][0])
    assert torch.equal(hidden[0, 77:], empty["encoder_hidden_states"][0])
    # max_token_length caps the chunks: 150 tokens of a 4-chunk caption keep its first two chunks.
    assert tokenize(sd1_model.tokenizers[0], [LONG + ", " + LONG], 150).shape == (1, 2, 77)


def test_clip_skip_and_max_token_length_are_checked(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.sd_lora_config import SDLoraTrainingConfig
    from mixkit.training.sd_lora_trainer import train_sd_lora

    def config(**overrides):
        return SDLoraTrainingConfig(**{**dict(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                              output=str(tmp_path / "x.safetensors"), resolution=32, max_steps=1),
                                       **overrides})

    with pytest.raises(ValueError, match="max_token_length must be one of 75, 150, 225"):
        config(max_token_length=100).check()
    with pytest.raises(ValueError, match="clip_skip must be an integer in 1..48"):
        config(clip_skip=0).check()
    model = load_diffusion_model(tiny_sd1_dir)
    layers = model.text_encoders[0].config.num_hidden_layers
    modules = {name for name, _ in model.unet.named_modules()}
    with pytest.raises(ValueError, match=f"more than the text encoder's {layers} layers"):
        train_sd_lora(config(clip_skip=layers + 1), model=model)
    assert {name for name, _ in model.unet.named_modules()} == modules  # refused before adapters were attached
    assert not (tmp_path / "x.safetensors").exists()


def test_a_clip_skip_fine_tune_recommends_its_clip_skip_and_generation_uses_it(tiny_sd1_dir, colour_dataset,
                                                                              tmp_path, monkeypatch):
    from mixkit.training import text_conditioning
    from mixkit.training.sd_finetune_config import SDFinetuneConfig
    from mixkit.training.sd_finetune_trainer import train_sd_finetune
    from pipelines.txt2img import TextToImage

    seen, encode = [], text_conditioning.encode_sd

    def spy(text_encoders, tokenizers, captions, device, encoding=CaptionEncoding()):
        seen.append(encoding)
        return encode(text_encoders, tokenizers, captions, device, encoding)

    monkeypatch.setattr("mixkit.training.denoising_loop.encode_sd", spy)
    config = SDFinetuneConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / "skip2"),
                              resolution=32, batch_size=2, max_steps=2, use_ema=False, clip_skip=2,
                              max_token_length=150)
    result = train_sd_finetune(config)
    assert seen and set(seen) == {CaptionEncoding(2, 150)}
    assert json.loads((result.output / "mixkit_generation.json").read_text()) == {"clip_skip": 2}
    pipe = TextToImage.from_pretrained(result.output)
    generated = pipe(prompt="a red square", seed=1, width=32, height=32, steps=2)
    assert "Clip skip: 2" in generated.infotexts[0]
    assert "Clip skip" not in pipe(prompt="a red square", seed=1, width=32, height=32, steps=2,
                                   clip_skip=1).infotexts[0]  # A1111 writes it only when not 1
    plain = train_sd_finetune(SDFinetuneConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                               output=str(tmp_path / "plain"), resolution=32, batch_size=2,
                                               max_steps=1, use_ema=False))
    assert not (plain.output / "mixkit_generation.json").exists()
