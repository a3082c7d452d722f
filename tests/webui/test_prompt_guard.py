"""`webui.prompt_guard`: LoRA tags over the network name library entries; other kinds open no file; malformed tags
are refused before queueing."""

import pytest

from webui.prompt_guard import check_prompt_networks, check_tag_syntax


def test_the_api_guard_lets_a_hypernetwork_tag_through():
    check_prompt_networks("prompt", "a <hypernet:x:1>", set())  # removed and warned about by the pipeline
    with pytest.raises(ValueError, match="no LoRA named 'x'"):
        check_prompt_networks("prompt", "a <lora:x:1>", set())


def test_a_malformed_tag_weight_is_refused_naming_the_field_and_the_fix():
    check_tag_syntax("prompt", "a cat <lora:style:0.5> <hypernet:x:1>")
    with pytest.raises(ValueError) as raised:
        check_tag_syntax("hr_prompt", "a cat <lora:style:abc>")
    assert str(raised.value) == ("hr_prompt: extra network tag '<lora:style:abc>': te weight must be a number, got 'abc'; "
                                 "write weights as numbers, e.g. <lora:name:0.8>.")


def test_hypernetwork_tags_are_checked_against_the_folder_when_there_is_one(tmp_path):
    from mixkit.hypernetworks import HypernetworkLibrary
    from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
    from webui.prompt_guard import check_hypernetwork_tags

    check_hypernetwork_tags("prompt", "a <hypernet:nosuch:x>", None)  # no folder: the pipeline skips it, warning
    write_a1111_hypernetwork(tmp_path / "anime.pt", widths=(8,))
    library = HypernetworkLibrary(tmp_path)
    check_hypernetwork_tags("prompt", "a <hypernet:anime:0.5>", library)
    with pytest.raises(ValueError, match="prompt: hypernetwork 'anime2' not found.*GET /sdapi/v1/hypernetworks"):
        check_hypernetwork_tags("prompt", "a <hypernet:anime2:0.5>", library)
