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


def test_a_per_request_font_override_draws_that_requests_legend_only(client):
    """A1111 applies `override_settings` for the job: the plot's legend is drawn in the request's font, the server's
    option stays as it was, and a bad path is a 422 naming it before anything is queued."""
    def plot(font=None):
        extra = {} if font is None else {"override_settings": {"font": font}}
        response = client.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "X/Y/Z plot",
                                                          "script_args": RED_OR_LAMBDA, **extra})
        assert response.status_code == 200, response.text
        return decode_png(response.json()["images"][0])

    try:
        assert client.post("/sdapi/v1/options", json={"font": DEJAVU_MATH}).status_code == 200
        math = plot()
        sans = plot(DEJAVU)
        automatic = plot("")  # "" is the automatic font, for this request
        assert client.get("/sdapi/v1/options").json()["font"] == DEJAVU_MATH  # the overrides were the requests' only
        assert plot().tobytes() == math.tobytes()
    finally:
        client.post("/sdapi/v1/options", json={"font": ""})
    pad = sans.height - 64
    assert sans.crop((0, 0, sans.width, pad)).tobytes() != math.crop((0, 0, math.width, pad)).tobytes()
    assert plot().tobytes() == automatic.tobytes()
    assert plot(DEJAVU).tobytes() == sans.tobytes()
    refused = client.post("/sdapi/v1/txt2img", json={**TINY, "script_name": "X/Y/Z plot", "script_args": RED_OR_LAMBDA,
                                                     "override_settings": {"font": "/nowhere/Roboto.ttf"}})
    assert refused.status_code == 422 and "font '/nowhere/Roboto.ttf' is not a file" in refused.text


def test_a_saved_font_file_that_went_missing_does_not_stop_the_start(tmp_path, caplog):
    """The server starts with the automatic font and says which file is missing (A1111 falls back to its default
    font); the saved choice stays in the settings file until another font is set, so it returns with the file."""
    import logging
    import shutil

    from webui.options import ServerOptions

    font = tmp_path / "fonts" / "DejaVuSans.ttf"
    font.parent.mkdir()
    shutil.copy(DEJAVU, font)
    settings = tmp_path / "config.json"
    settings.write_text(json.dumps({"font": str(font), "samples_save": False}))
    assert ServerOptions(str(tmp_path), 0, settings_file=str(settings)).get("font") == str(font)
    font.unlink()
    with caplog.at_level(logging.WARNING, logger="webui.options"):
        options = ServerOptions(str(tmp_path), 0, settings_file=str(settings))
    assert options.get("font") == "" and options.get("samples_save") is False  # the rest of the file still applies
    assert f"Settings file {str(settings)!r}, key 'font': font {str(font)!r} is not a file" in caplog.text
    options.apply(options.check_update({"samples_save": True}))  # another setting saved: the font choice kept
    assert json.loads(settings.read_text())["font"] == str(font)
    shutil.copy(DEJAVU, font)
    assert ServerOptions(str(tmp_path), 0, settings_file=str(settings)).get("font") == str(font)
    options.apply(options.check_update({"font": ""}))  # set again: the new choice is saved
    assert json.loads(settings.read_text())["font"] == ""
