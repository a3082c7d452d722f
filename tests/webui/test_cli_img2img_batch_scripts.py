"""`mixkit img2img --input-dir DIR` with a script (webui/cli/img2img_batch_scripts.py): as A1111's img2img Batch, the
script runs on every input; each input's images are those a single `mixkit img2img IMAGE` run of the script makes,
named after the input; the script-image cap counts the whole batch before the first image."""

import numpy as np
import pytest
from PIL import Image

from webui.cli import main

RUN = ["--width", "64", "--height", "64", "--steps", "1", "--seed", "8", "--sampler", "Euler",
       "--denoising-strength", "0.5"]


@pytest.fixture()
def inputs(tmp_path):
    """Two 48x48 noise pictures, a.png and b.jpg."""
    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(5)
    Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)).save(folder / "a.png")
    Image.fromarray(rng.integers(0, 256, (48, 48, 3), dtype=np.uint8)).save(folder / "b.jpg", quality=95)
    return folder


def _run(capsys, *argv) -> list[str]:
    code = main(["img2img", *argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()


def _pixels_and_text(path) -> tuple[bytes, str]:
    with Image.open(path) as image:
        return image.convert("RGB").tobytes(), image.text["parameters"]


@pytest.mark.parametrize("flags, names", [
    (["--xyz-x", "Steps:1,2"], ["xyz_grid", "1", "2"]),
    (["--prompt-matrix"], ["prompt_matrix", "1", "2"]),
    (["--prompts-from-file", "LIST"], ["1", "2"]),
    (["--loopback", "2"], ["grid", "1", "2"]),
    (["--sd-upscale", "2", "--sd-upscale-overlap", "32"], [""]),  # one upscale: the input's own name
])
def test_each_input_gets_the_scripts_single_run_images_named_after_it(tiny_sd1_dir, inputs, tmp_path, capsys, flags,
                                                                      names):
    listing = tmp_path / "list.txt"
    listing.write_text("a dog\na bird\n", encoding="utf-8")
    flags = [str(listing) if flag == "LIST" else flag for flag in flags]
    out = tmp_path / "out"
    written = _run(capsys, "--input-dir", str(inputs), "a cat|hat", "--model", str(tiny_sd1_dir), *RUN, *flags,
                   "--output-dir", str(out))
    expected = [out / f"{stem}{'-' + name if name else ''}.png" for stem in "ab" for name in names]
    assert written == [str(path) for path in expected]
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in expected)
    for stem, source in (("a", "a.png"), ("b", "b.jpg")):
        single = _run(capsys, str(inputs / source), "a cat|hat", "--model", str(tiny_sd1_dir), *RUN, *flags,
                      "-o", str(tmp_path / f"single-{stem}"))
        batch = [path for path in written if path.rsplit("/", 1)[1].startswith(f"{stem}")]
        assert [_pixels_and_text(path) for path in batch] == [_pixels_and_text(path) for path in single]


def test_the_script_image_cap_counts_the_whole_batch_before_the_model_loads(inputs, tmp_path, capsys):
    """2 inputs x 2 cells = 4 images: within a cap of 2 for each input, over it for the batch; refused before the
    (missing) model is read, with nothing written."""
    out = tmp_path / "out"
    code = main(["img2img", "--input-dir", str(inputs), "a cat", "--model", str(tmp_path / "no-model"), *RUN,
                 "--xyz-x", "Steps:1,2", "--max-script-images", "3", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert ("X/Y/Z plot over --input-dir would generate 4 images (2 inputs x 2 each), more than the 3 one script job "
            "may make (max_script_images); move some inputs out of --input-dir or make the script smaller") in err
    assert not out.exists()


def test_the_cap_names_uneven_inputs_and_one_input_over_it_on_its_own(inputs, tmp_path, capsys):
    """With --png-info Prompt each input has its own plan: b.png's infotext adds "x|y|z", so the Prompt matrix makes
    2 images for a.png ("a|hat") and 8 for b.png ("a|hat x|y|z"). Cap 9: each fits, the batch (10) does not; cap 7:
    b.png alone is over it, and named."""
    (inputs / "b.jpg").unlink()
    Image.new("RGB", (48, 48)).save(inputs / "b.png", pnginfo=_infotext("x|y|z\nSteps: 1, Seed: 3, Size: 64x64"))
    common = ["img2img", "--input-dir", str(inputs), "a|hat", "--model", str(tmp_path / "no-model"), *RUN,
              "--prompt-matrix", "--png-info", "Prompt", "--output-dir", str(tmp_path / "out")]
    assert main([*common, "--max-script-images", "9"]) == 2
    err = capsys.readouterr().err
    assert "Prompt matrix over --input-dir would generate 10 images (2 inputs, 2 to 8 each), more than the 9" in err
    assert main([*common, "--max-script-images", "7"]) == 2
    err = capsys.readouterr().err
    assert "--input-dir b.png: Prompt matrix would generate 8 images" in err, err
    assert not (tmp_path / "out").exists()


def _infotext(text):
    from PIL import PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", text)
    return info
