"""`mixkit generate --hr-scale ...`: A1111's Hires. fix from the command line, its infotext pasted back with
--infotext, its flags checked before the model loads."""

import pytest
from PIL import Image

from pipelines.hires import HiresFix
from pipelines.txt2img import TextToImage
from webui.cli import main

ARGS = ["--width", "64", "--height", "64", "--steps", "3", "--seed", "21", "--sampler", "Euler a"]


def test_hires_flags_make_the_python_apis_image_and_its_infotext_makes_it_again(tiny_sd1_dir, tmp_path, capsys):
    code = main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "--hr-scale", "1.5", "--hr-steps", "2",
                 "--denoising-strength", "0.6", "--hr-upscaler", "Lanczos", "-o", str(tmp_path / "a"), *ARGS])
    assert code == 0
    printed = capsys.readouterr()
    [path] = printed.out.split()
    final_bar = printed.err.replace("\r", "\n").strip().splitlines()[-1]
    assert "| 5/5 [" in final_bar  # both passes: 3 steps, then 2 hires steps
    saved = Image.open(path)
    expected = HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))(
        prompt="a red circle", width=64, height=64, steps=3, seed=21, sampler="Euler a", hr_scale=1.5,
        hr_second_pass_steps=2, denoising_strength=0.6, hr_upscaler="Lanczos")
    assert saved.size == (96, 96)
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    assert "Hires upscale: 1.5, Hires steps: 2, Hires upscaler: Lanczos" in saved.text["parameters"]

    assert main(["generate", "--infotext", path, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr()
    assert "not honoured" not in printed.err
    [again] = printed.out.split()
    assert Image.open(again).tobytes() == saved.tobytes()
    assert Image.open(again).text["parameters"] == saved.text["parameters"]


@pytest.mark.parametrize("extra, message", [
    (["--denoising-strength", "0.5"], "--denoising-strength sets how much hires fix's second pass redraws; add --hires"),
    (["--hr-upscaler", "Bogus"], "Unknown --hr-upscaler 'Bogus'; valid ones: Latent"),
    (["--hr-scale", "0.5"], "--hr-scale must be a number in [1, 8.0], got 0.5"),
    (["--hires", "--hr-resize-x", "-8"], "--hr-resize-x must be a non-negative integer"),
    (["--hires", "--denoising-strength", "2"], "--denoising-strength must be a number in [0, 1], got 2.0"),
    (["--hr-resize-x", "100", "--hr-resize-y", "20000"], "hires-fix target size"),
    (["--hr-sampler", "Eular"], "The hires pass's sampler (--hr-sampler='Eular') is not usable"),
    (["--hr-schedule-type", "Karas"], "--hr-schedule-type='Karas'"),
    (["--hr-tome", "0.8"], "ToMe ratio must be a number in [0, 0.75]"),
])
def test_hires_flag_errors_are_one_line_before_the_model_loads(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.setattr(TextToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))
    assert main(["generate", "x", "-o", str(tmp_path / "o"), *ARGS, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mixkit: error:") and message in err[0], err
    assert not (tmp_path / "o").exists()


def test_hr_upscaler_takes_a_dat_file_from_dat_models_path(tiny_sd1_dir, tmp_path, capsys):
    from mixkit.testing.tiny_upscalers import TINY_DAT, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import LOADED
    from pipelines.upscale import UPSCALERS

    models = tmp_path / "DAT"
    models.mkdir()
    save_upscaler(tiny_upscaler(TINY_DAT, seed=6), models / "DAT_x2.pth", "dat", wrapper="params")
    try:
        code = main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "--hr-scale", "1.5", "--hr-steps", "1",
                     "--hr-upscaler", "DAT x2", "--dat-models-path", str(models), "-o", str(tmp_path / "a"), *ARGS])
        assert code == 0, capsys.readouterr().err
        [path] = capsys.readouterr().out.split()
        assert Image.open(path).size == (96, 96)
        assert "Hires upscaler: DAT x2" in Image.open(path).text["parameters"]  # A1111's name
    finally:
        UPSCALERS.unregister("DAT x2")
        LOADED.clear()


def test_hr_upscaler_takes_a_scunet_file_from_scunet_models_path(tiny_sd1_dir, tmp_path, capsys):
    from mixkit.testing.tiny_upscalers import TINY_SCUNET, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import LOADED
    from pipelines.upscale import UPSCALERS

    models = tmp_path / "ScuNET"
    models.mkdir()
    save_upscaler(tiny_upscaler(TINY_SCUNET, seed=6), models / "scunet_color_real_psnr.pth", "scunet")
    try:
        code = main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "--hr-scale", "1.5", "--hr-steps", "1",
                     "--hr-upscaler", "ScuNET PSNR", "--scunet-models-path", str(models), "--scunet-tile", "32",
                     "--scunet-tile-overlap", "8", "-o", str(tmp_path / "a"), *ARGS])
        assert code == 0, capsys.readouterr().err
        [path] = capsys.readouterr().out.split()
        assert Image.open(path).size == (96, 96)
        assert "Hires upscaler: ScuNET PSNR" in Image.open(path).text["parameters"]  # A1111's name
    finally:
        UPSCALERS.unregister("ScuNET PSNR")
        LOADED.clear()


