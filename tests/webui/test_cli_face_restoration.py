"""Restore faces from the command line: `mixkit generate/img2img/outpaint --restore-faces` and `mixkit extras
--gfpgan-visibility / --codeformer-visibility / --codeformer-weight`, with the folders of A1111's flags and stand-in
networks put where the real loaders would be."""

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_face_restoration import (StandInRestorer, a1111_face_folders, planted_detector_loader,
                                                  template_landmarks)
from pipelines.infotext import parse_infotext
from webui.cli import main

FACE = ((8.0, 8.0, 56.0, 56.0), template_landmarks(8.0, 8.0, 48.0))
ARGS = ["--steps", "2", "--width", "64", "--height", "64", "--seed", "3"]


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A1111's model folders, with the default loaders replaced by stand-ins; the process's registry left clean."""
    import pipelines.face_restoration as face_restoration

    calls = []

    def loader(path, device=None, dtype=None):
        calls.append(path.name)
        return ("GFPGAN" if "GFPGAN" in path.name else "CodeFormer"), StandInRestorer(fill=(1.0, -1.0, 1.0))

    monkeypatch.setattr(face_restoration, "_default_loader", loader)
    monkeypatch.setattr(face_restoration, "_default_detector_loader", planted_detector_loader([FACE], 64, 64))
    found = a1111_face_folders(tmp_path / "models")
    found["calls"] = calls
    yield found
    for name in ("CodeFormer", "GFPGAN"):
        if name in face_restoration.FACE_RESTORERS:
            face_restoration.FACE_RESTORERS.unregister(name)


def run(capsys, *args) -> list[str]:
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out.split()


def test_generate_restore_faces_writes_the_infotext_and_the_image_before(tiny_sd1_dir, tmp_path, capsys, folders):
    out = tmp_path / "out"
    [path] = run(capsys, "generate", "a face", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS, "--restore-faces",
                 "--codeformer-models-path", str(folders["CodeFormer"]), "--code-former-weight", "0.7",
                 "--save-before-face-restoration")
    image = Image.open(path)
    assert np.asarray(image.convert("RGB"))[32, 32].tolist() == [255, 0, 255]
    assert parse_infotext(image.info["parameters"])["Face restoration"] == "CodeFormer"
    assert sorted(p.name for p in out.iterdir()) == ["00000-3-before-face-restoration.png", "00000-3.png"]
    assert folders["calls"] == ["codeformer-v0.1.0.pth"]


def test_generate_without_the_folder_names_the_flag(tiny_sd1_dir, tmp_path, capsys):
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"), *ARGS,
                 "--restore-faces"]) == 2
    err = capsys.readouterr().err
    assert "--restore-faces: Face restoration model 'CodeFormer' is not available" in err
    assert "--codeformer-models-path" in err and not (tmp_path / "o").exists()


def test_generate_refuses_a_weight_outside_zero_one(tiny_sd1_dir, tmp_path, capsys, folders):
    assert main(["generate", "a", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "o"), *ARGS, "--restore-faces",
                 "--codeformer-models-path", str(folders["CodeFormer"]), "--code-former-weight", "3"]) == 2
    assert "--code-former-weight must be a number in [0, 1]" in capsys.readouterr().err


def test_img2img_takes_restore_faces_and_the_gfpgan_folder(tiny_sd1_dir, tmp_path, capsys, folders):
    source = tmp_path / "in.png"
    Image.fromarray(np.random.default_rng(2).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(source)
    [path] = run(capsys, "img2img", str(source), "a face", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"),
                 *ARGS, "--restore-faces", "--face-restoration-model", "GFPGAN", "--gfpgan-models-path",
                 str(folders["GFPGAN"]))
    assert parse_infotext(Image.open(path).info["parameters"])["Face restoration"] == "GFPGAN"
    assert folders["calls"] == ["GFPGANv1.4.pth"]


def test_extras_codeformer_then_written_with_its_postprocessing_text(tmp_path, capsys, folders):
    source = tmp_path / "face.png"
    Image.fromarray(np.random.default_rng(4).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(source)
    [path] = run(capsys, "extras", str(source), "--upscaler", "None", "--codeformer-visibility", "1",
                 "--codeformer-weight", "0.25", "--codeformer-models-path", str(folders["CodeFormer"]),
                 "-o", str(tmp_path / "out"))
    image = Image.open(path)
    assert np.asarray(image.convert("RGB"))[32, 32].tolist() == [255, 0, 255]
    assert image.info["postprocessing"] == "CodeFormer visibility: 1.0, CodeFormer weight: 0.25"


def test_extras_visibility_outside_zero_one_names_the_flag(tmp_path, capsys, folders):
    source = tmp_path / "face.png"
    Image.new("RGB", (64, 64)).save(source)
    assert main(["extras", str(source), "--codeformer-visibility", "2", "--codeformer-models-path",
                 str(folders["CodeFormer"]), "-o", str(tmp_path / "out")]) == 2
    assert "--codeformer-visibility must be a number in [0, 1]" in capsys.readouterr().err


def test_generate_infotext_of_a_restored_image_restores_again(tiny_sd1_dir, tmp_path, capsys, folders):
    [first] = run(capsys, "generate", "a face", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "a"), *ARGS,
                  "--restore-faces", "--face-restoration-model", "GFPGAN", "--gfpgan-models-path",
                  str(folders["GFPGAN"]))
    [again] = run(capsys, "generate", "--infotext", first, "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "b"),
                  "--gfpgan-models-path", str(folders["GFPGAN"]))
    assert parse_infotext(Image.open(again).info["parameters"])["Face restoration"] == "GFPGAN"
    assert Image.open(again).tobytes() == Image.open(first).tobytes()


def test_outpaint_takes_restore_faces_and_its_folder(tiny_sd1_dir, tmp_path, capsys, folders):
    source = tmp_path / "in.png"
    picture = np.random.default_rng(5).integers(0, 255, (32, 64, 3), dtype=np.uint8)
    Image.fromarray(picture).save(source)
    [path] = run(capsys, "outpaint", str(source), "a face", "--model", str(tiny_sd1_dir), "-o", str(tmp_path / "out"),
                 "--steps", "2", "--seed", "3", "--pixels", "16", "--direction", "up,down", "--mask-blur", "0",
                 "--restore-faces", "--codeformer-models-path", str(folders["CodeFormer"]))
    image = Image.open(path)
    pixels = np.asarray(image.convert("RGB"))
    assert image.size == (64, 64)
    # the painted border holds the restored face; the picture itself is pasted back over it, as A1111's overlay
    assert pixels[13:16, 32].tolist() == [[255, 0, 255]] * 3  # inside the paste-back mask's soft edge
    assert (pixels[16:48] == picture).all()
    assert parse_infotext(image.info["parameters"])["Face restoration"] == "CodeFormer"
    assert folders["calls"] == ["codeformer-v0.1.0.pth"]
