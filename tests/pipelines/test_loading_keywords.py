"""from_pretrained takes diffusers' loading keywords that mean something here and refuses the rest before loading."""

from __future__ import annotations

import pytest
import torch

from pipelines.txt2img import TextToImage


@pytest.fixture
def no_load(monkeypatch):
    """Any load is a test failure: the keyword checks must come first (was: the whole model loaded, then cls() failed)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the keywords were checked")

    monkeypatch.setattr("mixkit.models.diffusion.loading.load_diffusion_model", refuse)


def test_unknown_keyword_is_refused_before_loading_listing_the_valid_ones(no_load):
    with pytest.raises(TypeError, match=r"TextToImage\.from_pretrained got unexpected keyword argument\(s\) \['foo'\]\. "
                                        r"Valid keywords: dtype, device, vae, unet_dtype, config_dir, torch_dtype, "
                                        r"variant, use_safetensors, local_files_only, revision, limits, embeddings_dir, "
                                        r"lora_dir, hypernetwork_dir, session\."):
        TextToImage.from_pretrained("any/model", foo=1)


@pytest.mark.parametrize("keyword, hint", [
    ("subfolder", "pass the folder that holds model_index.json itself"),
    ("safety_checker", "mixkit loads no safety checker"),
    ("cache_dir", "set HF_HUB_CACHE"),
    ("device_map", "pass device="),
])
def test_diffusers_only_keywords_say_what_to_do(no_load, keyword, hint):
    with pytest.raises(TypeError, match=rf"\['{keyword}'\]; {keyword}: {hint}"):
        TextToImage.from_pretrained("any/model", **{keyword: None})


def test_torch_dtype_is_dtype(tiny_sd1_dir):
    """diffusers' name: was a TypeError from the pipeline's constructor after the whole load."""
    pipe = TextToImage.from_pretrained(tiny_sd1_dir, torch_dtype=torch.float16, use_safetensors=True,
                                       local_files_only=True)
    assert pipe.model.unet.dtype == pipe.model.text_encoders[0].dtype == torch.float16


def test_dtype_and_torch_dtype_together_are_refused(no_load):
    with pytest.raises(ValueError, match=r"dtype=torch\.float32 and torch_dtype=torch\.float16 were both passed"):
        TextToImage.from_pretrained("any/model", dtype=torch.float32, torch_dtype=torch.float16)


def test_variant_reaches_the_loader(tiny_sd1_dir, monkeypatch):
    seen = {}

    def loader(source, **options):
        seen.update(options)
        raise RuntimeError("stop")

    monkeypatch.setattr("mixkit.models.diffusion.loading.load_diffusion_model", loader)
    with pytest.raises(RuntimeError, match="stop"):
        TextToImage.from_pretrained("org/name", variant="fp16", revision="v1", local_files_only=True)
    assert (seen["variant"], seen["revision"], seen["local_files_only"]) == ("fp16", "v1", True)
