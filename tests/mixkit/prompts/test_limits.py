import pytest

from mixkit.prompts import MAX_PROMPT_CHARS, check_prompt_text, get_learned_conditioning_prompt_schedules
from mixkit.prompts.limits import bracket_depth


def test_megabyte_prompt_is_refused_before_parsing():
    with pytest.raises(ValueError, match="1,048,576 characters long; the limit is 32,768"):
        get_learned_conditioning_prompt_schedules(["a" * 1_048_576], 20)
    assert check_prompt_text("a" * MAX_PROMPT_CHARS) == "a" * MAX_PROMPT_CHARS


@pytest.mark.parametrize("text, message", [
    ("a\x00b", "NUL character at index 1"),
    ("ab\ud800", "lone surrogate '\\\\ud800' at index 2"),
])
def test_unencodable_text_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        check_prompt_text(text)


def test_type_is_checked():
    with pytest.raises(TypeError, match="must be a str, got bytes"):
        check_prompt_text(b"a")


@pytest.mark.parametrize("text, depth", [("a", 0), ("((a))", 2), ("([a])", 2), ("\\(\\(a", 0), ("))((", 2), ("(a)(b)", 1)])
def test_bracket_depth(text, depth):
    assert bracket_depth(text) == depth
