"""A1111's Settings > Sampler parameters: eta for ancestral samplers and DDIM, and ENSD, from Settings,
override_settings or the request, in that order."""

from __future__ import annotations

import pytest

from pipelines.approx.hypertile_settings import HYPERTILE_OPTION_DEFAULTS
from pipelines.sampler_parameters import SamplerParameters
from webui.options import SAMPLER_OPTION_DEFAULTS, ServerOptions, sampler_option_params

from .test_api_a1111_parity import server  # noqa: F401  (the module's server fixture, reused)
from .ui_blocks import handler


# Settings > Face restoration's values a generation takes (A1111's defaults); `face_restoration` itself is what a request
# leaving `restore_faces` out gets, read by the request conversion.
FACE_PARAMS = {"face_restoration_model": "CodeFormer", "code_former_weight": 0.5, "face_restoration_unload": False,
               "save_images_before_face_restoration": False}


@pytest.mark.parametrize("sampler, expected_eta", [
    ("DDIM", 0.3), ("Euler a", 0.6), ("DPM2 a", 0.6), ("DPM++ 2S a", 0.6), ("DPM++ SDE", 0.6), ("DPM++ 2M SDE", 0.6),
    ("DPM++ 2M", None), ("PLMS", None),
])
def test_each_sampler_takes_its_own_eta_setting(sampler, expected_eta):
    values = {"eta_ancestral": 0.6, "eta_ddim": 0.3, "eta_noise_seed_delta": 31337}
    assert sampler_option_params(sampler, values) == {"eta": expected_eta, "ensd": 31337, "rng_source": "CPU",
                                                      "sampler_parameters": SamplerParameters(),
                                                      "inpainting_mask_weight": 1.0,
                                                      "refiner_switch_by_sample_steps": False,
                                                      "use_old_scheduling": False, "tiling": False, "hypertile": None,
                                                      **FACE_PARAMS}


def test_defaults_are_a1111s():
    assert SAMPLER_OPTION_DEFAULTS == {"eta_ancestral": 1.0, "eta_ddim": 0.0, "eta_noise_seed_delta": 0,
                                       "randn_source": "CPU",  # mixkit's noise; A1111's default is GPU
                                       "img2img_fix_steps": False, "sigma_min": 0.0, "sigma_max": 0.0, "rho": 0.0,
                                       "s_churn": 0.0, "s_tmin": 0.0, "s_tmax": 0.0, "s_noise": 1.0,
                                       "always_discard_next_to_last_sigma": False, "sgm_noise_multiplier": False,
                                       "beta_dist_alpha": 0.6, "beta_dist_beta": 0.6, "uni_pc_variant": "bh1",
                                       "uni_pc_skip_type": "time_uniform", "uni_pc_order": 3,
                                       "uni_pc_lower_order_final": True, "sd_noise_schedule": "Default",
                                       "pad_cond_uncond": False, "pad_cond_uncond_v0": False,
                                       "use_downcasted_alpha_bar": False, "initial_noise_multiplier": 1.0,
                                       "img2img_extra_noise": 0.0, "inpainting_mask_weight": 1.0,
                                       "hires_fix_refiner_pass": "second pass",
                                       "token_merging_ratio_hr": 0.0,  # 0: the hires pass takes the first pass's
                                       "refiner_switch_by_sample_steps": False,
                                       "use_old_scheduling": False, "tiling": False, "img2img_color_correction": False,
                                       "save_images_before_color_correction": False,
                                       "face_restoration": False,
                                       **FACE_PARAMS, **HYPERTILE_OPTION_DEFAULTS}
    assert sampler_option_params("Euler a", {}) == {"eta": 1.0, "ensd": 0, "rng_source": "CPU",
                                                    "sampler_parameters": SamplerParameters(),
                                                    "inpainting_mask_weight": 1.0,
                                                    "refiner_switch_by_sample_steps": False,
                                                    "use_old_scheduling": False, "tiling": False, "hypertile": None,
                                                    **FACE_PARAMS}


