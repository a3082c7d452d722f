"""load_vlm on folders written by save_modular_vlm: caption/answer equal calling the modular model by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.errors import ModelNotFoundError
from mixkit.models.vlm import load_vlm, save_modular_vlm
from mixkit.models.vlm.modular import VisionLanguageModel
from mixkit.models.vlm.modular_family import ModularVlmAdapter
from tests.mixkit.models.vlm.conftest import tiny_modular_blip2

QUESTION = "what colour is the circle?"


def circle(colour=(255, 0, 0), size=(48, 40)) -> Image.Image:
    yy, xx = np.mgrid[:size[1], :size[0]]
    pixels = np.full((size[1], size[0], 3), 255, dtype=np.uint8)
    pixels[(xx - size[0] / 2) ** 2 + (yy - size[1] / 2) ** 2 < 100] = colour
    return Image.fromarray(pixels)


def by_hand(folder, images, text: str, max_new_tokens: int) -> list[str]:
    """The reference path: transformers' BLIP image processor, the saved tokenizer, model.generate, one at a time."""
    from transformers import AutoTokenizer, BlipImageProcessor

    model = VisionLanguageModel.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    processor = BlipImageProcessor(size={"height": 30, "width": 30}, image_mean=[0.48145466, 0.4578275, 0.40821073],
                                   image_std=[0.26862954, 0.26130258, 0.27577711])
    answers = []
    for image in images:
        pixels = processor(image, return_tensors="pt")["pixel_values"]
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        output = model.generate(pixels, ids, max_new_tokens=max_new_tokens, eos_token_id=3, pad_token_id=0)
        answers.append(tokenizer.decode(output[0], skip_special_tokens=True).strip())
    return answers


def test_folder_layout_and_family(tiny_modular_blip2_dir):
    names = sorted(p.name for p in tiny_modular_blip2_dir.iterdir())
    assert names == ["config.json", "mixkit_vlm.json", "model.safetensors", "tokenizer"]
    model = load_vlm(tiny_modular_blip2_dir)
    assert isinstance(model, ModularVlmAdapter) and model.family == "modular"
    assert model.processor.task.image_size == 30 and model.question_format == "Question: {} Short answer:"


def test_answer_and_caption_equal_the_model_called_by_hand(tiny_modular_blip2_dir, photos):
    model = load_vlm(tiny_modular_blip2_dir)
    images = [circle(), photos[0]]
    expected = by_hand(tiny_modular_blip2_dir, images, f"Question: {QUESTION} Short answer:", 6)
    assert model.answer(images, [QUESTION] * 2, max_new_tokens=6) == expected
    assert model.caption(images, max_new_tokens=6) == by_hand(tiny_modular_blip2_dir, images, "", 6)
    assert model.caption(images, "a photo of", max_new_tokens=6) == by_hand(tiny_modular_blip2_dir, images,
                                                                             "a photo of", 6)
    assert any(expected), "a random tiny model that only ever emits [EOS] would make this test vacuous"


@pytest.mark.parametrize("kind", ["gpt2", "opt", "t5"])
def test_batch_equals_singles(kind, tmp_path, photos):
    model, tokenizer = tiny_modular_blip2(kind, seed=1)
    folder = save_modular_vlm(model, tmp_path / kind, tokenizer=tokenizer, caption_prompt="a picture of")
    vlm = load_vlm(folder)
    assert vlm.decoder_only is (kind != "t5")
    images = photos[:3]
    questions = [QUESTION, "which shape is it on the white background?", "a"]  # ragged: padding is exercised
    batch = vlm.answer(images, questions, max_new_tokens=5)
    assert batch == [vlm.answer([i], [q], max_new_tokens=5)[0] for i, q in zip(images, questions)]
    captions = vlm.caption(images, max_new_tokens=5)
    assert captions == [vlm.caption([image], max_new_tokens=5)[0] for image in images]
    assert captions == by_hand(folder, images, "a picture of", 5)


def test_padding_side_follows_the_language_model(tmp_path):
    for kind, side in (("opt", "left"), ("t5", "right")):
        model, tokenizer = tiny_modular_blip2(kind)
        vlm = load_vlm(save_modular_vlm(model, tmp_path / kind, tokenizer=tokenizer))
        inputs = vlm._model_inputs([circle(), circle()], ["a", "what colour is it"])
        padded_column = 0 if side == "left" else -1
        assert inputs["attention_mask"][:, padded_column].tolist() == [0, 1]


def test_bf16_keeps_the_qformer_in_fp32(tiny_modular_blip2_dir):
    vlm = load_vlm(tiny_modular_blip2_dir, dtype="bf16")
    assert vlm.model.bridge.qformer.input_norm.weight.dtype == torch.float32
    assert vlm.model.language_model.get_input_embeddings().weight.dtype == torch.bfloat16
    assert len(vlm.answer([circle()], [QUESTION], max_new_tokens=3)) == 1


def test_eager_attention_gives_the_same_answers(tiny_modular_blip2_dir, photos):
    sdpa = load_vlm(tiny_modular_blip2_dir).caption(photos, max_new_tokens=4)
    eager = load_vlm(tiny_modular_blip2_dir, attn_implementation="eager")
    assert eager.model.bridge.qformer.layers[0].self_attention.implementation == "eager"
    assert eager.caption(photos, max_new_tokens=4) == sdpa


