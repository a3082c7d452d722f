"""`mixkit img2img --image-cfg-scale` on an instruct-pix2pix checkpoint: the flag runs and is recorded, `--infotext`
reads it back bit for bit, a bad value is refused before the load, and `mixkit generate` (txt2img) refuses the model."""

from PIL import Image

from webui.cli import main

from .cli_inputs import write_noise_picture

SIZE = ["--width", "64", "--height", "64", "--steps", "3"]


def _run(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_flag_is_recorded_and_read_back_from_the_png(tiny_ip2p_dir, tmp_path, capsys):
    write_noise_picture(tmp_path / "init.png", seed=3, width=64, height=64)
    code, out, err = _run(capsys, "img2img", str(tmp_path / "init.png"), "make it red", "--model", str(tiny_ip2p_dir),
                          "--seed", "5", "--image-cfg-scale", "1.25", "-o", str(tmp_path / "a"), *SIZE)
    assert code == 0, err
    original = out.split()[0]
    assert "Image CFG scale: 1.25," in Image.open(original).text["parameters"]
    code, out, err = _run(capsys, "img2img", str(tmp_path / "init.png"), "--infotext", original, "--model",
                          str(tiny_ip2p_dir), "-o", str(tmp_path / "b"))
    assert code == 0, err
    first, again = Image.open(original), Image.open(out.split()[0])
    assert first.text["parameters"] == again.text["parameters"]
    assert first.tobytes() == again.tobytes()


def test_a_negative_value_is_refused_naming_the_flag(tiny_ip2p_dir, tmp_path, capsys):
    write_noise_picture(tmp_path / "init.png", seed=3, width=64, height=64)
    code, _, err = _run(capsys, "img2img", str(tmp_path / "init.png"), "x", "--model", str(tiny_ip2p_dir),
                        "--image-cfg-scale", "-1", "-o", str(tmp_path / "a"), *SIZE)
    assert code != 0
    assert "--image-cfg-scale" in err and "[0, 100]" in err


def test_generate_refuses_the_model(tiny_ip2p_dir, tmp_path, capsys):
    code, _, err = _run(capsys, "generate", "a cat", "--model", str(tiny_ip2p_dir), "-o", str(tmp_path / "a"), *SIZE)
    assert code != 0
    assert "is an instruct-pix2pix checkpoint" in err and "Use img2img" in err
