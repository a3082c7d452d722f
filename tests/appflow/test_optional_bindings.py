"""Optional inputs do not join another step's required app input by name (appflow hunt finding 2).

In a text-to-image -> caption chain the app's `prompt` is what to draw; the captioner's optional
`prompt` is a caption prefix. PaddleMIX keeps the two apart by naming (its caption task reads
`blip2_prompt`, its detector `prompt`); LAVIS' `generate` takes the prompt only when the caller
passes one. Binding them by name made the captioner continue the drawing prompt.
"""

from __future__ import annotations

import pytest

from appflow import Appflow, Chain, Step, validate_chain
from appflow.chain import Binding

ROUNDTRIP = [Step("text_to_image", id="gen"), Step("image_caption", id="cap")]


@pytest.mark.parametrize("inputs", [["prompt"], None])
def test_the_captioner_does_not_get_the_drawing_prompt(inputs):
    plan = validate_chain(Chain("roundtrip", ROUNDTRIP, inputs=inputs))
    assert "prompt" not in plan.bindings["cap"]  # before: Binding(None, 'prompt'), the app's drawing prompt
    assert plan.bindings["cap"]["image"] == Binding("gen", "image")
    assert plan.consumers["prompt"] == ["gen"]
    # an open chain (inputs=None) still exposes the captioner's `question`, which no other step reads
    expected = {"prompt": False} if inputs else {"prompt": False, "question": True}
    assert {k: p.optional for k, p in plan.app_inputs.items()} == expected


def test_an_explicit_binding_exposes_the_caption_prefix_as_its_own_input():
    steps = [Step("text_to_image", id="gen"), Step("image_caption", id="cap", inputs={"prompt": "caption_prompt"})]
    plan = validate_chain(Chain("roundtrip", steps, inputs=["prompt", "caption_prompt"]))
    assert plan.bindings["cap"]["prompt"] == Binding(None, "caption_prompt")
    assert plan.app_inputs["caption_prompt"].optional and not plan.app_inputs["prompt"].optional


def test_an_explicit_binding_to_the_same_name_shares_it():
    steps = [Step("text_to_image", id="gen"), Step("image_caption", id="cap", inputs={"prompt": "prompt"})]
    plan = validate_chain(Chain("roundtrip", steps, inputs=["prompt"]))
    assert plan.bindings["cap"]["prompt"] == Binding(None, "prompt")
    assert plan.consumers["prompt"] == ["gen", "cap"]


def test_an_optional_input_no_step_requires_still_binds_by_name():
    plan = validate_chain(Chain("caption", [Step("image_caption")], inputs=["image", "prompt", "question"]))
    assert plan.bindings["image_caption"]["prompt"] == Binding(None, "prompt")
    assert plan.bindings["image_caption"]["question"] == Binding(None, "question")


def test_a_caption_chain_into_detection_still_shares_the_image():
    plan = validate_chain(Chain("mine", [Step("image_caption"),
                                         Step("open_vocabulary_detection", inputs={"prompt": "image_caption.text"})]))
    assert plan.bindings["image_caption"]["image"] == Binding(None, "image")
    assert plan.bindings["open_vocabulary_detection"]["image"] == Binding(None, "image")


def test_the_roundtrip_caption_is_the_caption_of_the_generated_image(tiny_sd1_dir, tiny_blip2_dir, shared_cache):
    flow = Appflow(Chain("roundtrip", ROUNDTRIP, inputs=["prompt"]), models=[tiny_sd1_dir, tiny_blip2_dir],
                   cache=shared_cache, steps=2, seed=1, max_new_tokens=6)
    result = flow(prompt="a red circle on a blue background")
    plain = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=shared_cache, max_new_tokens=6)
    assert result["text"] == plain(image=result["image"])["text"]
