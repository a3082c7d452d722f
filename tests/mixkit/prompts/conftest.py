"""Tiny SD1/SDXL pipelines (loaded once per session) and prompt encoders built on them."""

import pytest


@pytest.fixture(scope="session")
def sd1_pipe(tiny_sd1_dir):
    from diffusers import StableDiffusionPipeline

    return StableDiffusionPipeline.from_pretrained(tiny_sd1_dir)


@pytest.fixture(scope="session")
def sdxl_pipe(tiny_sdxl_dir):
    from diffusers import StableDiffusionXLPipeline

    return StableDiffusionXLPipeline.from_pretrained(tiny_sdxl_dir)


@pytest.fixture
def sd1_encoder(sd1_pipe):
    from mixkit.prompts import PromptEncoder

    return PromptEncoder([sd1_pipe.tokenizer], [sd1_pipe.text_encoder], is_sdxl=False)


@pytest.fixture
def sdxl_encoder(sdxl_pipe):
    from mixkit.prompts import PromptEncoder

    return PromptEncoder([sdxl_pipe.tokenizer, sdxl_pipe.tokenizer_2],
                         [sdxl_pipe.text_encoder, sdxl_pipe.text_encoder_2], is_sdxl=True)
