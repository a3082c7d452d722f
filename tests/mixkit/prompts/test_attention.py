"""Golden vectors for `parse_prompt_attention`: A1111 v1.10's docstring examples plus cases whose
expected values were produced by running A1111's own function on them."""

import pytest

from mixkit.prompts import parse_prompt_attention

A1111_DOCTESTS = [
    ("normal text", [["normal text", 1.0]]),
    ("an (important) word", [["an ", 1.0], ["important", 1.1], [" word", 1.0]]),
    ("(unbalanced", [["unbalanced", 1.1]]),
    ("\\(literal\\]", [["(literal]", 1.0]]),
    ("(unnecessary)(parens)", [["unnecessaryparens", 1.1]]),
    ("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).",
     [["a ", 1.0], ["house", 1.5730000000000004], [" ", 1.1], ["on", 1.0], [" a ", 1.1], ["hill", 0.55],
      [", sun, ", 1.1], ["sky", 1.4641000000000006], [".", 1.1]]),
]

A1111_OUTPUTS = [
    ("((a))", [["a", 1.2100000000000002]]),
    ("[[a]]", [["a", 0.8264462809917354]]),
    ("([a])", [["a", 1.0]]),
    ("(a:1.3)", [["a", 1.3]]),
    ("(a: 1.3 )", [["a", 1.3]]),
    ("((a:1.5))", [["a", 1.6500000000000001]]),
    ("(a:0)", [["a", 0.0]]),
    ("(a:-1)", [["a", -1.0]]),
    ("(a:+2)", [["a", 2.0]]),
    ("(a:.5)", [["a", 0.5]]),
    ("(a:2.)", [["a", 2.0]]),
    ("(a:nan)", [["a:nan", 1.1]]),  # not a number: the colon is text, the bracket a plain (…)
    ("(a:1e9)", [["a:1e9", 1.1]]),  # exponents are not weights in A1111
    ("\\\\", [["\\", 1.0]]),
    ("\\(a\\)", [["(a)", 1.0]]),
    ("a \\b", [["a b", 1.0]]),  # a backslash before an ordinary character is dropped
    ("a)", [["a)", 1.0]]),
    ("a]", [["a]", 1.0]]),
    ("[a", [["a", 0.9090909090909091]]),
    ("(a", [["a", 1.1]]),
    ("(a]", [["a]", 1.1]]),
    ("[a)", [["a)", 0.9090909090909091]]),
    ("a:b", [["a:b", 1.0]]),
    ("(a:b)", [["a:b", 1.1]]),
    ("(a:b:1.2)", [["a:b", 1.2]]),
    ("a BREAK b", [["a", 1.0], ["BREAK", -1], ["b", 1.0]]),
    ("aBREAK b", [["aBREAK b", 1.0]]),
    ("a break b", [["a break b", 1.0]]),
    ("(a BREAK b)", [["a", 1.1], ["BREAK", -1.1], ["b", 1.1]]),  # A1111: BREAK in brackets is then text
    ("BREAK", [["", 1.0], ["BREAK", -1], ["", 1.0]]),
    ("", [["", 1.0]]),
    ("(a)(b)", [["ab", 1.1]]),
    ("(a)[b]", [["a", 1.1], ["b", 0.9090909090909091]]),
    ("((a)b)", [["a", 1.2100000000000002], ["b", 1.1]]),
    ("(a:1.1)(b)", [["ab", 1.1]]),
    ("[a:b:3]", [["a:b:3", 0.9090909090909091]]),
]


@pytest.mark.parametrize("text, expected", A1111_DOCTESTS + A1111_OUTPUTS)
def test_matches_a1111(text, expected):
    assert parse_prompt_attention(text) == expected


def test_malformed_weight_is_text_instead_of_a1111_crash():
    # A1111 raises ValueError from float("1.2.3"); we keep the text and apply the plain (…) weight.
    assert parse_prompt_attention("(a:1.2.3)") == [["a:1.2.3", 1.1]]


def test_deep_nesting_is_iterative():
    [[text, weight]] = parse_prompt_attention("[" * 5000 + "a" + "]" * 5000)
    assert text == "a" and weight == pytest.approx(1.1 ** -5000, rel=1e-9)


@pytest.mark.parametrize("text", ["(" * 10_000 + "a" + ")" * 10_000, "(a:" + "9" * 400 + ")"])
def test_non_finite_weight_is_a_clear_error(text):
    with pytest.raises(ValueError, match="not a finite number"):
        parse_prompt_attention(text)
