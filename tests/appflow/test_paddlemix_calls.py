"""PaddleMIX's AppFlow calls work as written (appflow hunt finding 4), and a loaded VLM plugs in (finding 6).

References: PaddleMIX `paddlemix/appflow/image2text_generation.py` (the caption task reads
`inputs["blip2_prompt"]`), `applications/README_en.md` and the auto_label example
(`task(image=image_pil, blip2_prompt='describe the image')`, `Appflow(..., static_mode=False)`).
"""

from __future__ import annotations

import pytest
import torch

from appflow import Appflow, ModelCache, describe_app

KEEP_ALL = dict(box_threshold=0.0, text_threshold=0.0)


@pytest.fixture(scope="module")
def shipped():
    return Appflow("image2text_generation", max_new_tokens=12)


@pytest.fixture
def circle():
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (64, 64), (40, 60, 220))
    ImageDraw.Draw(image).ellipse((16, 16, 48, 48), fill=(220, 30, 30))
    return image


def test_blip2_prompt_is_the_caption_prompt(shipped, circle):
    prefixed = shipped(image=circle, blip2_prompt="a large")["text"]
    assert prefixed == shipped(image=circle, prompt="a large")["text"]
    assert prefixed != shipped(image=circle)["text"]  # the prompt reached the captioner
    with pytest.raises(TypeError, match="got input 'prompt' twice, as 'prompt' and as 'blip2_prompt'"):
        shipped(image=circle, prompt="a", blip2_prompt="a")


def test_auto_label_takes_the_caption_prompt_as_paddlemix_passes_it(tiny_dino_dir, tiny_sam_dir, circle, shipped):
    flow = Appflow("auto_label", models=["mixkit-tiny-blip2", tiny_dino_dir, tiny_sam_dir], cache=ModelCache(),
                   max_new_tokens=12, **KEEP_ALL)
    assert flow.inputs == {"image": "image", "caption_prompt": "text?"}
    assert describe_app("auto_label")["input_aliases"] == {"blip2_prompt": "caption_prompt"}
    result = flow(image=circle, blip2_prompt="a large")
    assert result["caption"] == shipped(image=circle, prompt="a large")["text"]
    assert flow(image=circle)["caption"] == shipped(image=circle)["text"]


def test_paddlemix_noun_tags_are_refused_saying_why(shipped, circle):
    result = shipped(image=circle)
    with pytest.raises(KeyError, match=r"App 'image2text_generation' has no output 'prompt'. PaddleMIX returns the "
                                       r"caption's nouns there .*cannot be fetched offline.* Its outputs: \['result', "
                                       r"'text', 'texts'\]"):
        result["prompt"]
    with pytest.raises(KeyError, match=r"has no output 'nope'. Its outputs"):
        result["nope"]
    assert result.get("prompt") is None and "prompt" not in result  # dict behaviour otherwise unchanged


def test_static_mode_false_is_accepted_and_true_refused_saying_why(tiny_dino_dir, tiny_sam_dir):
    models = [tiny_dino_dir, tiny_sam_dir]
    assert Appflow(app="openset_det_sam", models=models, static_mode=False, cache=ModelCache())
    with pytest.raises(ValueError, match="static_mode=True asks for PaddlePaddle's exported static-graph inference.*"
                                         "mixkit runs PyTorch eagerly"):
        Appflow(app="openset_det_sam", models=models, static_mode=True)
    with pytest.raises(TypeError, match="static_mode must be True or False"):
        Appflow(app="openset_det_sam", models=models, static_mode="no")


def test_short_dtype_names_work_as_in_load_vlm():
    # load_vlm(dtype="fp16") always took them (appflow hunt finding 10)
    assert Appflow(app="image2text_generation", dtype="fp16").dtype is torch.float16
    assert Appflow(app="image2text_generation", dtype="bf16").dtype is torch.bfloat16
    with pytest.raises(ValueError, match=r"dtype must be one of \['bf16', 'bfloat16', 'float16', 'float32', 'fp16', "
                                         r"'fp32'\], a torch.dtype or None, got 'half'"):
        Appflow(app="image2text_generation", dtype="half")


# -- a transformers VLM loaded in the process -------------------------------------------------------
def test_a_loaded_transformers_vlm_gets_advice_that_works(tiny_blip2_dir, tiny_clip_dir, circle):
    from transformers import AutoProcessor, Blip2ForConditionalGeneration, CLIPModel

    from appflow.loaders import ProcessorModel
    from mixkit.models.vlm import load_vlm, wrap_vlm

    model, processor = Blip2ForConditionalGeneration.from_pretrained(tiny_blip2_dir), AutoProcessor.from_pretrained(
        tiny_blip2_dir)
    advice = r"wrap a loaded transformers model with its processor as mixkit.models.vlm.wrap_vlm\(model, processor\)"
    with pytest.raises(TypeError, match=f"got Blip2ForConditionalGeneration \\(a 'blip-2' model\\); {advice}"):
        Appflow("image2text_generation", models=[model])
    with pytest.raises(TypeError, match=f"got ProcessorModel of .*; {advice}"):  # before: advised ProcessorModel itself
        Appflow("image2text_generation", models=[ProcessorModel(model, processor, str(tiny_blip2_dir))])
    flow = Appflow("image2text_generation", models=[wrap_vlm(model, processor)], cache=ModelCache(),
                   max_new_tokens=4, repetition_penalty=1.5)
    assert flow(image=circle)["text"] == load_vlm(tiny_blip2_dir).caption([circle], max_new_tokens=4,
                                                                           repetition_penalty=1.5)[0]

    clip = CLIPModel.from_pretrained(tiny_clip_dir)
    with pytest.raises(TypeError, match=f"got CLIPModel \\(a 'clip' model\\); {advice}"):
        Appflow("zero_shot_classification", models=[clip])
    wrapped = wrap_vlm(clip, AutoProcessor.from_pretrained(tiny_clip_dir))
    assert Appflow("zero_shot_classification", models=[wrapped], cache=ModelCache())(image=circle, labels=["a", "b"])
    # a CLIP adapter has a caption() that can only refuse: not a captioner
    with pytest.raises(TypeError, match=r"got ClipAdapter of CLIPModel .*\(a 'clip' model\); this role takes blip-2"):
        Appflow("image2text_generation", models=[wrapped])
