"""The ↙️ paste and PNG Info's Send fill the form's ControlNet units from an infotext's `ControlNet N` keys.

sd-webui-controlnet (scripts/infotext.py): `register_unit` registers every unit field but the image as a paste
field ("ControlNet 0 module", ...), and `parse_unit` reads a unit as enabled; the control image never travels.
"""

from __future__ import annotations

import pytest

from .test_paste_infotext import CONTROLNET_TEXT
from .test_ui_send_to import outputs_by_id
from .ui_blocks import handler


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from webui.config import ServerConfig
    from webui.server_state import ServerState
    from webui.ui.app import build_ui

    root = tmp_path_factory.mktemp("ui-paste-controlnet")
    (root / "models").mkdir()
    (root / "cnets").mkdir()
    (root / "cnets" / "tiny_canny.safetensors").write_bytes(b"")  # listed by name; a paste never loads it
    state = ServerState(ServerConfig(models_dir=str(root / "models"), output_dir=str(root / "out"),
                                     controlnet_dir=str(root / "cnets")))
    yield state, build_ui(state)
    state.close()


@pytest.mark.parametrize("kind", ["txt2img", "img2img"])
def test_the_paste_fills_the_units_and_asks_for_the_image(built, kind):
    _, blocks = built
    fn = handler(blocks, f"{kind}_paste", "click")
    sent = outputs_by_id(fn, fn.fn(CONTROLNET_TEXT, []))
    unit = f"{kind}_controlnet_0"
    assert (sent[f"{unit}_enable"], sent[f"{unit}_preprocessor"], sent[f"{unit}_model"], sent[f"{unit}_weight"],
            sent[f"{unit}_start"], sent[f"{unit}_end"]) == (True, "canny", "tiny_canny", 1.5, 0.0, 0.5)
    assert f"{unit}_image" not in sent  # no infotext holds the control image
    notes = sent[f"{kind}_paste_notes"].split("\n")
    assert notes[0].startswith("- ControlNet 0: ControlNet Unit 0 is enabled and filled from the infotext, but no "
                               "infotext holds its control image")
    assert notes[1].startswith("- ControlNet 1: ControlNet Unit 1 is enabled") and "model 'tiny_depth'" in notes[1]
    assert sent[f"{kind}_controlnet_1_enable"] is True and f"{kind}_controlnet_1_model" not in sent
