"""PaddleMIX / LAVIS calls that mixkit refused (appflow hunt 2, findings 3, 4, 7, 10 and the SigLIP template note).

References: PaddleMIX `applications/Inpainting/README.md` and `tests/appflow/test_inpainting.py`
(`Appflow(app="inpainting", models=[sd])(inpaint_prompt=..., image=..., seg_masks=mask_image)`), its
`applications/Automatic_label/automatic_label.py` (`plt.imshow(result["image"])`), its image2text README
(`task(image=image, minigpt4_text="describe the image")`), LAVIS `Blip2OPT.generate(use_nucleus_sampling, max_length,
num_captions)` and `predict_answers` (a batch of questions), transformers' zero-shot image classification pipeline
(a list of images; SigLIP's default `hypothesis_template` "This is a photo of {}.").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from appflow import Appflow, Chain, ModelCache, Step

KEEP_ALL = dict(box_threshold=0.0, text_threshold=0.0)
TOKENS = dict(max_new_tokens=6)


# -- finding 3: PaddleMIX's `inpainting` picks its sub-flow from the models --------------------------------------------
def test_inpainting_with_one_sd_model_repaints_the_mask_given_as_seg_masks(tiny_sd1_dir, photo, shared_cache):
    mask = Image.new("L", photo.size, 0)
    mask.paste(255, (4, 4, 14, 12))
    flow = Appflow(app="inpainting", models=[tiny_sd1_dir], cache=shared_cache, steps=2, seed=7)
    assert flow.name == "mask_guided_inpainting"
    assert Appflow(app="inpainting", models={"generator": tiny_sd1_dir}, cache=shared_cache).name == flow.name
    result = flow(inpaint_prompt="a cat", image=photo, seg_masks=mask)  # PaddleMIX's call, as written
    inpaint_only = Chain("inpaint_only", [Step("inpaint")], inputs=["image", "mask", "prompt"])
    by_hand = Appflow(inpaint_only, models=[tiny_sd1_dir], cache=shared_cache, steps=2, seed=7)(
        image=photo, mask=mask, prompt="a cat")
    assert np.array_equal(np.asarray(result["result"]), np.asarray(by_hand["result"]))
    assert not np.array_equal(np.asarray(result["result"]), np.asarray(photo))


def test_inpainting_with_detector_sam_and_sd_is_still_text_guided(tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir):
    assert Appflow(app="inpainting", models=[tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir], cache=ModelCache()).name \
        == "text_guided_inpainting"
    assert Appflow(app="inpainting", cache=ModelCache()).name == "text_guided_inpainting"  # default models


@pytest.mark.parametrize("models", [["chatglm", "dino", "sam", "sd"], {"llm": "chatglm", "generator": "sd"}])
def test_the_chatglm_inpainting_form_is_refused_pointing_at_dialog_image_editing(models):
    with pytest.raises(ValueError, match=r"4-model `inpainting` .* is chat-guided editing; here that is "
                                         r"Appflow\(app='dialog_image_editing', .* instruction="):
        Appflow(app="inpainting", models=models, cache=ModelCache())


# -- finding 4: result["image"], as PaddleMIX's examples read it -------------------------------------------------------
def test_app_inputs_are_readable_from_the_result_but_not_returned_as_outputs(tiny_dino_dir, tiny_sam_dir, photo,
                                                                            shared_cache):
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=shared_cache, **KEEP_ALL)
    result = flow(image=photo, prompt="dog")
    assert np.array_equal(np.asarray(result["image"]), np.asarray(photo))  # KeyError before
    assert result["prompt"] == "dog" and result.get("image") is result["image"]
    # `in` agrees with lookup (PaddleMIX code tests with it); iteration holds the outputs only: HTTP never echoes inputs
    assert "image" in result and "image" not in list(result) and "nope" not in result
    with pytest.raises(KeyError, match=r"has no output 'nope'. Its outputs: .*; its inputs, also readable by name: "
                                       r"\['image', 'prompt'\]"):
        result["nope"]


# -- finding 7: LAVIS / PaddleMIX spellings of the captioning options --------------------------------------------------
@pytest.mark.parametrize("lavis, ours", [
    (dict(max_length=4), dict(max_new_tokens=4)),  # LAVIS' BLIP-2 generates from embeddings: new tokens
    (dict(num_captions=2, num_beams=2), dict(num_return_sequences=2, num_beams=2)),
    (dict(use_nucleus_sampling=True, top_p=0.9, seed=3), dict(do_sample=True, top_p=0.9, seed=3)),
])
def test_lavis_option_spellings_give_what_the_options_they_stand_for_give(captioner, photo, lavis, ours):
    assert captioner(image=photo, **lavis)["texts"] == captioner(image=photo, **ours)["texts"]


def test_top_k_reaches_generate(captioner, vlm, photo):
    got = captioner(image=photo, do_sample=True, top_k=3, seed=11)["text"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        expected = vlm.caption([photo], do_sample=True, top_k=3, **TOKENS)[0]
    assert got == expected
    with pytest.raises(ValueError, match="top_k must be None or an integer >= 0"):
        captioner(image=photo, top_k=-1)


def test_two_spellings_of_one_option_and_minigpt4_text(captioner, vlm, photo):
    with pytest.raises(TypeError, match="got option 'max_new_tokens' twice, as 'max_new_tokens' and as 'max_length'"):
        Appflow("image2text_generation", cache=ModelCache(), max_new_tokens=4, max_length=4)
    with pytest.raises(TypeError, match="twice, as 'do_sample' and as 'use_nucleus_sampling'"):
        captioner(image=photo, do_sample=True, use_nucleus_sampling=True)
    # PaddleMIX's MiniGPT-4 instruction is a question to the model, asked in the family's own prompt format
    assert captioner(image=photo, minigpt4_text="what is it?")["text"] == \
        vlm.answer([photo], ["what is it?"], **TOKENS)[0]


# -- finding 10: batches of questions and of images to classify --------------------------------------------------------
def test_a_batch_of_questions_pairs_with_the_batch_of_images(captioner, vlm, photo, second):
    paired = captioner(image=[photo, second], question=["what is it?", "which colour?"])
    assert paired["texts"] == vlm.answer([photo, second], ["what is it?", "which colour?"], **TOKENS)
    one_image = captioner(image=photo, question=["what is it?", "which colour?"])
    assert one_image["texts"] == vlm.answer([photo, photo], ["what is it?", "which colour?"], **TOKENS)
    cache = ModelCache()
    with pytest.raises(ValueError, match="3 images and 2 questions; pass one question per image"):
        Appflow("image2text_generation", cache=cache)(image=[photo, second, photo], question=["a?", "b?"])
    assert cache.loads == 0


def test_zero_shot_classification_scores_a_list_of_images(tiny_clip_dir, photo, second, shared_cache):
    from mixkit.models.vlm import load_vlm

    labels = ["a red square", "a green box"]
    result = Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=shared_cache)(
        image=[photo, second], labels=labels)
    expected = load_vlm(tiny_clip_dir).classify([photo, second], labels)
    assert result["scores_per_image"] == expected
    assert result["scores"] == result["scores_per_image"][0]


# -- note: SigLIP's own default template -------------------------------------------------------------------------------
def test_siglip_default_templates_match_transformers_zero_shot_pipeline(tmp_path, photo):
    from transformers import pipeline

    from mixkit.testing.tiny_vlm import build_tiny_siglip

    folder = build_tiny_siglip(tmp_path / "siglip", seed=0)
    labels = ["a red square", "a green box", "a cat"]
    result = Appflow("zero_shot_classification", models=[folder], cache=ModelCache())(image=photo, labels=labels)
    reference = pipeline("zero-shot-image-classification", model=str(folder))(photo, candidate_labels=labels)
    expected = {row["label"]: row["score"] for row in reference}
    assert result["scores"] == pytest.approx(expected, abs=1e-6)
