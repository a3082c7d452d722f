"""BLIP-2 (OPT and T5) through load_vlm: batch == singles, transformers' processor path, backends."""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm import load_vlm
from mixkit.models.vlm.generative import pad_token_rows
from mixkit.runtime.cpu_linear import onednn_linear_available


def test_pad_token_rows_left_and_right():
    ids, mask = pad_token_rows([[5, 6, 7], [8]], 0, "left")
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8]] and mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    ids, mask = pad_token_rows([[5, 6, 7], [8]], 0, "right")
    assert ids.tolist() == [[5, 6, 7], [8, 0, 0]] and mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_t5_batch_equals_singles(blip2_t5, photos):
    """Right padding for the T5 encoder; the OPT (left padding) case is in test_families."""
    model = blip2_t5
    questions = ["what is it?", "what color is the car in the picture?", "two people riding bikes?"]
    batch = model.answer(photos[:3], questions, max_new_tokens=5)
    singles = [model.answer([image], [q], max_new_tokens=5)[0] for image, q in zip(photos, questions)]
    assert batch == singles
    assert model.caption(photos[:2], max_new_tokens=4) == [model.caption([p], max_new_tokens=4)[0] for p in photos[:2]]


def test_t5_answers_match_transformers_processor_and_generate(blip2_t5, tiny_blip2_t5_dir, photos):
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    model = Blip2ForConditionalGeneration.from_pretrained(tiny_blip2_t5_dir).eval()
    processor = Blip2Processor.from_pretrained(tiny_blip2_t5_dir)
    inputs = processor(images=photos[0], text="Question: what is it? Short answer:", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    expected = processor.tokenizer.batch_decode(out, skip_special_tokens=True)[0].strip()
    assert blip2_t5.answer([photos[0]], ["what is it?"], max_new_tokens=6) == [expected]


@pytest.mark.parametrize("implementation", ["eager", "mixkit"])
def test_attention_implementations_generate_like_sdpa(implementation, tiny_blip2_opt_dir, blip2_opt, photos):
    eager = load_vlm(tiny_blip2_opt_dir, attn_implementation=implementation)
    sdpa = blip2_opt  # loaded with the default, "sdpa"
    inputs = sdpa._model_inputs(photos, ["a photo of"] * len(photos))
    with torch.no_grad():
        logits_eager = eager.model(**inputs).logits
        logits_sdpa = sdpa.model(**inputs).logits
    mask = inputs["attention_mask"].bool()
    torch.testing.assert_close(logits_eager[mask], logits_sdpa[mask], atol=1e-5, rtol=1e-4)
    assert eager.caption(photos, max_new_tokens=5) == sdpa.caption(photos, max_new_tokens=5)


def test_question_count_must_match_images(blip2_opt, photos):
    with pytest.raises(ValueError, match="4 images and 2 questions"):
        blip2_opt.answer(photos, ["a?", "b?"])
    with pytest.raises(ValueError, match="cannot classify.*'clip'"):
        blip2_opt.classify(photos, ["cat"])


@pytest.mark.skipif(not onednn_linear_available(), reason="this torch build has no oneDNN linear op")
def test_caption_routes_linears_through_onednn_and_unpatches_them(blip2_opt, photos, monkeypatch):
    """With the bounds lowered so the tiny model's layers and batch qualify, captions are unchanged."""
    from torch import nn

    from mixkit.runtime import cpu_linear

    expected = blip2_opt.caption(photos[:3], max_new_tokens=6)
    calls = []
    real = cpu_linear.onednn_linear
    monkeypatch.setattr(cpu_linear, "MIN_WEIGHT_ELEMENTS", 1)
    monkeypatch.setattr(cpu_linear, "MIN_ROWS", 1)
    monkeypatch.setattr(cpu_linear, "onednn_linear", lambda *a: calls.append(a[0].shape[0]) or real(*a))
    assert blip2_opt.caption(photos[:3], max_new_tokens=6) == expected
    assert 3 in calls  # the batch-of-3 decode steps went through oneDNN
    assert not any("forward" in m.__dict__ for m in blip2_opt.model.modules() if isinstance(m, nn.Linear))


@pytest.mark.parametrize("adds_bos", [False, True], ids=["tokenizer-adds-nothing", "tokenizer-adds-bos"])
def test_opt_prompt_ids_and_texts_match_transformers_processor_and_generate(tiny_blip2_opt_dir, photos, adds_bos):
    """The prompt is tokenized as Blip2Processor does it, with the checkpoint tokenizer's own special tokens: real OPT
    tokenizers put `</s>` first, the tiny one adds nothing (mixkit used to insert text_config.bos_token_id always)."""
    from tokenizers import processors
    from transformers import Blip2ForConditionalGeneration, Blip2Processor

    from mixkit.models.vlm import wrap_vlm

    model = Blip2ForConditionalGeneration.from_pretrained(tiny_blip2_opt_dir).eval()
    processor = Blip2Processor.from_pretrained(tiny_blip2_opt_dir)
    if adds_bos:
        processor.tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
            single="</s> $A", special_tokens=[("</s>", processor.tokenizer.convert_tokens_to_ids("</s>"))])
    vlm = wrap_vlm(model, processor)
    cases = [("", dict(max_new_tokens=8)), ("", dict(max_new_tokens=8, repetition_penalty=1.8)),
             ("a photo of", dict(max_new_tokens=8, num_beams=3, repetition_penalty=1.8)),
             ("Question: what is it? Short answer:", dict(max_new_tokens=6, repetition_penalty=1.8))]
    for prompt, options in cases:
        inputs = processor(images=photos[0], text=prompt, return_tensors="pt")
        assert vlm._model_inputs([photos[0]], [prompt])["input_ids"].tolist() == inputs["input_ids"].tolist()
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=False, **options)[:, inputs["input_ids"].shape[1]:]
        expected = processor.tokenizer.batch_decode(out, skip_special_tokens=True)[0].strip()
        assert vlm.caption([photos[0]], prompt, **options) == [expected], (prompt, options)
    assert vlm.answer([photos[0]], ["what is it?"], max_new_tokens=6, repetition_penalty=1.8) == [expected]
