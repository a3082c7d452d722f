"""The web UI's Extra seed controls: paste fills them (A1111's paste fields), "Reuse" takes an image's variation seed."""

import pytest
from PIL import Image

from pipelines.infotext import build_infotext
from pipelines.params import GenerationLimits
from webui.ui.generate_tab import reused_subseed
from webui.ui.paste_infotext import infotext_to_form_values
from webui.ui.widgets import values_to_params

BASE = {"Steps": 20, "Sampler": "Euler", "CFG scale": 7, "Seed": 1, "Size": "64x64", "RNG": "CPU"}


def _paste(extra):
    return infotext_to_form_values(build_infotext("a cube", "", {**BASE, **extra}), GenerationLimits(), ["Euler"],
                                   ["Automatic"])


def test_a_paste_fills_the_extra_seed_controls():
    values, notes = _paste({"Variation seed": 77, "Variation seed strength": 0.35, "Seed resize from": "48x80"})
    assert notes == []
    assert (values["subseed"], values["subseed_strength"]) == (77, 0.35)
    assert (values["seed_resize_from_w"], values["seed_resize_from_h"]) == (48, 80)


def test_a_paste_without_them_turns_them_off_and_bad_ones_are_named():
    values, _ = _paste({})
    assert "subseed" not in values  # the form's variation seed stays; at strength 0 it draws nothing
    assert (values["subseed_strength"], values["seed_resize_from_w"], values["seed_resize_from_h"]) == (0.0, 0, 0)
    values, notes = _paste({"Variation seed": 5, "Variation seed strength": 3})
    assert "Variation seed strength: '3' is outside [0, 1]" in "\n".join(notes)
    values, notes = _paste({"Seed resize from": "50x80"})
    assert "Seed resize from-1: 50 is not a multiple of 8" in "\n".join(notes) and values["seed_resize_from_h"] == 80


def test_pasted_values_make_the_params_the_image_was_made_with():
    values, _ = _paste({"Variation seed": 77, "Variation seed strength": 0.35, "Seed resize from": "48x80"})
    form = ["a cube", "", "Euler", "Automatic", 20, 7, 64, 64, 1, 1, 1, 1, float(values["subseed"]),
            values["subseed_strength"], float(values["seed_resize_from_w"]), float(values["seed_resize_from_h"])]
    params = values_to_params(form)
    assert (params.subseed, params.subseed_strength, params.seed_resize_from_w, params.seed_resize_from_h) == \
        (77, 0.35, 48, 80)


def test_reuse_takes_the_selected_images_variation_seed():
    texts = [build_infotext("a", "", {**BASE, "Variation seed": 40, "Variation seed strength": 0.2}),
             build_infotext("a", "", {**BASE, "Variation seed": 41, "Variation seed strength": 0.2}),
             build_infotext("a", "", BASE)]
    assert reused_subseed(texts, 1) == 41 and reused_subseed(texts, None) == 40
    assert reused_subseed(texts, 2) == -1 and reused_subseed([], None) == -1


def test_the_form_runs_a_variation_batch_end_to_end(tiny_sd1_dir, tmp_path, serving):
    # gradio_client drives the form's /run as the page does: image k keeps the seed and takes subseed + k
    from gradio_client import Client

    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "outputs"))
    with serving(config) as running:
        running.state.options.apply({"samples_save": False, "return_grid": False})
        client = Client(running.url + "/", verbose=False)
        hires_off = [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        result = client.predict("a cube", "", "Euler a", "Automatic", 2, 7, 64, 64, 1000, 1, 2, 1, 77, 0.5, 48, 80, [],
                                *hires_off, api_name="/run")
        gallery = result[2]
        assert [item["image"].rsplit("/", 1)[1] for item in gallery] == ["00001-1000.png", "00002-1000.png"]
        for item, subseed in zip(gallery, (77, 78)):
            with Image.open(item["image"]) as image:
                text = image.info["parameters"]
                assert "Seed: 1000," in text
                assert f"Variation seed: {subseed}, Variation seed strength: 0.5, Seed resize from: 48x80," in text


@pytest.mark.filterwarnings("ignore:'Resize seed from' 0x48:UserWarning")  # the Python API's own, on the server side
def test_resize_seed_from_one_side_alone_is_off_in_the_form_as_in_a1111_with_a_warning(tiny_sd1_dir, tmp_path,
                                                                                        monkeypatch):
    # A1111's sliders start at 0 and its ImageRNG resizes only with both sides > 0: the form takes "0 x 48" and makes
    # the plain seed's image (the Python API's rule, `check_seed_extras`), telling the user the side changes nothing.
    from types import SimpleNamespace

    import gradio as gr

    from pipelines.txt2img import TextToImage
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    from .ui_blocks import handler

    shown = []
    monkeypatch.setattr(gr, "Warning", lambda message, *args, **kwargs: shown.append(message))
    state = ServerState(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out")))
    try:
        state.load_initial_model()
        state.options.apply({"samples_save": True, "return_grid": False})
        run = handler(build_ui(state), "txt2img_generate", "click")
        made = {}
        for sides in ((0, 48), (0, 0)):
            changes = {"prompt": "a cube", "steps": 2, "width": 64, "height": 64, "seed": 12, "sampler": "Euler",
                       "seed_resize_from_w": sides[0], "seed_resize_from_h": sides[1], "task_id": ""}
            values = [changes.pop(block.elem_id.removeprefix("txt2img_"), block.value) for block in run.inputs]
            assert not changes, f"no such inputs: {changes}"
            before = set(state.output_dir.glob("*.png"))
            list(run.fn(SimpleNamespace(session_hash="seed-resize"), *values))
            (saved,) = set(state.output_dir.glob("*.png")) - before
            with Image.open(saved) as image:
                made[sides] = (image.convert("RGB").tobytes(), image.info["parameters"])
    finally:
        state.close()
    assert shown == ["'Resize seed from' 0x48 has its width at 0, so the seed is not resized (the height 48 is "
                     "ignored, as in A1111, which resizes only when both sides are set); set both sides to resize it."]
    assert made[(0, 48)] == made[(0, 0)] and "Seed resize from" not in made[(0, 48)][1]
    with pytest.warns(UserWarning, match="'Resize seed from' 0x48 has its width at 0"):
        python_api = TextToImage.from_pretrained(tiny_sd1_dir)(prompt="a cube", steps=2, width=64, height=64,
                                                               seed=12, sampler="Euler", seed_resize_from_h=48)
    assert python_api.images[0].convert("RGB").tobytes() == made[(0, 48)][0]
