"""`mixkit generate --hypertile ... --freeu B1 B2 S1 S2`: the params they make, their errors in flag terms, and an
image made again identically from its own PNG's infotext."""

from __future__ import annotations

import argparse

import pytest
from PIL import Image

from pipelines.approx.freeu import FreeU
from pipelines.approx.hypertile_settings import HyperTile
from webui.cli import main
from webui.cli.speedup_flags import add_speedup_flags, speedup_params_of


def _params(*flags):
    parser = argparse.ArgumentParser()
    add_speedup_flags(parser)
    return speedup_params_of(parser.parse_args(list(flags)))


def test_flags_make_the_params():
    assert _params() == {"hypertile": None, "freeu": None}
    assert _params("--hypertile") == {"hypertile": HyperTile(), "freeu": None}
    assert _params("--hypertile-hires", "--hypertile-max-tile", "128", "--hypertile-vae", "--hypertile-vae-swap-size",
                   "1")["hypertile"] == HyperTile(unet=False, unet_hires=True, unet_max_tile=128, vae=True,
                                                  vae_swap_size=1)
    assert _params("--freeu", "1.3", "1.4", "0.9", "0.2")["freeu"] == FreeU(1.3, 1.4, 0.9, 0.2)


@pytest.mark.parametrize("flags, message", [
    (["--hypertile-max-tile", "128"], "--hypertile-max-tile set HyperTile's sizes, but none of --hypertile"),
    (["--hypertile", "--hypertile-swap-size", "0"], r"--hypertile-swap-size must be an integer in \[1, 64\]"),
    (["--hypertile-vae", "--hypertile-vae-max-tile", "600"],
     r"--hypertile-vae-max-tile must be an integer in \[0, 512\]"),
    (["--freeu", "1", "1", "1", "0"], r"--freeu: FreeU s2 must be a number in \(0, 10\]"),
])
def test_bad_values_are_named_by_their_flag(flags, message):
    with pytest.raises(ValueError, match=message):
        _params(*flags)


def test_the_image_is_recorded_and_reproduced_from_its_png(tiny_sd1_dir, tmp_path, capsys):
    def generate(*args) -> str:
        assert main(["generate", *args, "--model", str(tiny_sd1_dir)]) == 0, capsys.readouterr().err
        captured = capsys.readouterr()
        assert "Output is APPROXIMATE" in captured.err and "HyperTile tiled self-attention: U-Net" in captured.err
        return captured.out.split()[0]

    size = ["--width", "256", "--height", "256", "--steps", "2", "--seed", "5", "--sampler", "Euler"]
    made = generate("a red circle", "-o", str(tmp_path / "made"), *size, "--hypertile", "--hypertile-max-tile",
                    "128", "--freeu", "1.5", "1.6", "0.9", "0.2")
    text = Image.open(made).text["parameters"]
    assert 'Hypertile U-Net: True, Hypertile U-Net max tile size: 128, FreeU: "b1=1.5, b2=1.6, s1=0.9, s2=0.2"' \
        in text
    again = generate("--infotext", made, "-o", str(tmp_path / "again"))
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(made).tobytes()
