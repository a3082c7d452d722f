"""Rules between options (`webui.options.combined_checks`): the API and the settings file read at start share them."""

from __future__ import annotations

import json

import pytest

from pipelines.params import GenerationLimits
from webui.options import ServerOptions


def options_from_file(tmp_path, saved: dict) -> ServerOptions:
    (tmp_path / "settings.json").write_text(json.dumps(saved), encoding="utf-8")
    return ServerOptions(str(tmp_path / "out"), 5, limits=GenerationLimits(),
                         settings_file=str(tmp_path / "settings.json"))


@pytest.mark.parametrize("option", ["ESRGAN", "SWIN", "DAT", "SCUNET"])
@pytest.mark.parametrize("both", [True, False])
def test_a_settings_file_with_a_tile_overlap_over_half_its_tile_is_refused_at_start_naming_file_and_keys(tmp_path,
                                                                                                         option, both):
    # each key alone passes (16 >= 8, 8 <= 2047); together the overlap must stay under half the tile. With only the
    # tile in the file the overlap is A1111's default 8: the pair is still named, as either key may be the one to fix
    saved = {f"{option}_tile": 16, **({f"{option}_tile_overlap": 8} if both else {})}
    with pytest.raises(ValueError) as raised:
        options_from_file(tmp_path, saved)
    assert str(raised.value) == (
        f"Settings file {str(tmp_path / 'settings.json')!r}, keys '{option}_tile' and '{option}_tile_overlap': "
        "tile_overlap must be an integer in [0, 7] for tile_size 16, got 8. Fix the values or delete the keys.")


def test_a_settings_file_with_a_valid_tile_pair_is_taken(tmp_path):
    options = options_from_file(tmp_path, {"ESRGAN_tile": 16, "ESRGAN_tile_overlap": 7, "DAT_tile": 0,
                                           "SWIN_torch_compile": True})
    assert options.upscaler_tiling() == {"ESRGAN": (16, 7), "SWIN": (192, 8), "DAT": (0, 8),
                                         "SCUNET": (256, 8)}  # A1111's defaults else
    assert options.get("SWIN_torch_compile") is True


def test_the_api_refuses_the_same_pair_and_keeps_the_current_tiling(tmp_path):
    options = ServerOptions(str(tmp_path / "out"), 5)
    with pytest.raises(ValueError, match=r"tile_overlap must be an integer in \[0, 7\] for tile_size 16, got 8"):
        options.check_update({"ESRGAN_tile": 16})
    assert options.upscaler_tiling()["ESRGAN"] == (192, 8)


def test_a_settings_file_with_sigma_min_over_sigma_max_is_refused_at_start(tmp_path):
    with pytest.raises(ValueError) as raised:
        options_from_file(tmp_path, {"sigma_min": 5.0, "sigma_max": 1.0})
    assert str(raised.value) == (
        f"Settings file {str(tmp_path / 'settings.json')!r}, keys 'sigma_min' and 'sigma_max': sigma_min (5.0) must be "
        "below sigma_max (1.0); set 0 for either to keep the model's own. Fix the values or delete the keys.")


def test_a_settings_file_with_an_infinite_s_tmax_is_refused_at_start_naming_file_and_key(tmp_path):
    # written by a server that still took `"s_tmax": Infinity` over the API: every GET /options then was a 500
    with pytest.raises(ValueError) as raised:
        options_from_file(tmp_path, {"s_tmax": float("inf")})
    assert str(raised.value) == (
        f"Settings file {str(tmp_path / 'settings.json')!r}, key 's_tmax': Option 's_tmax' is inf, which is not a JSON "
        "number; send a finite number (0 means infinity). Fix the value or delete the key.")


def test_the_api_refuses_an_infinite_s_tmax_and_keeps_the_current_one(tmp_path):
    options = ServerOptions(str(tmp_path / "out"), 5)
    with pytest.raises(ValueError, match=r"Option 's_tmax' is inf, which is not a JSON number"):
        options.check_update({"s_tmax": float("inf")})
    assert options.get("s_tmax") == 0.0
    assert options.check_update({"s_tmax": 0}) == {"s_tmax": 0.0}  # A1111's spelling of "no limit"


def test_a_settings_file_font_is_read_back_and_one_that_went_missing_starts_as_the_automatic_font(tmp_path, caplog):
    import os

    font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if os.path.isfile(font):
        assert options_from_file(tmp_path, {"font": font}).get("font") == font
    assert options_from_file(tmp_path, {"font": "  "}).get("font") == ""  # blank is automatic
    gone = str(tmp_path / "Roboto.ttf")
    with caplog.at_level("WARNING"):
        assert options_from_file(tmp_path, {"font": gone}).get("font") == ""  # A1111 draws with its default font
    assert f"key 'font': font {gone!r} is not a file" in caplog.text
