"""Marker keys and channel counts that decide how a single file is sampled: `ztsnr` and SD 2.x inpainting.

References: ComfyUI supported_models.SDXL.model_type (`elif "v_pred" in state_dict:
sampling_settings["zsnr"] = "ztsnr" in state_dict`) and SD20.model_type (the 0.09 v-prediction statistic
only `if self.unet_config["in_channels"] == 4`, "SD2.0 inpainting models are not v prediction"); A1111
sd_models_config.guess_model_config_from_state_dict returns the epsilon SD 2 inpainting config for a
9-channel UNet before it runs is_using_v_parameterization_for_sd2.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mixkit.io import load_state_dict
from mixkit.models.diffusion.detect_keys import SD2_V_PROBE_KEY, UNET_IN, guess_prediction_type, zero_snr_schedule
from mixkit.models.diffusion.family import ModelFamily
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.models.diffusion.single_file import _choose_configs
from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint

MARKER = torch.tensor([])
WIDE = torch.tensor([-0.2, 0.2, -0.2, 0.2])  # population std exactly 0.2 > ComfyUI's 0.09


pytestmark = pytest.mark.usefixtures("hash_cache_in_tmp")


@pytest.fixture
def no_metadata(tmp_path):
    from mixkit.io import save_safetensors

    path = tmp_path / "plain.safetensors"
    save_safetensors({"x": torch.zeros(1)}, path)
    return path


@pytest.mark.parametrize("family", [ModelFamily.SDXL, ModelFamily.SD2, ModelFamily.SD1])
def test_ztsnr_marker_next_to_v_pred_gives_the_zero_snr_schedule(family, no_metadata):
    configs, prediction, reason = _choose_configs({"v_pred": MARKER, "ztsnr": MARKER}, family, None, None, no_metadata)
    assert prediction == "v_prediction"
    assert configs.scheduler["rescale_betas_zero_snr"] is True
    assert configs.scheduler["timestep_spacing"] == "trailing"
    assert "'ztsnr' marker" in reason


def test_v_pred_alone_keeps_the_normal_schedule(no_metadata):
    configs, _, _ = _choose_configs({"v_pred": MARKER}, ModelFamily.SDXL, None, None, no_metadata)
    assert not configs.scheduler.get("rescale_betas_zero_snr")
    assert configs.scheduler["timestep_spacing"] == "leading"


def test_ztsnr_without_v_prediction_is_ignored_as_comfyui_does(no_metadata):
    assert zero_snr_schedule({"ztsnr": MARKER}, "epsilon") == {}
    configs, prediction, _ = _choose_configs({"ztsnr": MARKER}, ModelFamily.SDXL, None, None, no_metadata)
    assert prediction == "epsilon" and not configs.scheduler.get("rescale_betas_zero_snr")
    # an explicit v-prediction choice on a ztsnr file takes the file's schedule too
    configs, _, _ = _choose_configs({"ztsnr": MARKER}, ModelFamily.SDXL, None, "v_prediction", no_metadata)
    assert configs.scheduler["rescale_betas_zero_snr"] is True


def test_export_writes_ztsnr_for_a_zero_snr_model_and_it_reads_back(tiny_sd2v_dir, tmp_path):
    model = load_diffusion_model(tiny_sd2v_dir)
    plain = save_ldm_checkpoint(model, tmp_path / "v.safetensors")
    assert {"v_pred", "ztsnr"} & set(load_state_dict(plain)) == {"v_pred"}

    zero_snr = dataclasses.replace(model, scheduler_config={**model.scheduler_config, "rescale_betas_zero_snr": True,
                                                            "timestep_spacing": "trailing"})
    file = save_ldm_checkpoint(zero_snr, tmp_path / "zs.safetensors")
    state = load_state_dict(file)
    assert {"v_pred", "ztsnr"} <= set(state)
    configs, prediction, _ = _choose_configs(state, ModelFamily.SD2, None, None, file)
    assert prediction == "v_prediction"
    assert (configs.scheduler["rescale_betas_zero_snr"], configs.scheduler["timestep_spacing"]) == (True, "trailing")


def test_sd2_inpainting_unet_is_epsilon_whatever_the_statistic():
    inpainting = {UNET_IN: torch.zeros(320, 9, 3, 3), SD2_V_PROBE_KEY: WIDE}
    prediction, reason = guess_prediction_type(inpainting, ModelFamily.SD2)
    assert prediction == "epsilon" and "inpainting" in reason
    # the 4-channel rule is unchanged, and a v_pred marker still wins on an inpainting file
    assert guess_prediction_type({UNET_IN: torch.zeros(320, 4, 3, 3), SD2_V_PROBE_KEY: WIDE}, ModelFamily.SD2)[0] == (
        "v_prediction")
    assert guess_prediction_type({**inpainting, "v_pred": MARKER}, ModelFamily.SD2)[0] == "v_prediction"


def test_sd2_inpainting_file_gets_the_epsilon_shipped_config(no_metadata):
    inpainting = {UNET_IN: torch.zeros(320, 9, 3, 3), SD2_V_PROBE_KEY: WIDE}
    configs, prediction, _ = _choose_configs(inpainting, ModelFamily.SD2, None, None, no_metadata)
    assert (configs.source, prediction) == ("sd21-512", "epsilon")


def test_description_names_an_inpainting_model():
    from types import SimpleNamespace

    from mixkit.models.diffusion.components import DiffusionModel

    def model(in_channels, prediction):
        unet = SimpleNamespace(config=SimpleNamespace(in_channels=in_channels))
        return DiffusionModel(unet, None, [], [], {"prediction_type": prediction}, ModelFamily.SD2, "m", "m")

    assert model(9, "epsilon").description == "SD 2.x inpainting"
    assert model(4, "v_prediction").description == "SD 2.x (v-prediction)"
