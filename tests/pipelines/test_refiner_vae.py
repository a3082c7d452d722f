"""The VAE that decodes a refined image (pipelines/refiner_vae.py): the refiner's, as A1111 decodes with the
checkpoint loaded after the switch, unless a VAE was chosen for every checkpoint (A1111's `sd_vae`).

The refiner here is the tiny SDXL base itself with another VAE (`replace(model, vae=...)`): its UNet and text
encoders are the base model's, so the latents are the base model's to the bit and the image shows which VAE decoded
them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mixkit.models.diffusion.loading import BUILT_IN_VAE, VAE_SETTING_KEY

SMALL = dict(prompt="a red fox", negative_prompt="blurry", width=64, height=64, seed=3, sampler="Euler", steps=4)


@pytest.fixture(scope="module")
def other_vae():
    from mixkit.testing.tiny_models import tiny_vae

    return tiny_vae(seed=7)  # the tiny SDXL pair's VAE is tiny_vae(1)


def _pipe(model):
    from pipelines.txt2img import TextToImage

    return TextToImage(model)


def _pixels(result) -> np.ndarray:
    return np.asarray(result.images[0], dtype=np.int16)


def test_a_refined_image_is_decoded_by_the_refiners_vae(sdxl_model, other_vae):
    refiner = replace(sdxl_model, vae=other_vae, extras={})
    result = _pipe(sdxl_model)(**SMALL, refiner=refiner, refiner_switch_at=0.6)
    decoded_by_other = _pipe(replace(sdxl_model, vae=other_vae))(**SMALL)  # same latents, the refiner's VAE
    assert "Refiner: " in result.infotexts[0]
    assert np.array_equal(_pixels(result), _pixels(decoded_by_other))
    assert np.abs(_pixels(result) - _pixels(_pipe(sdxl_model)(**SMALL))).max() > 0  # not the base VAE's image


def test_a_refiner_sharing_the_base_vae_changes_nothing(sdxl_model):
    refiner = replace(sdxl_model, extras={})  # the same UNet, text encoders and VAE, as another model
    result = _pipe(sdxl_model)(**SMALL, refiner=refiner, refiner_switch_at=0.6)
    assert np.array_equal(_pixels(result), _pixels(_pipe(sdxl_model)(**SMALL)))


def test_a_vae_chosen_for_every_checkpoint_decodes_the_refined_image(sdxl_model, other_vae):
    # A1111's sd_vae set to a file: the refiner checkpoint loads with that VAE too
    chosen = replace(sdxl_model, extras={**sdxl_model.extras, VAE_SETTING_KEY: "chosen.safetensors"})
    refiner = replace(sdxl_model, vae=other_vae, extras={})
    result = _pipe(chosen)(**SMALL, refiner=refiner, refiner_switch_at=0.6)
    assert "Refiner: " in result.infotexts[0]
    assert np.array_equal(_pixels(result), _pixels(_pipe(sdxl_model)(**SMALL)))


def test_the_vae_setting_none_leaves_the_refiner_its_own_vae(sdxl_model, other_vae):
    # A1111's "None" is each checkpoint's built-in VAE: the refiner's own decodes
    builtin = replace(sdxl_model, extras={**sdxl_model.extras, VAE_SETTING_KEY: BUILT_IN_VAE})
    refiner = replace(sdxl_model, vae=other_vae, extras={})
    result = _pipe(builtin)(**SMALL, refiner=refiner, refiner_switch_at=0.6)
    assert np.array_equal(_pixels(result), _pixels(_pipe(replace(sdxl_model, vae=other_vae))(**SMALL)))


def test_an_interrupt_before_the_switch_is_the_base_models_image(sdxl_model, other_vae):
    from pipelines.control import GenerationControl

    def stop_after_one_step(progress):
        if progress.step == 1:
            progress.control.interrupt()

    refiner = replace(sdxl_model, vae=other_vae, extras={})
    stopped = _pipe(sdxl_model)(**SMALL, refiner=refiner, refiner_switch_at=0.6, callback=stop_after_one_step,
                                control=GenerationControl())
    plain = _pipe(sdxl_model)(**SMALL, callback=stop_after_one_step, control=GenerationControl())
    assert stopped.interrupted and plain.interrupted
    assert np.array_equal(_pixels(stopped), _pixels(plain))
    assert stopped.infotexts == plain.infotexts  # no Refiner keys: the refiner never ran (A1111's never switched)


def test_vae_given_at_load_is_recorded_as_chosen_for_every_checkpoint(tiny_sdxl_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    assert VAE_SETTING_KEY not in load_diffusion_model(tiny_sdxl_dir).extras  # "Automatic"
    assert load_diffusion_model(tiny_sdxl_dir, vae=tiny_sdxl_dir / "vae").extras[VAE_SETTING_KEY] == "vae"
    assert load_diffusion_model(tiny_sdxl_dir, vae_near_checkpoint=False).extras[VAE_SETTING_KEY] == BUILT_IN_VAE
