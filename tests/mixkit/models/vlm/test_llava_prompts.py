"""LLaVA prompts that already hold `<image>` are used as given (appflow hunt finding 9).

transformers' LLaVA docs pass whole prompts ("USER: <image>\\nWhat is shown? ASSISTANT:"); the adapter
wrapped them in its chat template again, so the image token appeared twice and transformers refused.
"""

from __future__ import annotations

import pytest

from mixkit.models.vlm import load_vlm
from mixkit.testing.tiny_vlm import build_tiny_llava


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return load_vlm(build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"), seed=0))


def test_a_full_chat_prompt_captions_as_the_bare_instruction_does(llava, photos):
    bare = llava.caption(photos[:2], "Describe the image.", max_new_tokens=5)
    whole = llava.caption(photos[:2], "USER: <image>\nDescribe the image. ASSISTANT:", max_new_tokens=5)
    assert whole == bare


def test_a_full_chat_question_answers_as_the_bare_question_does(llava, photos):
    bare = llava.answer(photos[:2], ["What is it?", "Which colour?"], max_new_tokens=5)
    whole = llava.answer(photos[:2], ["USER: <image>\nWhat is it? ASSISTANT:", "USER: <image>\nWhich colour? ASSISTANT:"],
                         max_new_tokens=5)
    assert whole == bare


def test_the_prompt_is_the_chat_template_or_the_text_as_given(llava):
    assert llava.question_prompt("Describe.") == "USER: <image>\nDescribe. ASSISTANT:"
    assert llava.question_prompt("USER: <image>\nDescribe. ASSISTANT:") == "USER: <image>\nDescribe. ASSISTANT:"


def test_two_image_tokens_are_refused_in_mixkit_words(llava, photos):
    with pytest.raises(ValueError, match=r"holds the image token '<image>' 2 times; one image per prompt"):
        llava.caption(photos[:1], "<image> and <image>")
