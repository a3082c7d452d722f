"""Every registered app end to end on tiny models, loaded through the public path a user takes.

Where the app wraps one library call, the oracle is that call made by hand with the same
inputs: the chain must add nothing to the result.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from appflow import Appflow, ModelCache
from appflow.tasks.dialog import EditReplyError

KEEP_ALL = dict(box_threshold=0.0, text_threshold=0.0)  # a random tiny detector: keep every query
SD_FAST = dict(steps=2, seed=7)


@pytest.fixture(scope="module")
def sd_by_hand(tiny_sd1_dir):
    """The tiny SD model loaded by hand, outside AppFlow's cache: the oracle for the SD apps."""
    from pipelines.txt2img import TextToImage

    return TextToImage.from_pretrained(tiny_sd1_dir)


def by_hand_img2img(sd_by_hand, **kwargs):
    from pipelines.img2img import ImageToImage

    return ImageToImage.from_pipeline(sd_by_hand)(**kwargs).images[0]


def pixels(image):
    return np.asarray(image.convert("RGB")).astype(np.int16)


def check_detections(result, image):
    n = len(result["labels"])
    assert all(isinstance(label, str) for label in result["labels"])
    boxes, scores, masks = result["boxes"], result["scores"], result["seg_masks"]
    assert boxes.dtype == torch.float32 and boxes.shape == (n, 4)
    assert scores.dtype == torch.float32 and scores.shape == (n,)
    assert masks.dtype == torch.bool and masks.shape == (n, image.height, image.width)
    assert bool((boxes[:, 0] <= boxes[:, 2]).all() and (boxes[:, 1] <= boxes[:, 3]).all())
    assert bool((boxes >= 0).all() and (boxes[:, 2] <= image.width).all() and (boxes[:, 3] <= image.height).all())


# -- detection and segmentation ------------------------------------------------------------------
def test_openset_det_sam_matches_grounding_dino_and_sam_called_by_hand(tiny_dino_dir, tiny_sam_dir, photo, shared_cache):
    from transformers import AutoProcessor, GroundingDinoForObjectDetection, SamModel

    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=shared_cache, **KEEP_ALL)
    result = flow(image=photo, prompt="Dog")
    check_detections(result, photo)
    assert len(result["labels"]) > 0
    assert result["result"] is result["seg_masks"]

    processor = AutoProcessor.from_pretrained(tiny_dino_dir)
    model = GroundingDinoForObjectDetection.from_pretrained(tiny_dino_dir).eval()
    inputs = processor(images=photo, text="dog.", return_tensors="pt")
    with torch.no_grad():
        found = processor.post_process_grounded_object_detection(
            model(**inputs), inputs["input_ids"], threshold=0.0, text_threshold=0.0, target_sizes=[(40, 48)])[0]
    expected = found["boxes"].clone()
    expected[:, 0::2] = expected[:, 0::2].clamp(0, 48)
    expected[:, 1::2] = expected[:, 1::2].clamp(0, 40)
    torch.testing.assert_close(result["boxes"], expected)
    torch.testing.assert_close(result["scores"], found["scores"])

    sam_processor = AutoProcessor.from_pretrained(tiny_sam_dir)
    sam = SamModel.from_pretrained(tiny_sam_dir).eval()
    sam_inputs = sam_processor(images=photo, input_boxes=[result["boxes"].tolist()], return_tensors="pt")
    with torch.no_grad():
        predicted = sam(pixel_values=sam_inputs["pixel_values"], input_boxes=sam_inputs["input_boxes"],
                        multimask_output=False).pred_masks
    masks = sam_processor.post_process_masks(predicted, sam_inputs["original_sizes"], sam_inputs["reshaped_input_sizes"])[0]
    assert torch.equal(result["seg_masks"], masks[:, 0])


def test_no_boxes_found_is_an_empty_result_and_sam_is_not_loaded(tiny_dino_dir, tiny_sam_dir, photo):
    cache = ModelCache()
    result = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache, box_threshold=1.0)(
        image=photo, prompt="dog")
    check_detections(result, photo)
    assert result["labels"] == [] and result["boxes"].shape == (0, 4) and result["seg_masks"].shape == (0, 40, 48)
    assert cache.loads == 1


@pytest.mark.parametrize("prompt", ["", "  . "])
def test_an_empty_detection_prompt_is_refused_before_loading(tiny_dino_dir, tiny_sam_dir, photo, prompt):
    cache = ModelCache()
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache)
    with pytest.raises(ValueError, match="prompt .* is empty; say what to detect"):
        flow(image=photo, prompt=prompt)
    assert cache.loads == 0


