"""A1111's `font` option over the API (webui/options.py): "" by default, a path checked when set (422 naming it,
nothing changed), saved to the settings file, and read by X/Y/Z plot's legend (webui/api_selectable_scripts.py)."""

from __future__ import annotations

import json
import os

import pytest

from .png_payloads import decode_png

DEJAVU = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
DEJAVU_MATH = "/usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf"  # has λ too, drawn otherwise
TINY = {"prompt": "a red cat", "steps": 1, "seed": 3, "sampler_name": "Euler", "width": 64, "height": 64}
RED_OR_LAMBDA = [7, "red, λ", [], 0, "", []]  # A1111's txt2img index 7: Prompt S/R
pytestmark = pytest.mark.skipif(not os.path.isfile(DEJAVU), reason="DejaVu fonts are not installed here")


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, tmp_path_factory, serving):
    from webui.config import ServerConfig

    root = tmp_path_factory.mktemp("api-grid-font")
    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(root / "outputs"), ui=False,
                              settings_file=str(root / "config.json"))) as running:
        yield running


def plot_grid(client):
    response = client.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "X/Y/Z plot",
                                                      "script_args": RED_OR_LAMBDA})
    assert response.status_code == 200, response.text
    return decode_png(response.json()["images"][0])


def test_the_font_is_empty_by_default_and_a_bad_path_is_refused_naming_it(client, tmp_path):
    assert client.get("/sdapi/v1/options").json()["font"] == ""
    missing = str(tmp_path / "Roboto-Regular.ttf")
    refused = client.post("/sdapi/v1/options", json={"font": missing})
    assert refused.status_code == 422 and f"font '{missing}' is not a file" in refused.text
    not_a_font = tmp_path / "notes.ttf"
    not_a_font.write_text("hello")
    refused = client.post("/sdapi/v1/options", json={"font": str(not_a_font)})
    assert refused.status_code == 422 and "is not a font Pillow's FreeType can load" in refused.text
    refused = client.post("/sdapi/v1/options", json={"font": 3})
    assert refused.status_code == 422 and "font must be a font file path" in refused.text
    assert client.get("/sdapi/v1/options").json()["font"] == ""


def test_the_plots_legend_follows_the_font_option_which_is_saved(client, server):
    try:
        assert client.post("/sdapi/v1/options", json={"font": DEJAVU}).status_code == 200
        assert client.get("/sdapi/v1/options").json()["font"] == DEJAVU
        with open(server.state.options.settings_file, encoding="utf-8") as saved:
            assert json.load(saved)["font"] == DEJAVU
        sans = plot_grid(client)
        assert client.post("/sdapi/v1/options", json={"font": DEJAVU_MATH}).status_code == 200
        math = plot_grid(client)
    finally:
        client.post("/sdapi/v1/options", json={"font": ""})
    assert sans.size == math.size
    pad = sans.height - 64
    # the cells are the same images; the labels above them are drawn in the chosen font
    assert sans.crop((0, pad, sans.width, sans.height)).tobytes() == math.crop((0, pad, math.width,
                                                                                  math.height)).tobytes()
    assert sans.crop((0, 0, sans.width, pad)).tobytes() != math.crop((0, 0, math.width, pad)).tobytes()