@pytest.mark.parametrize("key, value", [("eta_ancestral", 1.5), ("eta_ddim", -0.1), ("eta_ddim", "0"),
                                        ("eta_noise_seed_delta", -1), ("eta_noise_seed_delta", 1.5),
                                        ("hires_fix_refiner_pass", "Second pass"), ("hires_fix_refiner_pass", 2),
                                        ("refiner_switch_by_sample_steps", "True"), ("use_old_scheduling", 1),
                                        ("tiling", "yes"), ("randn_source", "nv"), ("randn_source", None)])
def test_bad_values_are_refused(tmp_path, key, value):
    options = ServerOptions(str(tmp_path), 0)
    with pytest.raises(ValueError, match=key):
        options.check_update({key: value})


def test_settings_are_saved_and_read_back(tmp_path):
    path = str(tmp_path / "settings.json")
    options = ServerOptions(str(tmp_path), 0, settings_file=path)
    options.apply(options.check_update({"eta_ancestral": 0.25, "eta_noise_seed_delta": 31337, "randn_source": "NV"}))
    again = ServerOptions(str(tmp_path), 0, settings_file=path)
    assert again.sampler_params("Euler a") == {"eta": 0.25, "ensd": 31337, "rng_source": "NV",
                                               "sampler_parameters": SamplerParameters(),
                                               "inpainting_mask_weight": 1.0,
                                               "refiner_switch_by_sample_steps": False,
                                               "use_old_scheduling": False, "tiling": False, "hypertile": None,
                                               **FACE_PARAMS}


def test_the_settings_tab_applies_the_sampler_parameters(tmp_path):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out")))
    try:
        apply = handler(build_ui(state), "settings_apply", "click")
        defaults = [state.options.get(key) for key in ("default_sampler_name", "default_scheduler", "default_steps",
                                                       "default_cfg_scale", "default_width", "default_height")]
        apply.fn(True, False, 1, 3, 0.0, False, 0.0, 0.4, 0.2, 31337, True, *defaults)
        assert state.options.sampler_options() == {**SAMPLER_OPTION_DEFAULTS, "eta_ancestral": 0.4, "eta_ddim": 0.2,
                                                   "eta_noise_seed_delta": 31337, "img2img_fix_steps": True}
    finally:
        state.close()


def test_api_requests_take_eta_from_settings_then_override_settings_then_the_request(client):
    from .test_api_a1111_parity import SMALL, generate

    assert client.post("/sdapi/v1/options", json={"eta_ancestral": 0.5}).status_code == 200
    try:
        body = dict(prompt="a red circle", seed=11, sampler_name="Euler a", **SMALL)
        _, info, _ = generate(client, **body)
        assert "Eta: 0.5" in info["infotexts"][0]
        _, info, _ = generate(client, **body, override_settings={"eta_ancestral": 0.25})
        assert "Eta: 0.25" in info["infotexts"][0]
        _, info, _ = generate(client, **body, eta=0.75)
        assert "Eta: 0.75" in info["infotexts"][0]
        _, info, _ = generate(client, **{**body, "sampler_name": "DPM++ SDE"})  # the SDE samplers take it too
        assert "Eta: 0.5" in info["infotexts"][0]
        _, info, _ = generate(client, **{**body, "sampler_name": "DPM++ 2M"})  # no eta there: ignored
        assert "Eta" not in info["infotexts"][0]
    finally:
        client.post("/sdapi/v1/options", json={"eta_ancestral": 1.0})


def test_ensd_from_settings_or_override_settings_is_applied_recorded_and_read_back(client):
    from .test_api_a1111_parity import SMALL, generate

    body = dict(prompt="a red circle", seed=11, sampler_name="Euler a", **SMALL)
    plain, info, _ = generate(client, **body)
    assert "ENSD" not in info["infotexts"][0]
    delta, info, _ = generate(client, **body, override_settings={"eta_noise_seed_delta": 31337})
    assert "ENSD: 31337" in info["infotexts"][0] and delta[0].tobytes() != plain[0].tobytes()
    again, _, _ = generate(client, infotext=delta[0].info["parameters"])  # ENSD read back into override_settings
    assert again[0].tobytes() == delta[0].tobytes()
    assert client.post("/sdapi/v1/options", json={"eta_noise_seed_delta": 31337}).status_code == 200
    try:
        from_settings, _, _ = generate(client, **body)
        assert from_settings[0].tobytes() == delta[0].tobytes()
    finally:
        client.post("/sdapi/v1/options", json={"eta_noise_seed_delta": 0})