def test_auto_label_gives_consistent_detections_masks_and_labelme_json(tiny_blip2_dir, tiny_dino_dir, tiny_sam_dir,
                                                                       photo, shared_cache):
    flow = Appflow("auto_label", models=[tiny_blip2_dir, tiny_dino_dir, tiny_sam_dir], cache=shared_cache, **KEEP_ALL)
    result = flow(image=photo)
    check_detections(result, photo)
    assert isinstance(result["caption"], str)
    assert result["masks"] is result["seg_masks"]
    annotation = result["result"]
    assert annotation is result["annotation"]
    assert (annotation["imageWidth"], annotation["imageHeight"]) == (48, 40)
    assert [shape["label"] for shape in annotation["shapes"]] == result["labels"]
    assert all(shape["shape_type"] == "mask" for shape in annotation["shapes"])


# -- Stable Diffusion apps -------------------------------------------------------------------------
def test_text2image_equals_the_pipeline_called_by_hand(tiny_sd1_dir, shared_cache, sd_by_hand):
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32,
                   negative_prompt="blurry", **SD_FAST)
    result = flow(prompt="a (red:1.2) cat")
    # PaddleMIX's convention: `result` is the image (`result.save(...)`); `images` keeps every image of the call.
    assert len(result["images"]) == 1 and result["result"] is result["image"] is result["images"][0]
    by_hand = sd_by_hand(prompt="a (red:1.2) cat", negative_prompt="blurry", width=32, height=32, **SD_FAST)
    assert np.array_equal(pixels(result["images"][0]), pixels(by_hand.images[0]))


def test_image2image_equals_the_pipeline_called_by_hand(tiny_sd1_dir, photo, shared_cache, sd_by_hand):
    result = Appflow("image2image_text_guided_generation", models=[tiny_sd1_dir], cache=shared_cache, **SD_FAST)(
        image=photo, prompt="a cat")
    by_hand = by_hand_img2img(sd_by_hand, prompt="a cat", init_images=[photo], width=48, height=40,
                              denoising_strength=0.75, **SD_FAST)
    assert result["result"].size == (48, 40)
    assert np.array_equal(pixels(result["result"]), pixels(by_hand))


def test_text_guided_inpainting_repaints_only_the_detected_area(tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir, photo,
                                                               shared_cache, sd_by_hand):
    flow = Appflow("text_guided_inpainting", models=[tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir], cache=shared_cache,
                   **KEEP_ALL, **SD_FAST)
    result = flow(image=photo, prompt="dog", inpaint_prompt="a cat")
    check_detections(result, photo)
    mask = result["mask"]
    assert mask.mode == "L" and mask.size == photo.size and mask.getbbox() is not None
    by_hand = by_hand_img2img(sd_by_hand, prompt="a cat", init_images=[photo], mask=mask, width=48, height=40,
                              denoising_strength=1.0, mask_blur=4, **SD_FAST)
    assert np.array_equal(pixels(result["result"]), pixels(by_hand))


def test_the_inpaint_task_keeps_every_pixel_beyond_the_mask_blur(tiny_sd1_dir, photo, shared_cache):
    from appflow import Chain, Step

    mask = Image.new("L", photo.size, 0)
    mask.paste(255, (4, 4, 14, 12))
    chain = Chain("inpaint_only", [Step("inpaint")], inputs=["image", "mask", "prompt"])
    result = Appflow(chain, models=[tiny_sd1_dir], cache=shared_cache, **SD_FAST)(image=photo, mask=mask, prompt="a cat")
    from pipelines.inpaint_mask import blur_mask

    far = np.asarray(blur_mask(mask, 4)) == 0  # untouched by the pipeline's mask blur (radius 4, the default)
    assert 0 < far.sum() < far.size
    assert np.array_equal(pixels(result["result"])[far], pixels(photo)[far])
    assert not np.array_equal(pixels(result["result"])[~far], pixels(photo)[~far])


def test_inpainting_with_nothing_detected_returns_the_image_unchanged_without_loading_sd(
        tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir, photo):
    cache = ModelCache()
    flow = Appflow("text_guided_inpainting", models=[tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir], cache=cache,
                   box_threshold=1.0)
    result = flow(image=photo, prompt="dog", inpaint_prompt="a cat")
    assert result["boxes"].shape == (0, 4)
    assert np.array_equal(pixels(result["result"]), pixels(photo))
    assert cache.loads == 1  # the detector only


