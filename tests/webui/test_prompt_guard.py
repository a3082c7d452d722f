"""`webui.prompt_guard`: LoRA tags over the network name library entries; other kinds open no file."""

import pytest

from webui.prompt_guard import check_prompt_networks


def test_the_api_guard_lets_a_hypernetwork_tag_through():
    check_prompt_networks("prompt", "a <hypernet:x:1>", set())  # removed and warned about by the pipeline
    with pytest.raises(ValueError, match="no LoRA named 'x'"):
        check_prompt_networks("prompt", "a <lora:x:1>", set())
