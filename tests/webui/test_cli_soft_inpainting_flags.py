"""`mixkit img2img --mask M --soft-inpainting --si-...` (webui/cli/soft_inpainting_flags.py): the run is the Python
API's, its infotext has A1111's keys and `--infotext` pastes them back; bad flags stop the run before the load."""

import pytest
from PIL import Image

from pipelines.img2img import ImageToImage
from pipelines.soft_inpainting import SoftInpainting
from webui.cli import main

from .cli_inputs import write_box_mask, write_noise_picture

RUN = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "8"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("soft-inpainting-cli")
    write_noise_picture(folder / "init.png", seed=2, width=64, height=64)
    write_box_mask(folder / "mask.png", (64, 64), (24, 24, 40, 40))
    return folder


def run(capsys, *args) -> str:
    code = main(["img2img", *args])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()[0]


def test_flags_run_the_python_apis_soft_inpainting_and_the_infotext_pastes_back(tiny_sd1_dir, files, tmp_path,
                                                                                 capsys):
    mask = ["--mask", str(files / "mask.png")]
    path = run(capsys, str(files / "init.png"), "a cat", "--model", str(tiny_sd1_dir), *RUN, *mask,
               "--mask-blur", "8", "--soft-inpainting", "--si-schedule-bias", "2", "--si-difference-contrast", "3",
               "-o", str(tmp_path / "a"))
    saved = Image.open(path)
    expected = ImageToImage.from_pretrained(tiny_sd1_dir)(
        prompt="a cat", init_images=[Image.open(files / "init.png")], mask=Image.open(files / "mask.png"),
        mask_blur=8, width=64, height=64, steps=3, seed=8,
        soft_inpainting=SoftInpainting(mask_blend_power=2, composite_difference_contrast=3))
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    text = saved.text["parameters"]
    assert "Soft inpainting enabled: True, Soft inpainting schedule bias: 2," in text
    again = run(capsys, str(files / "init.png"), "--infotext", path, *mask, "--model", str(tiny_sd1_dir),
                "-o", str(tmp_path / "b"))
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == saved.tobytes()


@pytest.mark.parametrize("extra, message", [
    (["--soft-inpainting"], "--soft-inpainting: inpaint flag without --mask; add --mask MASK"),
    (["--mask", "MASK", "--si-mask-influence", "0.5"],
     "--si-mask-influence: Soft inpainting settings without --soft-inpainting"),
    (["--mask", "MASK", "--soft-inpainting", "--si-transition-contrast-boost", "40"],
     "--si-transition-contrast-boost (Transition contrast boost) must be in [1, 32], got 40"),
])
def test_bad_flags_stop_the_run_before_the_model_loads(files, tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    extra = [str(files / "mask.png") if value == "MASK" else value for value in extra]
    code = main(["img2img", str(files / "init.png"), "x", "-o", str(tmp_path / "out"), *RUN, *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("mixkit: error:") and message in err[0], err
