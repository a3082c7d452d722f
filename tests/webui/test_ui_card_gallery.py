"""`webui.ui.card_gallery`: the extra-network card gallery the LoRA and Hypernetworks tabs build, on its own."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
from PIL import Image

from webui.ui.card_gallery import build_card_gallery

from .ui_blocks import component, handler


def test_a_click_reaches_the_kind_and_refresh_lists_again():
    listed, clicks, refreshed = [["a", "b"]], [], []
    image = Image.new("RGB", (4, 4))

    def list_cards():
        names = listed[-1]
        return [(image, name) for name in names], names

    with gr.Blocks() as blocks:
        boxes = [gr.Textbox() for _ in range(4)]
        build_card_gallery("demo", "Demo cards", boxes, list_cards,
                           lambda target, name, prompts: clicks.append((target, name)) or [name, *prompts[1:]],
                           lambda: refreshed.append(True))
    assert component(blocks, "demo_target").value == "txt2img prompt"
    pick = handler(blocks, "demo_cards", "select").fn
    assert pick("img2img prompt", ["a", "b"], "p", "n", "q", "m", SimpleNamespace(index=1)) == ["b", "n", "q", "m"]
    assert clicks == [("img2img prompt", "b")]
    # a click past the cards a stale page shows leaves every box as it is, and the kind is not asked
    assert pick("img2img prompt", ["a"], "p", "n", "q", "m", SimpleNamespace(index=1)) == ["p", "n", "q", "m"]
    assert pick("img2img prompt", ["a"], "p", "n", "q", "m", SimpleNamespace(index=None)) == ["p", "n", "q", "m"]
    assert len(clicks) == 1
    listed.append(["c"])
    assert handler(blocks, "demo_refresh", "click").fn() == ([(image, "c")], ["c"]) and refreshed == [True]
