"""The SDXL refiner loads as a family of its own: diffusers folder (text_encoder_2 only), single file
(`conditioner.embedders.0.model.*`) and the shipped sd_xl_refiner_1.0 configs; its prompts encode as diffusers'
StableDiffusionXLImg2ImgPipeline encodes them."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.models.diffusion import ModelFamily


@pytest.fixture(scope="module")
def refiner(tiny_sdxl_refiner_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sdxl_refiner_dir)


def test_the_tiny_refiner_folder_is_laid_out_as_diffusers_saves_the_real_one(tiny_sdxl_refiner_dir):
    index = json.loads((tiny_sdxl_refiner_dir / "model_index.json").read_text())
    assert index["_class_name"] == "StableDiffusionXLImg2ImgPipeline"
    assert index["requires_aesthetics_score"] is True
    assert index["text_encoder"] == [None, None] and index["tokenizer"] == [None, None]
    assert not (tiny_sdxl_refiner_dir / "text_encoder").exists()
    unet = json.loads((tiny_sdxl_refiner_dir / "unet" / "config.json").read_text())
    # pooled width (32) + 5 time ids (size, crop, aesthetic score) x 8, as 1280 + 5 x 256 = 2560 for the real one
    assert unet["projection_class_embeddings_input_dim"] == 32 + 5 * 8


def test_a_refiner_folder_loads_as_the_sdxl_refiner_family(refiner):
    from transformers import CLIPTextModelWithProjection

    assert refiner.family is ModelFamily.SDXL_REFINER
    assert refiner.description == "SDXL refiner"
    assert len(refiner.text_encoders) == 1 and len(refiner.tokenizers) == 1
    assert isinstance(refiner.text_encoders[0], CLIPTextModelWithProjection)
    assert refiner.model_hash and len(refiner.model_hash) == 10


def test_family_detection_from_configs():
    from mixkit.models.diffusion.family import detect_family

    text_time = {"addition_embed_type": "text_time"}
    assert detect_family(text_time, has_second_text_encoder=True) is ModelFamily.SDXL
    assert detect_family(text_time, has_second_text_encoder=False) is ModelFamily.SDXL_REFINER
    assert ModelFamily.SDXL_REFINER.uses_pooled_text and not ModelFamily.SD2.uses_pooled_text


def test_prompts_encode_as_diffusers_refiner_pipeline(tiny_sdxl_refiner_dir, refiner):
    from diffusers import StableDiffusionXLImg2ImgPipeline

    from pipelines.generation import ModelSession

    oracle = StableDiffusionXLImg2ImgPipeline.from_pretrained(tiny_sdxl_refiner_dir)
    embeds, _, pooled, _ = oracle.encode_prompt("a small red fox", device="cpu", num_images_per_prompt=1,
                                                do_classifier_free_guidance=False)
    encoded = ModelSession(refiner).encoder(1).encode("a small red fox")
    assert torch.allclose(encoded.hidden, embeds[0], atol=1e-5)
    assert torch.allclose(encoded.pooled, pooled[0], atol=1e-5)


def test_single_file_round_trip(tmp_path, tiny_sdxl_refiner_dir, refiner):
    from mixkit.models.diffusion.detect_keys import SDXL_REFINER_OPEN_CLIP
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.io import load_state_dict

    path = save_ldm_checkpoint(refiner, tmp_path / "tiny_refiner.safetensors")
    keys = set(load_state_dict(path))
    assert SDXL_REFINER_OPEN_CLIP in keys and "conditioner.embedders.0.model.text_projection" in keys
    assert not any(key.startswith("conditioner.embedders.1.") for key in keys)
    loaded = load_diffusion_model(path, config_dir=tiny_sdxl_refiner_dir)
    assert loaded.family is ModelFamily.SDXL_REFINER and loaded.name == "tiny_refiner"
    for ours, theirs in ((loaded.unet, refiner.unet), (loaded.text_encoders[0], refiner.text_encoders[0]),
                         (loaded.vae, refiner.vae)):
        expected = theirs.state_dict()
        assert all(torch.equal(tensor, expected[key]) for key, tensor in ours.state_dict().items())


def test_single_file_refiner_markers():
    from mixkit.errors import CheckpointFormatError
    from mixkit.models.diffusion import detect_keys as d

    unet_in = {d.UNET_IN: (384, 4, 3, 3)}
    assert d.detect_family({**unet_in, d.SDXL_REFINER_OPEN_CLIP: (49408, 1280), d.LABEL_EMB: (1536, 2560)}) \
        is ModelFamily.SDXL_REFINER
    with pytest.raises(CheckpointFormatError, match="refiner's text encoder but no"):
        d.detect_family({**unet_in, d.SDXL_REFINER_OPEN_CLIP: (49408, 1280)})


def test_shipped_refiner_configs_have_sd_xl_refiner_1_0s_shapes():
    """Shapes of stabilityai/sd_xl_refiner_1.0.safetensors (sgm's sd_xl_refiner.yaml: 384 model channels,
    channel_mult [1, 2, 4, 4], transformer depth 4, context 1280, adm_in_channels 2560)."""
    from mixkit.models.diffusion.single_file import _empty_modules
    from mixkit.models.diffusion.single_file_configs import shipped_configs
    from mixkit.models.diffusion.single_file_writer import ldm_state_dict

    configs = shipped_configs(ModelFamily.SDXL_REFINER, "epsilon")
    assert configs.family is ModelFamily.SDXL_REFINER
    unet, vae, encoders = _empty_modules(configs)
    shapes = {key: tuple(t.shape) for key, t in ldm_state_dict(unet, vae, encoders, ModelFamily.SDXL_REFINER).items()}
    assert shapes["model.diffusion_model.input_blocks.0.0.weight"] == (384, 4, 3, 3)
    assert shapes["model.diffusion_model.label_emb.0.0.weight"] == (1536, 2560)
    assert shapes["model.diffusion_model.input_blocks.4.1.transformer_blocks.3.attn2.to_k.weight"] == (768, 1280)
    assert shapes["model.diffusion_model.middle_block.1.transformer_blocks.3.attn2.to_k.weight"] == (1536, 1280)
    assert "model.diffusion_model.input_blocks.1.1.proj_in.weight" not in shapes  # first level: no attention
    assert shapes["conditioner.embedders.0.model.token_embedding.weight"] == (49408, 1280)
    assert shapes["conditioner.embedders.0.model.text_projection"] == (1280, 1280)
    assert max(int(key.split(".")[3]) for key in shapes if key.startswith("model.diffusion_model.output_blocks.")) == 11


def test_broken_refiner_folders_are_refused_naming_what_is_missing(tiny_sdxl_refiner_dir, tiny_sdxl_dir, tmp_path):
    import shutil

    from mixkit.errors import ModelNotFoundError
    from mixkit.models.diffusion.loading import load_diffusion_model

    no_encoder = shutil.copytree(tiny_sdxl_refiner_dir, tmp_path / "no_encoder")
    shutil.rmtree(no_encoder / "text_encoder_2")
    with pytest.raises(ModelNotFoundError, match=r"missing the 'text_encoder' component .*an SDXL refiner has "
                                                 r"text_encoder_2/ instead"):
        load_diffusion_model(no_encoder)
    no_tokenizer = shutil.copytree(tiny_sdxl_refiner_dir, tmp_path / "no_tokenizer")
    shutil.rmtree(no_tokenizer / "tokenizer_2")
    with pytest.raises(ModelNotFoundError, match=r"missing the 'tokenizer_2' component of an SDXL refiner"):
        load_diffusion_model(no_tokenizer)
    half_base = shutil.copytree(tiny_sdxl_dir, tmp_path / "half_base")  # SDXL base without its second encoder
    shutil.rmtree(half_base / "text_encoder_2")
    with pytest.raises(ModelNotFoundError, match=r"text-time UNet with only text_encoder/"):
        load_diffusion_model(half_base)
