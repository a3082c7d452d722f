"""`/sdapi/v1/txt2img` with `script_name: "x/y/z plot"` on the axes that change the loaded model: VAE (a `--vae-dir`
name, swapped per cell and the server's VAE put back) and Token merging ratio (the model's ToMe put back), by
A1111's axis indexes (webui/generation_jobs.py `vae_switcher` / `vae_kept`, pipelines/scripts/xyz_model_axes.py)."""

from __future__ import annotations

import httpx
import pytest

from pipelines.approx import model_labels
from pipelines.approx.labels import OptimizationLabels
from pipelines.approx.tome_unet import token_merging_state
from pipelines.infotext import parse_infotext

from .png_payloads import decode_png

TINY = {"prompt": "a red cat", "steps": 2, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64}
VAE_INDEX, TOME_INDEX = 30, 34  # A1111 1.10's txt2img x_type indexes
NOTHING = ["Nothing", "", [], "Nothing", "", []]


@pytest.fixture(scope="module")
def running(tiny_sd1_dir, tmp_path_factory, serving):
    """A server whose `--vae-dir` holds "other-vae" (the tiny VAE of another seed: other pixels from the same
    latents) and "broken.safetensors" (not a VAE file)."""
    from mixkit.testing.tiny_models import tiny_vae
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("xyz-model-axes")
    tiny_vae(seed=7).save_pretrained(root / "vaes" / "other-vae")
    (root / "vaes" / "broken.safetensors").write_bytes(b"not a safetensors file")  # listed; its load fails
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "out"), ui=False,
                          vae_dir=str(root / "vaes"), settings_file=str(root / "settings.json"))
    with serving(config) as server:
        yield server


def plot(running, script_args):
    with httpx.Client(base_url=running.url, timeout=120) as http:
        return http.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "x/y/z plot", "script_args": script_args})


def cells(response):
    """The sub images (after the grid) as (image, parsed infotext)."""
    assert response.status_code == 200, response.text
    images = [decode_png(data) for data in response.json()["images"][1:]]
    return [(image, parse_infotext(image.info["parameters"])) for image in images]


def test_vae_axis_decodes_each_cell_with_its_vae_and_puts_the_servers_back(running):
    model = running.state.holder.txt2img().model
    own_vae = model.vae
    response = plot(running, [VAE_INDEX, "", ["Automatic", "other-vae", "none"], *NOTHING, False, True])
    (automatic, automatic_text), (other, other_text), (none, none_text) = cells(response)
    assert "VAE" not in automatic_text and other_text["VAE"] == "other-vae" and "VAE" not in none_text
    assert automatic.tobytes() != other.tobytes()  # another decoder, other pixels from the same latents
    assert none.tobytes() == automatic.tobytes()  # a folder model's built-in VAE is its Automatic one
    assert running.state.holder.vae_name == "Automatic" and model.vae is own_vae
    assert running.state.options.get("sd_vae") == "Automatic"  # a plot does not change the setting


def test_vae_axis_puts_back_a_chosen_vae_too(running):
    from webui.ui.settings_tab import switch_vae

    switch_vae(running.state, "other-vae")
    try:
        response = plot(running, ["VAE", "Automatic", [], *NOTHING, False, True, False, False, False, False, False,
                                  0, True])
        [(_, text)] = cells(response)
        assert "VAE" not in text
        assert running.state.holder.vae_name == "other-vae"
    finally:
        switch_vae(running.state, "Automatic")


def test_unknown_vae_is_refused_before_queueing(running):
    response = plot(running, [VAE_INDEX, "", ["other-vae", "missing.safetensors"]])
    assert response.status_code == 422
    assert response.json()["detail"] == ("X axis: Unknown VAE 'missing.safetensors' on the VAE axis. Valid names: "
                                         "'Automatic', 'None', 'broken.safetensors', 'other-vae' (the VAE files "
                                         "and folders listed are --vae-dir's).")


def test_a_vae_failing_to_load_mid_plot_stops_it_naming_the_cell_and_the_servers_vae_is_back(running):
    model = running.state.holder.txt2img().model
    own_vae = model.vae
    response = plot(running, ["VAE", "other-vae, broken.safetensors", [], "Steps", "2", [], *NOTHING[:3], False,
                              False, False, False, False, False, False, 0, True])
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("X/Y/Z plot stopped at cell 2 of 2 (VAE: broken.safetensors, Steps: 2): the VAE axis "
                             "could not load 'broken.safetensors' (")
    assert detail.endswith("); was it removed or changed, or made for another model family? Refresh the VAE list and "
                           "plot again.")
    assert running.state.holder.vae_name == "Automatic" and model.vae is own_vae


