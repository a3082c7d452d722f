"""caption()/answer() pass generation options with transformers' meaning; k sequences come back per image.

Oracle: transformers' own `generate` on the same tiny weights (processor inputs for T5; mixkit's
model inputs for OPT, whose tiny tokenizer lacks the BOS the real one adds, see test_families).
"""

from __future__ import annotations

import pytest
import torch

from mixkit.models.vlm.generative import DEFAULT_MAX_NEW_TOKENS, generation_options


def transformers_texts(vlm, inputs: dict, **generation) -> list[str]:
    """`model.generate(**inputs, **generation)` decoded as a transformers user would (new tokens only)."""
    with torch.no_grad():
        output = vlm.model.generate(**inputs, **generation)
    if vlm.decoder_only:
        output = output[:, inputs["input_ids"].shape[1]:]
    return [text.strip() for text in vlm.processor.tokenizer.batch_decode(output, skip_special_tokens=True)]


@pytest.mark.parametrize("user, expected", [
    ({}, {"do_sample": False, "num_beams": 1, "max_new_tokens": DEFAULT_MAX_NEW_TOKENS}),
    ({"max_length": 5}, {"do_sample": False, "num_beams": 1, "max_length": 5}),
    ({"max_new_tokens": 3, "num_beams": 2}, {"do_sample": False, "num_beams": 2, "max_new_tokens": 3}),
    ({"max_length": None}, {"do_sample": False, "num_beams": 1, "max_length": None,
                            "max_new_tokens": DEFAULT_MAX_NEW_TOKENS}),
    ({"generation_config": "cfg"}, {"generation_config": "cfg"}),
])
def test_default_length_only_where_the_user_set_none(user, expected):
    assert generation_options(user) == expected


@pytest.mark.parametrize("extra", [3, 12])
def test_opt_caption_honours_max_length_like_transformers(blip2_opt, photos, extra):
    inputs = blip2_opt._model_inputs([photos[0]], ["a photo of"])
    max_length = inputs["input_ids"].shape[1] + extra  # decoder-only: max_length counts the prompt too
    expected = transformers_texts(blip2_opt, inputs, max_length=max_length, do_sample=False)
    got = blip2_opt.caption([photos[0]], "a photo of", max_length=max_length)
    assert got == expected
    default = blip2_opt.caption([photos[0]], "a photo of")
    assert len(blip2_opt.processor.tokenizer(got[0], add_special_tokens=False)["input_ids"]) <= extra
    assert got != default or extra >= DEFAULT_MAX_NEW_TOKENS  # max_length changed the length


def test_t5_answer_honours_max_length_like_the_processor_path(blip2_t5, photos):
    inputs = blip2_t5.processor(images=photos[1], text="Question: what is it? Short answer:", return_tensors="pt")
    for max_length in (3, 30):
        expected = transformers_texts(blip2_t5, dict(inputs), max_length=max_length, do_sample=False)
        assert blip2_t5.answer([photos[1]], ["what is it?"], max_length=max_length) == expected
    assert blip2_t5.answer([photos[1]], ["what is it?"], max_length=3) != blip2_t5.answer([photos[1]], ["what is it?"])


def test_max_length_batch_equals_singles_for_questions_of_different_lengths(blip2_opt, photos):
    questions = ["what?", "what colour is the big round thing in it?", "is it red?"]
    length = blip2_opt._model_inputs([photos[1]], [blip2_opt.question_format.format(questions[1])])["input_ids"].shape[1]
    options = dict(max_length=length + 4)
    batch = blip2_opt.answer(photos[:3], questions, **options)
    assert batch == [blip2_opt.answer([p], [q], **options)[0] for p, q in zip(photos, questions)]


@pytest.mark.parametrize("adapter", ["blip2_opt", "blip2_t5"])
def test_num_return_sequences_gives_one_list_per_image(adapter, request, photos):
    vlm = request.getfixturevalue(adapter)
    options = dict(num_beams=3, num_return_sequences=2, max_new_tokens=4)
    got = vlm.caption(photos[:3], "a photo of", **options)
    assert len(got) == 3 and all(isinstance(texts, list) and len(texts) == 2 for texts in got)
    for image, texts in zip(photos[:3], got):
        inputs = vlm._model_inputs([image], ["a photo of"])
        assert texts == transformers_texts(vlm, inputs, do_sample=False, **options)  # best beam first
    assert vlm.caption(photos[:2], num_return_sequences=1, max_new_tokens=3) == vlm.caption(photos[:2], max_new_tokens=3)


@pytest.mark.parametrize("options, match", [
    (dict(num_return_sequences=0), "num_return_sequences must be a positive integer.*got 0"),
    (dict(num_return_sequences=2.0), "num_return_sequences must be a positive integer"),
    (dict(num_return_sequences=3, num_beams=2), "num_return_sequences=3 needs num_beams >= 3.*or do_sample=True"),
    (dict(num_return_sequences=2), "num_return_sequences=2 needs num_beams >= 2.*got num_beams=1"),
])
def test_impossible_return_counts_are_refused(blip2_opt, photos, options, match):
    with pytest.raises(ValueError, match=match):
        blip2_opt.caption(photos[:1], **options)


@pytest.mark.parametrize("options, match", [
    (dict(num_beams=2.5), r"num_beams must be an integer >= 1, got 2.5"),  # was a TypeError from repeat_interleave
    (dict(max_new_tokens=0), r"max_new_tokens must be an integer >= 1, got 0"),
    (dict(top_k=-1), r"top_k must be an integer >= 0, got -1"),
    (dict(min_new_tokens="3"), r"min_new_tokens must be an integer >= 0, got '3'"),
])
def test_counts_that_are_no_integers_are_refused_naming_the_option(blip2_opt, photos, options, match):
    with pytest.raises(ValueError, match=match):
        blip2_opt.caption(photos[:1], **options)


def test_numpy_counts_are_taken_as_the_integers_they_are(blip2_opt, photos):
    import numpy as np

    assert generation_options({"num_beams": np.int64(2)}) == {"do_sample": False, "num_beams": 2,
                                                             "max_new_tokens": DEFAULT_MAX_NEW_TOKENS}
    assert type(generation_options({"num_beams": np.int64(2)})["num_beams"]) is int
    assert blip2_opt.caption(photos[:1], num_beams=np.int64(2), max_new_tokens=np.int32(4)) == \
        blip2_opt.caption(photos[:1], num_beams=2, max_new_tokens=4)
