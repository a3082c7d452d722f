"""`mixkit generate --refiner MODEL --refiner-switch-at FRACTION`, and `--infotext` of a refined image."""

import pytest
from PIL import Image

from webui.cli import main

SIZE = ["--width", "64", "--height", "64", "--steps", "4", "--sampler", "Euler", "--seed", "5"]


def _generate(capsys, *args):
    assert main(["generate", *args]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return captured.out.split()[0], captured.err


def test_a_refined_image_names_its_refiner_and_is_made_again_from_its_png(tiny_sdxl_dir, tiny_sdxl_refiner_dir,
                                                                          tmp_path, capsys):
    refined, _ = _generate(capsys, "a red circle", "--model", str(tiny_sdxl_dir), "--refiner",
                           str(tiny_sdxl_refiner_dir), "--refiner-switch-at", "0.6", "-o", str(tmp_path / "a"), *SIZE)
    plain, _ = _generate(capsys, "a red circle", "--model", str(tiny_sdxl_dir), "-o", str(tmp_path / "p"), *SIZE)
    text = Image.open(refined).text["parameters"]
    assert f"Refiner: {tiny_sdxl_refiner_dir.name} [" in text and ", Refiner switch at: 0.6," in text
    assert Image.open(refined).tobytes() != Image.open(plain).tobytes()
    again, err = _generate(capsys, "--infotext", refined, "--model", str(tiny_sdxl_dir), "--refiner",
                           str(tiny_sdxl_refiner_dir), "-o", str(tmp_path / "b"))
    assert "warning" not in err
    assert Image.open(again).text["parameters"] == text
    assert Image.open(again).tobytes() == Image.open(refined).tobytes()


def test_an_infotext_with_a_refiner_needs_the_refiner_flag(tiny_sdxl_dir, tmp_path, capsys):
    text = ("a red circle\nSteps: 4, Sampler: Euler, CFG scale: 7, Seed: 5, Size: 64x64, RNG: CPU, "
            "Refiner: sd_xl_refiner_1.0 [7440042bbd], Refiner switch at: 0.8")
    assert main(["generate", "--infotext", text, "--model", str(tiny_sdxl_dir), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "made with the refiner 'sd_xl_refiner_1.0 [7440042bbd]' (Refiner switch at: 0.8); pass --refiner" in err


@pytest.mark.parametrize("value", ["0", "1", "1.5", "nan"])
def test_switch_at_outside_the_open_interval_is_a_usage_error(tiny_sdxl_dir, tmp_path, capsys, value):
    code = main(["generate", "a", "--model", str(tiny_sdxl_dir), "--refiner", "somewhere", "--refiner-switch-at",
                 value, "-o", str(tmp_path / "x"), *SIZE])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "--refiner-switch-at must be a number strictly between 0 and 1" in err[-1]
    assert not (tmp_path / "x").exists()


def test_a_refiner_file_of_a_single_file_models_family_is_read_with_its_config_dir(tiny_sd1_dir, tmp_path, capsys):
    """`--config-dir` reaches a refiner file of the model's family: the tiny refiner as a single file refines as its
    folder does (tiny files match no shipped configs, so without it the refiner file was refused)."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    refiner_dir = build_tiny_sd1(tmp_path / "refiner", seed=1)
    save_ldm_checkpoint(load_diffusion_model(tiny_sd1_dir), tmp_path / "base.safetensors")
    save_ldm_checkpoint(load_diffusion_model(refiner_dir), tmp_path / "refiner.safetensors")
    model = ["--model", str(tmp_path / "base.safetensors"), "--config-dir", str(tiny_sd1_dir), "--refiner-switch-at",
             "0.5", *SIZE]
    from_file, _ = _generate(capsys, "a red circle", *model, "--refiner", str(tmp_path / "refiner.safetensors"),
                             "-o", str(tmp_path / "f"))
    from_folder, _ = _generate(capsys, "a red circle", *model, "--refiner", str(refiner_dir), "-o", str(tmp_path / "d"))
    assert Image.open(from_file).tobytes() == Image.open(from_folder).tobytes()
    assert "Refiner: refiner [" in Image.open(from_file).text["parameters"]


@pytest.fixture(scope="module")
def refiner_files(tiny_sd1_dir, tmp_path_factory):
    """A refiner of the tiny SD1 architecture (other weights) as a folder and as a single file."""
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.models.diffusion.single_file_writer import save_ldm_checkpoint
    from mixkit.testing.tiny_models import build_tiny_sd1

    root = tmp_path_factory.mktemp("cli-refiner-config-dir")
    refiner_dir = build_tiny_sd1(root / "refiner", seed=1)
    save_ldm_checkpoint(load_diffusion_model(refiner_dir), root / "refiner.safetensors")
    return refiner_dir, root / "refiner.safetensors"


def test_a_refiner_file_next_to_a_folder_model_is_read_with_refiner_config_dir(tiny_sd1_dir, refiner_files, tmp_path,
                                                                              capsys):
    """A folder model has no --config-dir to pass on: --refiner-config-dir gives the refiner file its configs, and
    the image is the folder refiner's."""
    refiner_dir, refiner_file = refiner_files
    model = ["--model", str(tiny_sd1_dir), "--refiner-switch-at", "0.5", *SIZE]
    from_file, _ = _generate(capsys, "a red circle", *model, "--refiner", str(refiner_file), "--refiner-config-dir",
                             str(refiner_dir), "-o", str(tmp_path / "f"))
    from_folder, _ = _generate(capsys, "a red circle", *model, "--refiner", str(refiner_dir), "-o", str(tmp_path / "d"))
    assert Image.open(from_file).tobytes() == Image.open(from_folder).tobytes()


def test_img2img_takes_refiner_config_dir(tiny_sd1_dir, refiner_files, tmp_path, capsys):
    from .cli_inputs import write_noise_picture

    refiner_dir, refiner_file = refiner_files
    init = write_noise_picture(tmp_path / "init.png", seed=0, width=64, height=64)
    common = [str(init), "a red circle", "--model", str(tiny_sd1_dir), "--refiner-switch-at", "0.5",
              "--denoising-strength", "0.75", *SIZE]
    images = []
    for name, refiner in (("f", ["--refiner", str(refiner_file), "--refiner-config-dir", str(refiner_dir)]),
                          ("d", ["--refiner", str(refiner_dir)])):
        assert main(["img2img", *common, *refiner, "-o", str(tmp_path / name)]) == 0, capsys.readouterr().err
        images.append(Image.open(capsys.readouterr().out.split()[0]).tobytes())
    assert images[0] == images[1]


@pytest.mark.parametrize("refiner, message", [
    (None, "sets the configs of a single-file refiner, and no refiner is given: add the refiner checkpoint, or drop "
           "--refiner-config-dir."),
    ("folder", "is a diffusers folder, which has its own configs: drop --refiner-config-dir."),
])
def test_a_refiner_config_dir_that_cannot_apply_is_a_usage_error(tiny_sd1_dir, refiner_files, tmp_path, capsys,
                                                                 refiner, message):
    refiner_dir, _ = refiner_files
    flags = [] if refiner is None else ["--refiner", str(refiner_dir)]
    code = main(["generate", "a", "--model", str(tiny_sd1_dir), *flags, "--refiner-config-dir", str(refiner_dir),
                 "-o", str(tmp_path / "x"), *SIZE])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and f"--refiner-config-dir={str(refiner_dir)!r}" in err[-1], err
    assert not (tmp_path / "x").exists()
