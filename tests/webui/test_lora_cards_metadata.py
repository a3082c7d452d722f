"""`/sdapi/v1/loras` metadata as A1111 serves it: values that start with "{" are JSON objects.

A1111 1.10 (`sd_models.read_metadata_from_safetensors`, which `NetworkOnDisk.metadata` comes from) decodes a value
starting with "{" and keeps it a string when it does not parse; every other value stays the string it is stored as.
"""

from __future__ import annotations

import json

import torch
from safetensors.torch import save_file

from mixkit.lora import LoraLibrary
from webui.lora_cards import lora_cards

TAGS = {"10_ink": {"ink": 3, "castle": 1}}
STORED = {
    "ss_tag_frequency": json.dumps(TAGS),
    "ss_network_args": json.dumps({"conv_dim": "4"}),
    "ss_datasets": json.dumps([{"resolution": [512, 512]}]),  # a list: A1111 decodes only "{" values
    "ss_network_dim": "4",
    "ss_training_comment": "{not json",
}


def test_loras_metadata_decodes_json_objects_as_a1111(tmp_path):
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}, str(tmp_path / "ink.safetensors"), metadata=STORED)
    [card] = lora_cards(LoraLibrary(tmp_path))
    metadata = card.as_a1111()["metadata"]
    assert metadata == {
        "ss_tag_frequency": TAGS,
        "ss_network_args": {"conv_dim": "4"},
        "ss_datasets": STORED["ss_datasets"],
        "ss_network_dim": "4",
        "ss_training_comment": "{not json",
    }
    assert card.metadata == STORED  # the card keeps the header's strings; only the A1111 item is decoded


def test_a_preferred_weight_no_float_holds_is_warned_about_and_skipped():
    """A 400-digit "preferred weight" in a side-car (float() raised OverflowError, failing the whole card list)."""
    from webui.lora_cards import card_text

    texts, warnings = card_text({"preferred weight": 10 ** 400})
    assert len(warnings) == 1 and warnings[0].startswith('side-car "preferred weight" 1000')
    assert warnings[0].endswith("is not a number; 1 is used")
    assert texts == card_text({})[0]
