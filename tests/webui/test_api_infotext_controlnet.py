"""A request's `infotext` holding sd-webui-controlnet units (`ControlNet 0`, ...): refused unless the request sends
those units itself.

A1111 modules/api/api.py: `apply_infotext` turns the infotext's script fields into `mentioned_script_args`, then
`init_script_args` writes them into the script args and afterwards writes `alwayson_scripts[name]["args"][idx]`
over slot `args_from + idx`: the request's unit i replaces the infotext's `ControlNet i`, and an infotext unit past
the request's units stays, without a control image (no infotext holds one).
"""

from __future__ import annotations

import pytest

from webui.api_infotext import apply_infotext
from webui.api_requests import Img2ImgRequest, Txt2ImgRequest

from .test_paste_infotext import CONTROLNET_TEXT

UNIT = {"module": "canny", "model": "tiny_canny", "image": "iVBORw0KGgo="}


@pytest.mark.parametrize("request_class", [Txt2ImgRequest, Img2ImgRequest])
def test_an_infotext_unit_the_request_does_not_send_is_refused(request_class):
    with pytest.raises(ValueError) as refused:
        apply_infotext(request_class(infotext=CONTROLNET_TEXT))
    assert str(refused.value) == ("infotext: ControlNet 0: a ControlNet unit's control image cannot come from an "
                                  "infotext; send the unit, with its image, in alwayson_scripts.controlnet (as "
                                  "args[0]).")


def test_the_requests_own_units_win_over_the_infotexts():
    both = {"controlnet": {"args": [UNIT, {**UNIT, "enabled": False}]}}
    request = apply_infotext(Txt2ImgRequest(infotext=CONTROLNET_TEXT, alwayson_scripts=both))
    assert request.alwayson_scripts == both and request.steps == 2  # the rest of the infotext is still read


def test_an_infotext_unit_past_the_requests_units_is_refused():
    with pytest.raises(ValueError, match=r"^infotext: ControlNet 1: .* \(as args\[1\]\)\.$"):
        apply_infotext(Txt2ImgRequest(infotext=CONTROLNET_TEXT, alwayson_scripts={"controlnet": {"args": [UNIT]}}))


def test_an_infotext_without_units_is_unaffected():
    request = apply_infotext(Txt2ImgRequest(infotext="a box\nSteps: 3, Sampler: Euler, Seed: 4, Size: 64x64"))
    assert (request.steps, request.seed) == (3, 4)
