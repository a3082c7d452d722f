"""A1111's LoRA side-car `NAME.json`: activation text, preferred weight and negative text on cards and in the API.

A1111 1.10 (`ui_extra_networks_lora.create_item`, `extra_networks.get_user_metadata`): the card's prompt is
`<lora:ALIAS:preferred weight>` (the default multiplier 1 when unset or 0) followed by " " + activation text; the
negative text goes to the negative prompt (`extraNetworks.js` `cardClicked`: when `textToAddNegative` is set, the
prompt text goes to the tab's prompt and the negative text to its negative prompt); a second click removes the tag
with its activation text (`tryToRemoveExtraNetworkFromPrompt`) and the negative text (`updatePromptArea`).
"""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import save_file

from mixkit.lora import LoraLibrary
from webui.lora_cards import CardText, card_text, lora_cards, read_user_metadata
from webui.ui.lora_tab import card_text_for, click_card


def write_lora(path, alias: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(1, 1)}, str(path),
              metadata={"ss_output_name": alias} if alias else None)


def write_sidecar(path, data) -> None:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


@pytest.fixture()
def folder(tmp_path):
    root = tmp_path / "loras"
    write_lora(root / "ink.v2.safetensors", alias="inkwash")
    write_sidecar(root / "ink.v2.json", {"description": "", "sd version": "SDXL", "activation text": "inkwash style",
                                         "preferred weight": 0.7, "negative text": "photo, 3d", "notes": ""})
    write_lora(root / "plain.safetensors")
    write_lora(root / "broken.safetensors")
    write_sidecar(root / "broken.json", "{not json")
    write_lora(root / "odd.safetensors")
    write_sidecar(root / "odd.json", {"preferred weight": "strong", "activation text": ["a", "b"]})
    return root


def test_cards_read_the_sidecar_and_insert_what_a1111_inserts(folder):
    cards = {card.name: card for card in lora_cards(LoraLibrary(folder))}
    ink = cards["ink.v2"]
    assert ink.text == CardText(0.7, "inkwash style", "photo, 3d")
    assert ink.text.prompt_text("inkwash") == "<lora:inkwash:0.7> inkwash style"
    assert ink.base_model == "SDXL"  # A1111: the side-car's "sd version" wins over the header's guess
    assert ink.warnings == []
    assert cards["plain"].text == CardText() and cards["plain"].prompt_tag == "<lora:plain:1>"


def test_a_broken_sidecar_leaves_the_card_usable_with_a_warning(folder):
    cards = {card.name: card for card in lora_cards(LoraLibrary(folder))}
    assert cards["broken"].text == CardText()
    assert any("broken.json is not valid JSON" in w for w in cards["broken"].warnings)
    assert cards["odd"].text == CardText()
    assert any("'strong' is not a number" in w for w in cards["odd"].warnings)
    assert any("'activation text' must be text" in w for w in cards["odd"].warnings)


def test_zero_preferred_weight_means_the_default_multiplier():
    assert card_text({"preferred weight": 0})[0].prompt_text("x") == "<lora:x:1>"
    text = card_text({"preferred weight": 1.25, "activation text": " trig "})[0]
    assert text.prompt_text("x") == "<lora:x:1.25> trig"


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_sidecar_linking_outside_the_folder_is_not_read(tmp_path):
    root = tmp_path / "loras"
    write_lora(root / "leak.safetensors")
    secret = tmp_path / "secret.json"
    write_sidecar(secret, {"activation text": "SECRET"})
    (root / "leak.json").symlink_to(secret)
    data, warnings = read_user_metadata(root / "leak.safetensors", root)
    assert data == {} and "outside the LoRA folder" in warnings[0]


def test_a_click_adds_tag_activation_and_negative_text_and_a_second_click_removes_them(folder):
    library = LoraLibrary(folder)
    text = card_text_for(library, "inkwash")  # the card's tag name (alias) resolves to its file and side-car
    prompts = ["a cat", "blurry", "", ""]
    once = click_card("txt2img negative prompt", "inkwash", text, prompts)  # the negative box was chosen
    assert once == ["a cat <lora:inkwash:0.7> inkwash style", "blurry photo, 3d", "", ""]
    assert click_card("txt2img prompt", "inkwash", text, once) == prompts
    # A tag the user re-weighted is still removed with its activation text.
    assert click_card("txt2img prompt", "inkwash", text, ["a cat <lora:inkwash:0.3> inkwash style, red", "photo, 3d",
                                                          "", ""]) == ["a cat, red", "", "", ""]


def test_a_card_without_negative_text_goes_to_the_chosen_box(folder):
    library = LoraLibrary(folder)
    text = card_text_for(library, "plain")
    clicked = click_card("img2img negative prompt", "plain", text, ["", "", "", "ugly"])
    assert clicked == ["", "", "", "ugly <lora:plain:1>"]
    assert card_text_for(library, "no-such-lora") == CardText()


def test_the_api_lists_the_sidecar_as_user_metadata(folder, tmp_path):
    from starlette.testclient import TestClient

    from webui.config import ServerConfig
    from webui.server import build_app
    from webui.server_state import ServerState

    (tmp_path / "models").mkdir()
    state = ServerState(ServerConfig(models_dir=str(tmp_path / "models"), output_dir=str(tmp_path / "out"), ui=False,
                                     lora_dir=str(folder)))
    try:
        # a loopback Host, as a browser on this machine sends (webui.origin_guard refuses "testserver")
        with TestClient(build_app(state), base_url="http://localhost") as client:
            listed = {item["name"]: item for item in client.get("/sdapi/v1/loras").json()}
    finally:
        state.close()
    assert listed["ink.v2"]["user_metadata"]["activation text"] == "inkwash style"
    assert listed["ink.v2"]["user_metadata"]["preferred weight"] == 0.7
    assert listed["plain"]["user_metadata"] == {} and listed["broken"]["user_metadata"] == {}
