"""Form values as a client sends them: empty seed, Settings' clip skip, refused numbers and LoRA weights."""

from __future__ import annotations

import json
import logging

import gradio as gr
import pytest
import torch
from safetensors.torch import save_file

from pipelines.params import GenerationLimits, Txt2ImgParams

from .ui_blocks import component, page_value

SEED_EXTRAS_OFF = [-1, 0, 0, 0]  # the form's Variation seed, Variation strength, Resize seed from width/height


LIMITS = GenerationLimits(max_steps=150, max_batch_size=8, max_cfg_scale=30.0)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A UI over a state whose settings file sets clip skip 2 and that has a LoRA folder (no model is loaded)."""
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-form-values")
    (root / "models").mkdir()
    (root / "loras").mkdir()
    save_file({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.zeros(4, 8),
               "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.zeros(8, 4)},
              str(root / "loras" / "style.safetensors"))
    (root / "config.json").write_text(json.dumps({"CLIP_stop_at_last_layers": 2}))
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"), limits=LIMITS,
                                     lora_dir=str(root / "loras"), settings_file=str(root / "config.json")))
    yield state, build_ui(state)
    state.close()


def test_the_clip_skip_field_starts_from_the_settings_value(built):
    # A1111: clip skip is the setting CLIP_stop_at_last_layers and applies to UI generations; here the form's
    # field starts from it on every page load, like sampler, steps, CFG and size.
    state, blocks = built
    for kind in ("txt2img", "img2img"):
        assert component(blocks, f"{kind}_clip_skip").value == 2
    state.options.apply(state.options.check_update({"CLIP_stop_at_last_layers": 3}))
    try:
        assert page_value(blocks, "txt2img_clip_skip") == 3 and page_value(blocks, "img2img_clip_skip") == 3
    finally:
        state.options.apply(state.options.check_update({"CLIP_stop_at_last_layers": 2}))


def test_an_empty_seed_box_reaches_the_handler_as_random(built):
    # A1111's processing.get_fixed_seed: None or '' -> -1 (random).
    from webui.ui.widgets import values_to_params

    _, blocks = built
    seed = component(blocks, "txt2img_seed")
    assert seed.preprocess(None) is None and seed.preprocess(123.0) == 123
    assert values_to_params(["a", "", "Euler", "Automatic", 20, 7, 64, 64, seed.preprocess(None), 1, 1, 1]).seed == -1


@pytest.mark.parametrize("elem_id, payload, message", [
    ("txt2img_steps", None, "Sampling steps is empty; give a number in [1, 150]."),
    ("txt2img_steps", 0, "Sampling steps must be a number in [1, 150], got 0."),
    ("txt2img_batch_size", 17, "Batch size must be a number in [1, 8], got 17."),
    ("txt2img_clip_skip", 13, "Clip skip must be a number in [1, 12], got 13."),
    ("txt2img_cfg_scale", "abc", "CFG Scale must be a number in [0, 30], got 'abc'."),
    ("txt2img_seed", -5, "Seed must be a number in [-1, 9007199254740991], got -5."),
    ("txt2img_hr_denoising", 1.5, "Denoising strength must be a number in [0, 1], got 1.5."),
    ("img2img_denoising_strength", None, "Denoising strength is empty; give a number in [0, 1]."),
    ("img2img_inpaint_full_res_padding", 300, "Only masked padding, pixels must be a number in [0, 256], got 300."),
    ("extras_scale", None, "Scale by is empty; give a number in [1, 8]."),
])
def test_a_bad_number_from_a_client_is_one_refusal_line(built, caplog, elem_id, payload, message):
    # README: a refused form value is one "UI refused:" line in the server log, not Gradio's traceback.
    _, blocks = built
    with caplog.at_level(logging.INFO, logger="webui.ui"), pytest.raises(gr.Error) as raised:
        component(blocks, elem_id).preprocess(payload)
    assert raised.value.message == message and raised.value.print_exception is False
    assert [r.getMessage() for r in caplog.records] == [f"UI refused: {message}"]


def test_values_in_range_pass_as_gradio_passes_them(built):
    _, blocks = built
    assert component(blocks, "txt2img_steps").preprocess(20.0) == 20.0
    assert component(blocks, "txt2img_cfg_scale").preprocess(6.5) == 6.5
    assert component(blocks, "txt2img_seed").preprocess(77.0) == 77 and component(blocks, "txt2img_seed").preprocess(-1) == -1
    # Plain Gradio classes: a Component subclass would make Gradio write a .pyi stub into the installed package.
    assert type(component(blocks, "txt2img_steps")) is gr.Slider and type(component(blocks, "txt2img_seed")) is gr.Number


def test_a_malformed_lora_weight_is_refused_before_queueing(built):
    state, _ = built
    state.check_params("txt2img", Txt2ImgParams(prompt="a cat <lora:style:0.5>"))
    with pytest.raises(ValueError, match=r"prompt: extra network tag '<lora:style:abc>': te weight must be a number, "
                                         r"got 'abc'; write weights as numbers, e\.g\. <lora:name:0\.8>\."):
        state.check_params("txt2img", Txt2ImgParams(prompt="a cat <lora:style:abc>"))
    # A1111 1.10 parses extra networks out of the prompts only: a negative prompt's tag is text, malformed or not
    state.check_params("txt2img", Txt2ImgParams(prompt="a cat", negative_prompt="<lora:style:1:x>"))
    assert state.worker.queued == 0


def test_a_client_gets_the_refusal_through_gradio(built, serving):
    """End to end: gradio_client sends an empty Sampling steps and gets mixkit's message, not 'Could not preprocess'."""
    from gradio_client import Client

    state, _ = built
    with serving(state) as running:
        client = Client(running.url + "/", verbose=False)
        styles, hires_off = [], [False, "Latent", 2, 0, 0, 0, 0.7, "", "", "Use same sampler", "Use same scheduler"]
        with pytest.raises(Exception, match="Sampling steps is empty; give a number in \\[1, 150\\]"):
            client.predict("a cube", "", "Euler", "Automatic", None, 7, 64, 64, 1, 1, 1, 1, *SEED_EXTRAS_OFF, styles, *hires_off, api_name="/run")
        with pytest.raises(Exception, match="prompt: extra network tag '<lora:style:abc>'"):
            client.predict("a <lora:style:abc>", "", "Euler", "Automatic", 2, 7, 64, 64, 1, 1, 1, 1, *SEED_EXTRAS_OFF, styles, *hires_off,
                           api_name="/run")