def test_dialog_editing_with_a_scripted_llm_equals_text_guided_inpainting(tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir,
                                                                          photo, shared_cache):
    prompts = []

    def scripted_llm(prompt: str) -> str:
        prompts.append(prompt)
        return 'Sure! {"what": "dog", "into": "a cat"}'

    models = [tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir]
    edited = Appflow("dialog_image_editing", models=[scripted_llm, *models], cache=shared_cache, **KEEP_ALL, **SD_FAST)(
        image=photo, instruction="make the dog a cat")
    assert (edited["prompt"], edited["inpaint_prompt"]) == ("dog", "a cat")
    assert prompts[0].rstrip().endswith("Instruction: make the dog a cat\nReply:")
    direct = Appflow("text_guided_inpainting", models=models, cache=shared_cache, **KEEP_ALL, **SD_FAST)(
        image=photo, prompt="dog", inpaint_prompt="a cat")
    assert np.array_equal(pixels(edited["result"]), pixels(direct["result"]))


def test_dialog_editing_refuses_an_unparsable_reply_and_leaves_the_image_alone(tiny_dino_dir, tiny_sam_dir,
                                                                              tiny_sd1_dir, photo):
    cache = ModelCache()
    before = photo.tobytes()
    flow = Appflow("dialog_image_editing", models=[lambda prompt: "I would turn it into a cat.", tiny_dino_dir,
                                                   tiny_sam_dir, tiny_sd1_dir], cache=cache)
    with pytest.raises(EditReplyError, match="'I would turn it into a cat.': it contains no JSON object.*not modified"):
        flow(image=photo, instruction="make the dog a cat")
    assert photo.tobytes() == before
    assert cache.loads == 0


def test_dialog_editing_with_a_real_tiny_causal_lm_goes_through_generation(tiny_lm_dir, tiny_dino_dir, tiny_sam_dir,
                                                                           tiny_sd1_dir, photo):
    cache = ModelCache()
    flow = Appflow("dialog_image_editing", models=[tiny_lm_dir, tiny_dino_dir, tiny_sam_dir, tiny_sd1_dir], cache=cache,
                   max_new_tokens=8)
    with pytest.raises(EditReplyError, match="Cannot use the LLM reply"):  # random weights reply garbage
        flow(image=photo, instruction="make the dog a cat")
    assert cache.loads == 1


def test_dual_guided_generation_repaints_the_blend(tiny_sd1_dir, photo, shared_cache, sd_by_hand):
    from appflow.tasks.dual_guided import blend_images

    other = Image.new("RGB", (20, 20), (0, 255, 0))
    result = Appflow("dual_text_and_image_guided_generation", models=[tiny_sd1_dir], cache=shared_cache, **SD_FAST)(
        images=[photo, other], prompt="a cat")
    assert np.array_equal(pixels(result["blend"]), pixels(blend_images([photo, other])))
    by_hand = by_hand_img2img(sd_by_hand, prompt="a cat", init_images=[result["blend"]], width=48, height=40,
                              denoising_strength=0.6, **SD_FAST)
    assert np.array_equal(pixels(result["result"]), pixels(by_hand))
    assert result["seeds"] == [7] and ", Seed: 7, " in result["infotexts"][0]  # what makes it again


def test_upscaling_app_is_4x_and_equals_the_upscaler_called_by_hand(tiny_x4_dir):
    from pipelines.upscale import SDx4Upscaler, upscale_image

    # 13 px: exactly 4x (52), as diffusers' x4 pipeline, not A1111's Extras size floored to a multiple of 8 (48).
    small = Image.new("RGB", (13, 10), (200, 100, 50))
    result = Appflow("image2image_text_guided_upscaling", models=[tiny_x4_dir], cache=ModelCache(), steps=2, seed=0)(
        image=small, prompt="a sharp photo")
    assert result["result"].size == (52, 40)
    by_hand = upscale_image(small, width=52, height=40,
                            upscaler=SDx4Upscaler.from_pretrained(tiny_x4_dir, prompt="a sharp photo", steps=2))
    assert np.array_equal(pixels(result["result"]), pixels(by_hand))