def test_plain_save_pretrained_folder_names_the_helper(tmp_path):
    model, _ = tiny_modular_blip2("gpt2")
    model.save_pretrained(tmp_path)
    with pytest.raises(ModelNotFoundError, match="save_modular_vlm"):
        load_vlm(tmp_path)


def test_missing_tokenizer_folder_is_named(tiny_modular_blip2_dir, tmp_path):
    import shutil

    broken = shutil.copytree(tiny_modular_blip2_dir, tmp_path / "broken")
    shutil.rmtree(broken / "tokenizer")
    with pytest.raises(ModelNotFoundError, match="no tokenizer/ folder"):
        load_vlm(broken)


def test_wrong_question_count_is_refused(tiny_modular_blip2_dir):
    with pytest.raises(ValueError, match="2 images and 1 questions"):
        load_vlm(tiny_modular_blip2_dir).answer([circle(), circle()], [QUESTION])


def test_instructblip_import_saved_and_loaded_feeds_the_question_to_the_qformer(tmp_path, photos):
    from transformers import AutoProcessor, InstructBlipForConditionalGeneration

    from mixkit.models.vlm.modular import from_hf_instructblip
    from mixkit.testing.tiny_vlm import build_tiny_instructblip

    hf_folder = build_tiny_instructblip(tmp_path / "hf", seed=0)
    processor = AutoProcessor.from_pretrained(hf_folder)
    modular = from_hf_instructblip(InstructBlipForConditionalGeneration.from_pretrained(hf_folder).eval())
    folder = save_modular_vlm(modular, tmp_path / "modular", tokenizer=processor.tokenizer,
                              qformer_tokenizer=processor.qformer_tokenizer)
    assert (folder / "qformer_tokenizer").is_dir()
    vlm = load_vlm(folder)
    questions = ["what is in the picture?", "what color is the car?"]
    answers = vlm.answer(photos[:2], questions, max_new_tokens=4)
    assert answers == [vlm.answer([i], [q], max_new_tokens=4)[0] for i, q in zip(photos[:2], questions)]
    pixels = processor.image_processor(photos[:1], return_tensors="pt")["pixel_values"]
    prompt = f"Question: {questions[0]} Short answer:"
    by_hand = modular.generate(pixels, torch.tensor([processor.tokenizer(prompt)["input_ids"]]),
                               instruction_ids=torch.tensor([processor.qformer_tokenizer(prompt)["input_ids"]]),
                               max_new_tokens=4, eos_token_id=processor.tokenizer.eos_token_id,
                               pad_token_id=processor.tokenizer.pad_token_id)
    assert answers[0] == processor.tokenizer.decode(by_hand[0], skip_special_tokens=True).strip()


def test_instruction_aware_model_needs_its_qformer_tokenizer(tmp_path):
    from transformers import InstructBlipForConditionalGeneration

    from mixkit.models.vlm.modular import from_hf_instructblip
    from mixkit.testing.tiny_vlm import build_tiny_instructblip, tiny_byte_bpe_tokenizer

    modular = from_hf_instructblip(InstructBlipForConditionalGeneration.from_pretrained(
        build_tiny_instructblip(tmp_path / "hf", seed=0)))
    with pytest.raises(ValueError, match="qformer_tokenizer="):
        save_modular_vlm(modular, tmp_path / "modular", tokenizer=tiny_byte_bpe_tokenizer())


def test_llava_import_saved_and_loaded_answers_like_transformers_llava(tmp_path):
    """Peer oracle: the same tiny LLaVA through transformers (LlavaAdapter) and as a modular folder."""
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    from mixkit.models.vlm.modular import from_hf_llava
    from mixkit.models.vlm.templates import LLAVA_CAPTION_PROMPT, LLAVA_CHAT_FORMAT
    from mixkit.testing.tiny_vlm import build_tiny_llava

    hf_folder = build_tiny_llava(tmp_path / "hf", seed=0)
    processor = AutoProcessor.from_pretrained(hf_folder)
    image_processor = processor.image_processor
    modular = from_hf_llava(LlavaForConditionalGeneration.from_pretrained(hf_folder).eval())
    folder = save_modular_vlm(modular, tmp_path / "modular", tokenizer=processor.tokenizer,
                              image_mean=image_processor.image_mean, image_std=image_processor.image_std,
                              caption_prompt=LLAVA_CHAT_FORMAT.format(LLAVA_CAPTION_PROMPT), vqa_template=LLAVA_CHAT_FORMAT)
    ours, theirs = load_vlm(folder), load_vlm(hf_folder)
    assert ours.image_token_count == 25  # 5 x 5 patches, CLS dropped ("default" strategy)
    # Square images: LLaVA's shortest-edge resize + centre crop is then the same square resize.
    rng = np.random.default_rng(4)
    images = [Image.fromarray(rng.integers(0, 256, (s, s, 3), dtype=np.uint8)) for s in (30, 45, 60)]
    questions = ["what is in the picture?", "describe the image in detail", "a"]
    expected = theirs.answer(images, questions, max_new_tokens=5)
    assert ours.answer(images, questions, max_new_tokens=5) == expected
    assert ours.caption(images, max_new_tokens=5) == theirs.caption(images, max_new_tokens=5)
    assert any(expected)
    with pytest.raises(ValueError, match="image token 2 times"):
        ours.answer(images[:1], ["<image> twice"])
