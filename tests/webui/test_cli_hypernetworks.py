"""`--hypernetwork-dir` on `mixkit generate` and `mixkit webui`: tags applied, bad ones refused before the model
loads."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from mixkit.testing.tiny_hypernetwork import write_a1111_hypernetwork
from webui.cli import main

RUN = ["--steps", "2", "--seed", "5", "--sampler", "Euler", "--width", "64", "--height", "64"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("hypernetworks")
    write_a1111_hypernetwork(root / "anime.pt", widths=(32, 64))
    return root


def generate(capsys, tmp_path, model, *argv) -> np.ndarray:
    code = main(["generate", *argv, "--model", str(model), *RUN, "-o", str(tmp_path / f"out{len(argv)}.png")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return np.asarray(Image.open(tmp_path / f"out{len(argv)}.png"))


def test_generate_applies_the_tag_from_the_folder(tiny_sd1_dir, folder, tmp_path, capsys):
    plain = generate(capsys, tmp_path, tiny_sd1_dir, "a red circle")
    tagged = generate(capsys, tmp_path, tiny_sd1_dir, "a red circle <hypernet:anime:1>", "--hypernetwork-dir",
                      str(folder))
    assert not np.array_equal(plain, tagged)


@pytest.fixture
def no_model_load(monkeypatch):
    from pipelines.txt2img import TextToImage

    monkeypatch.setattr(TextToImage, "from_pretrained",
                        classmethod(lambda *a, **k: pytest.fail("the model loaded before the flag check")))


@pytest.mark.parametrize("prompt, folder_name, message", [
    ("a <hypernet:anim:1>", "hypernetworks", "Did you mean anime?"),
    ("a <hypernet:anime:x>", "hypernetworks", "strength must be a number"),
    ("a <hypernet:anime:1>", "missing", "--hypernetwork-dir) does not exist"),
])
def test_generate_refuses_bad_tags_and_folders_before_loading(tiny_sd1_dir, folder, tmp_path, capsys, no_model_load,
                                                              prompt, folder_name, message):
    path = folder if folder_name == "hypernetworks" else tmp_path / folder_name
    code = main(["generate", prompt, "--model", str(tiny_sd1_dir), *RUN, "--hypernetwork-dir", str(path),
                 "-o", str(tmp_path / "o")])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_webui_takes_the_folder(folder, tmp_path):
    import argparse

    from webui.cli.webui import add_parser, config_from_args

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["webui", "--hypernetwork-dir", str(folder), "--output-dir", str(tmp_path / "o")])
    assert config_from_args(args).hypernetwork_dir == str(folder)