def test_qrcode_art_generates_with_the_controlnet_and_reports_scannability(tiny_sd1_dir, tiny_controlnet_dir,
                                                                          shared_cache):
    from appflow.tasks.qrcode import decode_qr

    flow = Appflow("qrcode_art", models=[tiny_sd1_dir, tiny_controlnet_dir], cache=shared_cache, width=96, **SD_FAST)
    result = flow(text="https://example.org", prompt="a garden")
    assert result["result"].size == (96, 96)
    assert decode_qr(result["qr_image"]) == "https://example.org"
    assert isinstance(result["scannable"], bool)
    assert result["scannable"] == (result["decoded"] == "https://example.org")
    drawn = flow(text="https://example.org", prompt="a garden", seed=-1)  # the seed drawn comes back
    again = flow(text="https://example.org", prompt="a garden", seed=drawn["seeds"][0])
    assert np.array_equal(pixels(again["result"]), pixels(drawn["result"])) and again["infotexts"] == drawn["infotexts"]
    plain = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, width=96, height=96,
                    **SD_FAST)(prompt="a garden")
    assert not np.array_equal(pixels(result["result"]), pixels(plain["result"]))  # the ControlNet acted


# -- vision-language apps --------------------------------------------------------------------------
def test_image2text_captions_and_answers_like_the_vlm_called_by_hand(tiny_blip2_dir, photo, shared_cache):
    from mixkit.models.vlm import load_vlm

    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=shared_cache, max_new_tokens=6)
    vlm = load_vlm(tiny_blip2_dir)
    assert flow(image=photo)["result"] == vlm.caption([photo], max_new_tokens=6)[0]
    assert flow(image=photo, prompt="a photo of")["text"] == vlm.caption([photo], "a photo of", max_new_tokens=6)[0]
    assert flow(image=photo, question="what is it?")["text"] == vlm.answer([photo], ["what is it?"], max_new_tokens=6)[0]
    with pytest.raises(ValueError, match="either prompt .* or question"):
        flow(image=photo, prompt="a", question="b?")


def test_zero_shot_classification_scores_sum_to_one_and_match_clip(tiny_clip_dir, photo, shared_cache):
    from mixkit.models.vlm import load_vlm

    result = Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=shared_cache)(
        image=photo, labels=["cat", "dog", "car"])
    scores = result["result"]
    assert list(scores) == ["cat", "dog", "car"]
    assert sum(scores.values()) == pytest.approx(1.0, abs=1e-6)
    expected = load_vlm(tiny_clip_dir).classify([photo], ["cat", "dog", "car"])[0]
    assert scores == pytest.approx(expected, abs=1e-6)
    with pytest.raises(TypeError, match="input 'labels' .* expects texts"):
        Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=shared_cache)(image=photo, labels=photo)


# -- LoRA tags, embeddings, PaddleMIX conventions, chaining ----------------------------------------
def test_lora_tags_and_embeddings_use_the_flows_folders_as_the_pipeline_does(tiny_sd1_dir, tmp_path, shared_cache,
                                                                            sd_by_hand):
    from safetensors.torch import save_file

    from mixkit.testing.tiny_lora import write_attention_lora
    from pipelines.txt2img import TextToImage

    (tmp_path / "loras").mkdir()
    (tmp_path / "embeddings").mkdir()
    write_attention_lora(sd_by_hand.model.unet, tmp_path / "loras" / "shiny.safetensors", scale=0.5)
    save_file({"emb_params": torch.randn(2, 32, generator=torch.Generator().manual_seed(0))},
              str(tmp_path / "embeddings" / "glowstyle.safetensors"))
    folders = dict(lora_dir=tmp_path / "loras", embeddings_dir=tmp_path / "embeddings")
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32,
                   **folders, **SD_FAST)
    prompt = "a cat, glowstyle <lora:shiny:0.8>"
    by_hand = TextToImage(sd_by_hand.model, **folders)(prompt=prompt, width=32, height=32, **SD_FAST)
    assert "Lora hashes" in by_hand.infotexts[0] and "TI hashes" in by_hand.infotexts[0]
    assert np.array_equal(pixels(flow(prompt=prompt)["result"]), pixels(by_hand.images[0]))
    plain = flow(prompt="a cat, glowstyle")["result"]
    assert not np.array_equal(pixels(plain), pixels(by_hand.images[0]))  # the LoRA acted
    # Another flow on the same cached model without the folders is unaffected (the LoRA was removed after the call).
    other = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32, **SD_FAST)
    assert np.array_equal(pixels(other(prompt="a cat")["result"]),
                          pixels(sd_by_hand(prompt="a cat", width=32, height=32, **SD_FAST).images[0]))


