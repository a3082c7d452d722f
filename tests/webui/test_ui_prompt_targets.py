"""LoRA cards and embeddings go to the prompt chosen under "Add to": txt2img's or img2img's, prompt or negative."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from webui.ui.lora_tab import add_tag
from webui.ui.prompt_targets import TARGETS, insert_into

from .ui_blocks import component, handler


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-targets")
    for name in ("models", "loras", "embeddings"):
        (root / name).mkdir()
    save_file({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.zeros(4, 8),
               "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.zeros(8, 4)},
              str(root / "loras" / "inkstyle.safetensors"))
    save_file({"emb_params": torch.zeros(2, 32)}, str(root / "embeddings" / "shinystyle.safetensors"))
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     lora_dir=str(root / "loras"), embeddings_dir=str(root / "embeddings")))
    blocks = build_ui(state)
    yield blocks
    state.close()


def test_insert_into_changes_only_the_chosen_prompt():
    prompts = ["a", "b", "c", "d"]
    assert insert_into("img2img negative prompt", "<lora:x:1>", prompts, add_tag) == ["a", "b", "c", "d <lora:x:1>"]
    assert insert_into("txt2img prompt", "<lora:x:1>", ["a <lora:x:1>", "", "", ""], add_tag)[0] == "a <lora:x:1>"
    with pytest.raises(ValueError, match="valid ones: txt2img prompt"):
        insert_into("extras", "x", prompts, add_tag)


@pytest.mark.parametrize("target", TARGETS)
def test_a_clicked_lora_card_goes_to_the_chosen_prompt(built, target):
    pick = handler(built, "lora_cards", "select")
    assert [block.elem_id for block in pick.outputs] == ["txt2img_prompt", "txt2img_negative_prompt", "img2img_prompt",
                                                         "img2img_negative_prompt"]
    result = pick.fn(target, ["inkstyle"], "cat", "", "dog", "blurry", SimpleNamespace(index=0))
    expected = ["cat", "", "dog", "blurry"]
    expected[TARGETS.index(target)] = add_tag(expected[TARGETS.index(target)], "<lora:inkstyle:1>")
    assert result == expected
    assert component(built, "lora_target").value == "txt2img prompt"  # A1111's default: the txt2img prompt


def test_a_clicked_embedding_goes_to_the_chosen_prompt(built):
    pick = handler(built, "embedding_cards", "select")
    result = pick.fn("img2img prompt", "cat", "", "dog", "", SimpleNamespace(value=["shinystyle", "1 vectors", "dim"]))
    assert result == ["cat", "", "dog shinystyle", ""]
