"""The strict parser of the dialog-editing LLM reply."""

from __future__ import annotations

import pytest

from appflow.tasks.dialog import EDIT_PROMPT, EditReplyError, parse_edit_reply


@pytest.mark.parametrize("reply, expected", [
    ('{"what": "dog", "into": "a cat"}', ("dog", "a cat")),
    ('Sure. {"what": " red car ", "into": "a blue bike"} Anything else?', ("red car", "a blue bike")),
    ('{"into": "a cat", "what": "dog", "extra": 1}', ("dog", "a cat")),
])
def test_valid_replies_give_what_and_into(reply, expected):
    assert parse_edit_reply(reply) == expected


@pytest.mark.parametrize("reply, problem", [
    ("turn the dog into a cat", "contains no JSON object"),
    ('{"what": "dog", "into": ', "JSON is malformed"),
    ('{"what": "dog"}', 'lacks non-empty string values for "what" and "into"'),
    ('{"what": "", "into": "a cat"}', 'lacks non-empty string values'),
    ('{"what": 3, "into": "a cat"}', 'lacks non-empty string values'),
    ('["dog", "a cat"]', "contains no JSON object"),
])
def test_unusable_replies_raise_a_clear_error_quoting_the_reply(reply, problem):
    with pytest.raises(EditReplyError) as error:
        parse_edit_reply(reply)
    assert problem in str(error.value)
    assert repr(reply[:200]) in str(error.value)
    assert "the image was not modified" in str(error.value)


def test_the_prompt_ends_where_the_model_should_continue():
    filled = EDIT_PROMPT.replace("<instruction>", "make it snow")
    assert filled.endswith("Instruction: make it snow\nReply:")
    # the worked examples in the prompt must themselves parse
    for line in EDIT_PROMPT.splitlines():
        if line.startswith("Reply: {"):
            parse_edit_reply(line)
