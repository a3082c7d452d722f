"""The Hypernetworks tab: one card per file of `--hypernetwork-dir`; a click toggles `<hypernet:name:1>` in the
prompt chosen under "Add to", as A1111's extra-network card does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from webui.ui.hypernetwork_tab import toggle_hypernet_tag

from .ui_blocks import component, handler


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-hypernetworks")
    (root / "models").mkdir()
    write_a1111_hypernetwork(root / "hypernetworks" / "anime.pt", widths=(8,))
    write_a1111_hypernetwork(root / "hypernetworks" / "ink.pt", widths=(8,))
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     hypernetwork_dir=str(root / "hypernetworks")))
    yield build_ui(state)
    state.close()


def test_a_click_adds_the_tag_and_a_second_removes_it_whatever_its_strength():
    assert toggle_hypernet_tag("a cat", "anime") == "a cat <hypernet:anime:1>"
    assert toggle_hypernet_tag("a cat <hypernet:anime:0.4>", "anime") == "a cat"
    assert toggle_hypernet_tag("a <hypernet:anime> cat", "anime") == "a cat"
    assert toggle_hypernet_tag("a <hypernet:anime_2:1>", "anime") == "a <hypernet:anime_2:1> <hypernet:anime:1>"
    assert toggle_hypernet_tag(None, "a.b") == "<hypernet:a.b:1>"


def test_a_clicked_card_goes_to_the_chosen_prompt(built):
    pick = handler(built, "hypernetwork_cards", "select")
    names = ["anime", "ink"]
    result = pick.fn("img2img prompt", names, "cat", "", "dog", "blurry", SimpleNamespace(index=1))
    assert result == ["cat", "", "dog <hypernet:ink:1>", "blurry"]
    assert component(built, "hypernetwork_target").value == "txt2img prompt"


def test_cards_are_the_folders_files_in_a1111s_order(tmp_path):
    from mixkit.hypernetworks import HypernetworkLibrary
    from webui.ui.hypernetwork_tab import hypernetwork_cards

    for name in ("zeta", "Alpha"):
        write_a1111_hypernetwork(tmp_path / f"{name}.pt", widths=(8,))
    items, names = hypernetwork_cards(HypernetworkLibrary(tmp_path))
    assert names == ["Alpha", "zeta"] and [caption for _, caption in items] == names