def test_dual_guided_generation_takes_a_single_image_as_paddlemix_passes_it(tiny_sd1_dir, photo, shared_cache):
    flow = Appflow("dual_text_and_image_guided_generation", models=[tiny_sd1_dir], cache=shared_cache,
                   text_to_image_strength=0.5, **SD_FAST)
    single = flow(prompt="a red car", image=photo)  # PaddleMIX README: app(prompt=prompt, image=image)
    assert np.array_equal(pixels(single["result"]), pixels(flow(prompt="a red car", images=[photo])["result"]))
    with pytest.raises(TypeError, match="got both image= and images="):
        flow(prompt="x", image=photo, images=[photo])


def test_text_to_image_chains_into_image_to_image(tiny_sd1_dir, shared_cache, sd_by_hand):
    from appflow import Chain, Step

    chain = Chain("draft_then_refine", [Step("text_to_image", id="draft"),
                                        Step("image_to_image", id="refine", inputs={"prompt": "prompt"})],
                  inputs=["prompt"])
    result = Appflow(chain, models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32, **SD_FAST)(
        prompt="a cat")
    draft = sd_by_hand(prompt="a cat", width=32, height=32, **SD_FAST).images[0]
    assert np.array_equal(pixels(result["images"][0]), pixels(draft))
    refined = by_hand_img2img(sd_by_hand, prompt="a cat", init_images=[draft], width=32, height=32,
                              denoising_strength=0.75, **SD_FAST)
    assert np.array_equal(pixels(result["result"]), pixels(refined))


def test_upscaling_takes_cfg_scale_or_guidance_scale_and_a_random_seed_by_default(tiny_x4_dir):
    from pipelines.upscale import SDx4Upscaler, upscale_image

    small = Image.new("RGB", (12, 10), (200, 100, 50))
    flow = Appflow("image2image_text_guided_upscaling", models=[tiny_x4_dir], cache=ModelCache(), steps=2,
                   guidance_scale=4.0)
    assert flow.tasks["upscale"].settings["seed"] == -1
    drawn = flow(image=small, prompt="a photo")  # seed -1: drawn, as the SD apps do, and given back
    assert drawn["result"].size == (48, 40) and isinstance(drawn["seed"], int) and drawn["seed"] >= 0
    assert np.array_equal(pixels(flow(image=small, prompt="a photo", seed=drawn["seed"])["result"]),
                          pixels(drawn["result"]))
    by_hand = upscale_image(small, 4, upscaler=SDx4Upscaler.from_pretrained(tiny_x4_dir, prompt="a photo", steps=2,
                                                                             guidance_scale=4.0, seed=3))
    assert np.array_equal(pixels(flow(image=small, prompt="a photo", seed=3)["result"]), pixels(by_hand))
    assert np.array_equal(pixels(flow(image=small, prompt="a photo", seed=3, cfg_scale=4.0)["result"]),
                          pixels(by_hand))


def test_auto_label_names_the_image_file_in_the_labelme_json(tiny_blip2_dir, tiny_dino_dir, tiny_sam_dir, photo,
                                                              shared_cache, tmp_path):
    """LabelMe opens the picture from imagePath (imageData is null): it was "" for an image given as a file, so the
    JSON could not be opened in LabelMe; now the file's name, for the JSON saved next to it as LabelMe saves it."""
    photo.save(tmp_path / "street.png")
    flow = Appflow("auto_label", models=[tiny_blip2_dir, tiny_dino_dir, tiny_sam_dir], cache=shared_cache, **KEEP_ALL)
    assert flow(image=tmp_path / "street.png")["annotation"]["imagePath"] == "street.png"
    assert flow(image=str(tmp_path / "street.png"))["annotation"]["imagePath"] == "street.png"
    assert flow(image=photo)["annotation"]["imagePath"] == ""  # an image in memory has no file to name
    assert flow(image=tmp_path / "street.png", image_path="../images/street.png")["annotation"]["imagePath"] == \
        "../images/street.png"  # the option still wins


def test_a_flow_applies_hypernetwork_tags_from_its_folder(tiny_sd1_dir, shared_cache, tmp_path):
    from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork

    write_a1111_hypernetwork(tmp_path / "anime.pt", widths=(32, 64))
    flow = Appflow("text2image_generation", models=[tiny_sd1_dir], cache=shared_cache, width=32, height=32,
                   hypernetwork_dir=tmp_path, **SD_FAST)
    plain = pixels(flow(prompt="a cat")["result"])
    assert not np.array_equal(pixels(flow(prompt="a cat <hypernet:anime:1>")["result"]), plain)
    assert np.array_equal(pixels(flow(prompt="a cat <hypernet:anime:0>")["result"]), plain)
