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


def test_a_second_click_on_an_embedding_row_removes_the_name():
    # Browser hunt: the second click left "a red cube mytok" as it was; A1111's card click toggles an embedding's
    # name as it toggles a LoRA tag (extraNetworks.js tryToRemoveExtraNetworkFromPrompt).
    from webui.ui.embeddings_tab import toggle_embedding

    assert toggle_embedding("a cat", "shiny") == "a cat shiny"
    assert toggle_embedding("a cat shiny", "shiny") == "a cat"
    assert toggle_embedding("shiny a cat, shiny red", "shiny") == "a cat, red"
    assert toggle_embedding("a cat shiny2 shiny-v2", "shiny") == "a cat shiny2 shiny-v2 shiny"  # whole names only
    assert toggle_embedding("a myXstyle", "my.style") == "a myXstyle my.style"  # the name is text, not a pattern
    assert toggle_embedding("a (my.style:1.2), red", "my.style") == "a (:1.2), red"  # A1111 leaves the brackets too
    assert toggle_embedding(None, "x") == "x"


def test_clicking_an_embedding_row_twice_in_the_ui_leaves_the_prompt_as_it_was(built):
    pick = handler(built, "embedding_cards", "select")
    row = SimpleNamespace(value=["shinystyle", "2 vectors", "dim 32"])
    once = pick.fn("txt2img negative prompt", "cat", "blurry", "", "", row)
    assert once == ["cat", "blurry shinystyle", "", ""]
    assert pick.fn("txt2img negative prompt", *once, row) == ["cat", "blurry", "", ""]


def test_a_second_click_on_a_lora_card_removes_its_tag_whatever_the_weight():
    # A1111 extraNetworks.js tryToRemoveExtraNetworkFromPrompt: a tag of the same `lora:NAME` is removed (its
    # weight ignored) instead of adding a second one.
    from webui.ui.lora_tab import toggle_lora_tag

    assert toggle_lora_tag("a cat", "style") == "a cat <lora:style:1>"
    assert toggle_lora_tag("a cat <lora:style:0.5>", "style") == "a cat"
    assert toggle_lora_tag("<lora:style:1> a cat, red", "style") == "a cat, red"
    assert toggle_lora_tag("a cat <lora:style:0.5:te=1>, red", "style") == "a cat, red"
    assert toggle_lora_tag("a cat <lora:style2:1>", "style") == "a cat <lora:style2:1> <lora:style:1>"
    assert toggle_lora_tag("a cat <lora:my lora (v2):1>", "my lora (v2)") == "a cat"
    assert toggle_lora_tag(None, "x") == "<lora:x:1>"


def lora_file(path, alias: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": torch.zeros(4, 8),
               "lora_unet_down_blocks_0_attentions_0_proj_in.lora_up.weight": torch.zeros(8, 4)}, str(path),
              metadata={"ss_output_name": alias} if alias else None)


def test_a_card_in_a_subfolder_inserts_the_name_a1111_resolves(tmp_path):
    # A1111 inserts the alias (ss_output_name, else the file stem) and falls back to the file name when the alias
    # is ambiguous (extensions-builtin/Lora/network.py get_alias); it does not resolve `sub/detail`. Here the
    # relative name is used only when nothing shorter resolves to the very same file.
    from mixkit.lora import LoraLibrary
    from webui.ui.lora_tab import card_items

    lora_file(tmp_path / "sub" / "detail.safetensors")
    lora_file(tmp_path / "a" / "twin.safetensors")
    lora_file(tmp_path / "b" / "twin.safetensors")
    lora_file(tmp_path / "styles" / "v2_final.safetensors", alias="inkwash")
    lora_file(tmp_path / "x" / "shared.safetensors", alias="dup")
    lora_file(tmp_path / "y" / "other.safetensors", alias="dup")
    library = LoraLibrary(tmp_path)
    _, names = card_items(library)
    entries = library.entries()
    assert dict(zip([e.relative_name for e in entries], names)) == {
        "sub/detail": "detail", "a/twin": "a/twin", "b/twin": "b/twin", "styles/v2_final": "inkwash",
        "x/shared": "shared", "y/other": "other"}
    for entry, name in zip(entries, names):  # every inserted name resolves to its own file
        assert library.resolve_name(name) == entry.path.resolve()


def test_clicking_a_card_twice_in_the_ui_leaves_the_prompt_as_it_was(built):
    pick = handler(built, "lora_cards", "select")
    once = pick.fn("txt2img prompt", ["inkstyle"], "a cat <lora:inkstyle:0.5>", "", "", "", SimpleNamespace(index=0))
    assert once[0] == "a cat"
    twice = pick.fn("txt2img prompt", ["inkstyle"], once[0], "", "", "", SimpleNamespace(index=0))
    assert twice[0] == "a cat <lora:inkstyle:1>"