@pytest.fixture()
def restore_fails(running, monkeypatch):
    """The holder's `set_vae` failing when asked for "Automatic" (the VAE the plot puts back), as a checkpoint
    folder removed mid-plot would; the server's VAE is put back for real afterwards."""
    holder = running.state.holder
    real = holder.set_vae

    def set_vae(name, path):
        if name == "Automatic":
            raise OSError("the checkpoint's VAE folder is gone")
        return real(name, path)

    monkeypatch.setattr(holder, "set_vae", set_vae)
    yield
    monkeypatch.undo()
    real("Automatic", None)


def test_a_failing_cell_whose_vae_cannot_be_restored_names_both(running, restore_fails):
    response = plot(running, ["VAE", "other-vae, broken.safetensors", [], "Steps", "2", [], *NOTHING[:3], False,
                              False, False, False, False, False, False, 0, True])
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("X/Y/Z plot stopped at cell 2 of 2 (VAE: broken.safetensors, Steps: 2): the VAE axis "
                             "could not load 'broken.safetensors' (")
    assert detail.endswith("; the model's VAE could not be restored to 'Automatic' (the checkpoint's VAE folder is "
                           "gone), so it still decodes with 'other-vae': choose 'Automatic' again in Settings (or POST "
                           "sd_vae to /sdapi/v1/options) before generating.")
    assert running.state.holder.vae_name == "other-vae"  # what the error says


def test_a_finished_plot_whose_vae_cannot_be_restored_is_an_error(running, restore_fails):
    response = plot(running, ["VAE", "other-vae", [], *NOTHING, False, False, False, False, False, False, False, 0,
                              True])
    assert response.status_code == 503, response.text  # a model problem, not the request's
    assert response.json()["detail"] == (
        "The script finished (its images were saved where saving was on), but the model's VAE could not be restored "
        "to 'Automatic' (the checkpoint's VAE folder is gone), so it still decodes with 'other-vae': choose "
        "'Automatic' again in Settings (or POST sd_vae to /sdapi/v1/options) before generating.")


def test_token_merging_ratio_axis_labels_each_cell_and_leaves_the_model_as_it_was(running):
    model = running.state.holder.txt2img().model
    response = plot(running, [TOME_INDEX, "0, 0.5", [], *NOTHING, False, True])
    (off, off_text), (merged, merged_text) = cells(response)
    assert "Token merging ratio" not in off_text and merged_text["Token merging ratio"] == "0.5"
    assert off.tobytes() != merged.tobytes()
    assert token_merging_state(model.unet) is None and model_labels(model) == OptimizationLabels()


def test_a_ratio_out_of_range_is_refused_before_queueing(running):
    response = plot(running, [TOME_INDEX, "0.2, 0.8"])
    assert response.status_code == 422
    assert "Token merging ratio 0.8: ToMe ratio must be a number in [0, 0.75]" in response.json()["detail"]


def test_script_info_offers_the_vae_axis_with_the_servers_vaes(running):
    with httpx.Client(base_url=running.url, timeout=120) as http:
        entries = http.get("/sdapi/v1/script-info").json()
    txt2img = next(entry for entry in entries if entry["name"] == "x/y/z plot" and not entry["is_img2img"])
    choices = txt2img["args"][0]["choices"]
    assert choices[VAE_INDEX] == "VAE" and choices[TOME_INDEX] == "Token merging ratio"


def test_the_web_uis_dropdowns_offer_both_axes_and_the_servers_vaes(running):
    from pipelines.scripts.xyz_axes import axes_for
    from webui.ui.script_xyz import axis_choices

    offered = [axis.label for axis in axes_for("txt2img")]
    assert "VAE" in offered and "Token merging ratio" in offered and "FP8 mode" in offered
    assert "Token merging ratio high-res" in offered  # the hires pass's own ratio (A1111's token_merging_ratio_hr)
    assert "Image CFG Scale" in [axis.label for axis in axes_for("img2img")]  # instruct-pix2pix checkpoints
    assert axis_choices("FP8 mode", running.state) == ["Disable", "Enable for SDXL", "Enable"]
    assert axis_choices("RNG source", running.state) == ["GPU", "CPU", "NV"]
    assert axis_choices("VAE", running.state) == ["Automatic", "None", "broken.safetensors", "other-vae"]
    assert axis_choices("Token merging ratio", running.state) is None  # typed numbers, as A1111's slider values