def test_hr_upscaler_takes_a_model_file_from_realesrgan_models_path(tiny_sd1_dir, tmp_path, capsys):
    from mixkit.testing.tiny_upscalers import TINY_SRVGG, save_upscaler, tiny_upscaler
    from pipelines.model_upscale import LOADED
    from pipelines.upscale import UPSCALERS

    models = tmp_path / "RealESRGAN"
    models.mkdir()
    save_upscaler(tiny_upscaler(TINY_SRVGG, seed=6), models / "realesr-general-x4v3.pth", "srvgg")
    try:
        code = main(["generate", "a red circle", "--model", str(tiny_sd1_dir), "--hr-scale", "1.5", "--hr-steps", "1",
                     "--hr-upscaler", "R-ESRGAN General 4xV3", "--realesrgan-models-path", str(models),
                     "-o", str(tmp_path / "a"), *ARGS])
        assert code == 0, capsys.readouterr().err
        [path] = capsys.readouterr().out.split()
        assert Image.open(path).size == (96, 96)
        assert "Hires upscaler: R-ESRGAN General 4xV3" in Image.open(path).text["parameters"]  # A1111's name
    finally:
        UPSCALERS.unregister("R-ESRGAN General 4xV3")
        LOADED.clear()


def test_hr_sampler_flags_make_the_python_apis_image_and_its_infotext_makes_it_again(tiny_sd1_dir, tmp_path, capsys):
    flags = ["--hr-scale", "1.5", "--hr-steps", "2", "--denoising-strength", "0.6", "--hr-upscaler", "Latent"]
    assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), *flags, "--hr-sampler", "DPM++ 2M",
                 "--hr-schedule-type", "Exponential", "-o", str(tmp_path / "a"), *ARGS]) == 0
    [path] = capsys.readouterr().out.split()
    saved = Image.open(path)
    expected = HiresFix(TextToImage.from_pretrained(tiny_sd1_dir))(
        prompt="a red circle", width=64, height=64, steps=3, seed=21, sampler="Euler a", hr_scale=1.5,
        hr_second_pass_steps=2, denoising_strength=0.6, hr_upscaler="Latent", hr_sampler="DPM++ 2M",
        hr_schedule_type="Exponential")
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert "Hires sampler: DPM++ 2M, Hires schedule type: Exponential" in saved.text["parameters"]
    assert main(["generate", "--infotext", path, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b")]) == 0
    [again] = capsys.readouterr().out.split()
    assert Image.open(again).tobytes() == saved.tobytes()
    assert Image.open(again).text["parameters"] == saved.text["parameters"]
    # A1111's "same" labels are the first pass's sampler: the run without the flags
    assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), *flags, "--hr-sampler", "Use same sampler",
                 "--hr-schedule-type", "Use same scheduler", "-o", str(tmp_path / "c"), *ARGS]) == 0
    assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), *flags, "-o", str(tmp_path / "d"),
                 *ARGS]) == 0
    same, plain = capsys.readouterr().out.split()
    assert Image.open(same).tobytes() == Image.open(plain).tobytes() != saved.tobytes()
    assert Image.open(same).text["parameters"] == Image.open(plain).text["parameters"]


def test_hr_tome_merges_the_second_pass_only_and_its_infotext_makes_it_again(tiny_sd1_dir, tmp_path, capsys):
    from pipelines.approx.tome_unet import token_merging_state

    flags = ["--hr-scale", "1.5", "--hr-steps", "2", "--denoising-strength", "0.6", "--hr-upscaler", "Latent"]
    assert main(["generate", "a red circle", "--model", str(tiny_sd1_dir), *flags, "--hr-tome", "0.5",
                 "-o", str(tmp_path / "a"), *ARGS]) == 0
    [path] = capsys.readouterr().out.split()
    saved = Image.open(path)
    pipe = TextToImage.from_pretrained(tiny_sd1_dir)
    expected = HiresFix(pipe)(
        prompt="a red circle", width=64, height=64, steps=3, seed=21, sampler="Euler a", hr_scale=1.5,
        hr_second_pass_steps=2, denoising_strength=0.6, hr_upscaler="Latent", token_merging_ratio_hr=0.5)
    assert token_merging_state(pipe.model.unet) is None
    assert saved.convert("RGB").tobytes() == expected.images[0].tobytes()
    assert saved.text["parameters"] == expected.infotexts[0]
    assert "Token merging ratio hr: 0.5" in saved.text["parameters"]
    assert main(["generate", "--infotext", path, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b")]) == 0
    printed = capsys.readouterr()
    assert "not honoured" not in printed.err
    [again] = printed.out.split()
    assert Image.open(again).tobytes() == saved.tobytes()
    assert Image.open(again).text["parameters"] == saved.text["parameters"]
