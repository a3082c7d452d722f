import pytest

from mixkit.prompts import ExtraNetworkRequest, extract_extra_networks
from mixkit.prompts.extra_networks import unknown_extra_network_tags, warn_skipped_extra_networks


def test_tags_are_removed_and_returned_in_order():
    text, requests = extract_extra_networks("a cat <lora:foo:0.5>, <lyco:bar:0.2:0.7> red <hypernet:h>")
    assert text == "a cat ,  red "  # only the tags go; surrounding spaces stay, as in A1111
    assert requests == [  # the hypernetwork tag is removed but not applied: no request
        ExtraNetworkRequest("lora", "foo", 0.5, 0.5, "<lora:foo:0.5>"),
        ExtraNetworkRequest("lyco", "bar", 0.2, 0.7, "<lyco:bar:0.2:0.7>"),
    ]


@pytest.mark.parametrize("tag, te, unet, dyn", [
    ("<lora:x>", 1.0, 1.0, None),
    ("<lora:x:0.8>", 0.8, 0.8, None),
    ("<lora:x:0.8:0.3>", 0.8, 0.3, None),
    ("<lora:x:te=0.5:unet=1>", 0.5, 1.0, None),
    ("<lora:x:unet=0.25>", 1.0, 0.25, None),
    ("<lora:x:0.8:unet=0>", 0.8, 0.0, None),
    ("<lora:x:1:1:16>", 1.0, 1.0, 16),
    ("<lora:x:0.5:dyn=8>", 0.5, 0.5, 8),
    ("<lora:x:-1>", -1.0, -1.0, None),
])
def test_weights(tag, te, unet, dyn):
    _, [request] = extract_extra_networks(tag)
    assert (request.name, request.te_weight, request.unet_weight, request.dyn_dim) == ("x", te, unet, dyn)


def test_names_may_contain_spaces_and_dots():
    _, [request] = extract_extra_networks("<lora:my lora v1.5:0.7>")
    assert request.name == "my lora v1.5" and request.te_weight == 0.7


@pytest.mark.parametrize("tag, message", [
    ("<lora:>", "has no name"),
    ("<lora::1>", "has no name"),
    ("<lora:x:abc>", "te weight must be a number, got 'abc'"),
    ("<lora:x:1:nan>", "unet weight must be finite"),
    ("<lora:x:1:1:1.5>", "dyn must be a positive integer"),
    ("<lora:x:1:1:8:9>", "at most 4"),
])
def test_malformed_tags_are_clear_errors(tag, message):
    with pytest.raises(ValueError, match=message) as info:
        extract_extra_networks(f"a {tag} b")
    assert tag in str(info.value)


def test_text_that_is_not_a_tag_stays():
    assert extract_extra_networks("a <3 b > c <x-y:1>") == ("a <3 b > c <x-y:1>", [])


# A1111's `re_extra_net` is `<(\w+):([^>]+)>`: a word (digits too) before the colon, at least one character after it.
@pytest.mark.parametrize("prompt, cleaned, skipped", [
    ("I <3:love> you", "I  you", ["<3:love>"]),  # "3" is a word: a tag of kind "3", as in A1111
    ("a <foo:bar> b", "a  b", ["<foo:bar>"]),
    ("a <hypernet:anime_3:0.8> b", "a  b", ["<hypernet:anime_3:0.8>"]),
    ("a <foo:bar:not a number> b", "a  b", ["<foo:bar:not a number>"]),  # an unknown kind's arguments are not read
    ("a <Lora:x:1> b", "a  b", ["<Lora:x:1>"]),  # kinds are case-sensitive in A1111's registry
    ("a <foo:> b <x-y:1> c <a b:c> <:x>", "a <foo:> b <x-y:1> c <a b:c> <:x>", []),  # not tags: the text stays
    ("a <3 b > c", "a <3 b > c", []),
])
def test_tags_of_unknown_kinds_are_removed_and_listed(prompt, cleaned, skipped):
    assert extract_extra_networks(prompt) == (cleaned, [])
    assert unknown_extra_network_tags(prompt) == skipped


def test_skipped_tags_are_named_in_a_warning_each():
    with pytest.warns(UserWarning) as caught:
        warn_skipped_extra_networks(["<3:love>", "<hypernet:h:1>", "<3:love>"])
    messages = [str(item.message) for item in caught]
    assert len(messages) == 2  # once per tag
    assert messages[0].startswith("prompt: skipping unknown extra network '3': <3:love> removed from the prompt")
    assert "<hypernet:h:1> removed and not applied: no hypernetwork folder is set" in messages[1]
    assert "--hypernetwork-dir" in messages[1]
