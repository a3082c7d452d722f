"""`mixkit img2img IMAGE "prompt" --loopback LOOPS ...`: A1111's Loopback from the command line
(webui/cli/loopback_flags.py): the grid then every loop's image, refusals before the model loads and nothing written."""

import pytest
from PIL import Image

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru
from pipelines.infotext import parse_infotext
from webui.cli import main

from .cli_inputs import write_noise_picture

ARGS = ["--width", "64", "--height", "64", "--steps", "2", "--seed", "8", "--sampler", "Euler",
        "--denoising-strength", "0.75"]


@pytest.fixture(scope="module")
def init(tmp_path_factory):
    path = tmp_path_factory.mktemp("loopback-cli") / "init.png"
    write_noise_picture(path, seed=0, width=64, height=64)
    return path


def test_loops_write_the_grid_then_each_loop(tiny_sd1_dir, init, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(out), *ARGS,
                 "--loopback", "3", "--loopback-final-strength", "0.25", "--loopback-curve", "aggressive"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    assert len(printed) == 4 and printed[0].endswith("grid-0000.png")
    assert Image.open(printed[0]).size == (192, 64)
    texts = [parse_infotext(Image.open(path).text["parameters"]) for path in printed[1:]]
    assert [(t["Seed"], t["Denoising curve"], t["Final denoising strength"]) for t in texts] == [
        ("8", "Aggressive", "0.25"), ("9", "Aggressive", "0.25"), ("10", "Aggressive", "0.25")]
    assert texts[0]["Denoising strength"] == "0.75" and texts[2]["Denoising strength"] == "0.25"
    assert float(texts[1]["Denoising strength"]) == pytest.approx(0.75 - 0.5 * 2 ** -0.5)  # sin(pi/4) of the way


def test_clip_appends_the_interrogation_to_the_prompt(tiny_sd1_dir, init, tmp_path, capsys):
    code = main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--loopback", "1", "--loopback-interrogate", "CLIP"])
    assert code == 0
    [path] = capsys.readouterr().out.split()
    prompt = parse_infotext(Image.open(path).text["parameters"])["Prompt"]
    assert prompt.startswith("a red cat, ") and len(prompt) > len("a red cat, ")


def test_clip_interrogation_loads_each_model_once_for_all_loops(tiny_sd1_dir, init, tmp_path, capsys, monkeypatch):
    """Three loops interrogate three init images with one load of the CLIP (and of the captioner): a CLI job keeps
    them loaded, as A1111's interrogate_keep_models_in_memory would."""
    from collections import Counter

    from mixkit.models import vlm

    loads, real = Counter(), vlm.load_vlm

    def load(source, **kwargs):
        loads[str(source)] += 1
        return real(source, **kwargs)
    monkeypatch.setattr(vlm, "load_vlm", load)
    code = main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--loopback", "3", "--loopback-interrogate", "CLIP"])
    assert code == 0
    printed = capsys.readouterr().out.split()
    prompts = [parse_infotext(Image.open(path).text["parameters"])["Prompt"] for path in printed[1:]]
    assert len(prompts) == 3 and all(prompt.startswith("a red cat, ") for prompt in prompts)
    assert loads["mixkit-tiny-clip"] == 1 and set(loads.values()) == {1}, loads  # the captioner may be cached


@pytest.fixture(scope="module")
def deepbooru_folder(tmp_path_factory):
    """A tagger scoring solo 0.881, 1girl 0.953, hat_(object) 0.269, long_hair 0.622 on every image."""
    folder = tmp_path_factory.mktemp("torch_deepdanbooru")
    save_deepbooru(folder / "model-resnet_custom_v3.pt", crafted_deepbooru_state([2.0, 3.0, -1.0, 0.5]),
                   ["solo", "1girl", "hat_(object)", "long_hair"])
    return folder


def test_deepbooru_appends_the_tags_at_a1111s_default_settings(tiny_sd1_dir, init, deepbooru_folder, tmp_path,
                                                               capsys):
    code = main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--loopback", "2", "--loopback-interrogate", "deepbooru",
                 "--deepdanbooru-models-path", str(deepbooru_folder)])
    assert code == 0
    printed = capsys.readouterr().out.split()
    prompts = [parse_infotext(Image.open(path).text["parameters"])["Prompt"] for path in printed[1:]]
    # above 0.5, sorted by name, underscores as spaces
    assert prompts == ["a red cat, 1girl, long hair, solo"] * 2


@pytest.mark.parametrize("flags, message", [
    (["--loopback", "0"],
     "mixkit: error: --loopback must be a whole number from 1 to 32 (A1111's Loops slider), got 0."),
    (["--loopback", "33"], "error: --loopback must be a whole number from 1 to 32"),
    (["--loopback", "2", "--loopback-final-strength", "1.5"],
     "mixkit: error: --loopback-final-strength must be a number from 0 to 1, got 1.5."),
    (["--loopback", "2", "--loopback-curve", "steep"],
     "mixkit: error: --loopback-curve must be one of 'Aggressive', 'Linear', 'Lazy', got 'steep'."),
    (["--loopback", "2", "--loopback-interrogate", "blip"],
     "mixkit: error: --loopback-interrogate must be one of 'None', 'CLIP', 'DeepBooru', got 'blip'."),
    (["--loopback", "2", "--loopback-interrogate", "deepbooru"],
     "'DeepBooru' needs a DeepBooru tagger and none is configured"),
    (["--loopback", "2", "--loopback-interrogate", "deepbooru"], "--deepdanbooru-models-path FOLDER"),
    (["--loopback", "2", "--loopback-interrogate", "deepbooru", "--deepdanbooru-models-path", "no-such-folder"],
     "The DeepDanbooru folder 'no-such-folder' does not exist"),
    (["--loopback", "2", "--deepdanbooru-models-path", "x"], "only matters with --loopback-interrogate deepbooru"),
    (["--loopback-curve", "Lazy"], "--loopback-curve sets up Loopback; add --loopback LOOPS"),
    (["--loopback", "2", "--interrogate-clip-model", "x"], "only matter with --loopback-interrogate clip"),
    (["--loopback", "2", "-o", "out.png"], "give -o a folder"),
    (["--loopback", "2", "--batch-size", "2"], "leave out --batch-size 2"),
])
def test_bad_flags_are_refused_before_the_model_loads(init, tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    code = main(["img2img", str(init), "a red cat", "--model", str(tmp_path / "no-model"), *ARGS, *flags])
    assert code == 2 and message in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == []


# -- interrogation models that cannot load ---------------------------------------------------------------------------

@pytest.fixture
def no_checkpoint_load(monkeypatch):
    """Fails the test if the checkpoint starts loading (the interrogation models load before it)."""
    from pipelines.img2img import ImageToImage

    monkeypatch.setattr(ImageToImage, "from_pretrained", classmethod(lambda *a, **k: pytest.fail("the model loaded")))


def test_a_tagger_file_that_cannot_load_is_one_error_naming_its_flag(init, tmp_path, capsys, no_checkpoint_load):
    folder = tmp_path / "torch_deepdanbooru"
    folder.mkdir()
    file = folder / "model-resnet_custom_v3.pt"
    file.write_bytes(b"<html>404</html>")  # a failed download: found by name, loads nothing
    out = tmp_path / "out"
    code = main(["img2img", str(init), "a red cat", "--model", str(tmp_path / "model"), "-o", str(out), *ARGS,
                 "--loopback", "2", "--loopback-interrogate", "deepbooru", "--deepdanbooru-models-path", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"mixkit: error: --deepdanbooru-models-path {str(file)!r} cannot be loaded, so no image "
                              f"was generated: {str(file)!r} is not a recognised checkpoint"), err
    assert not out.exists()


def test_a_clip_that_cannot_load_is_one_error_naming_its_flag(init, tmp_path, capsys, no_checkpoint_load):
    not_a_clip = tmp_path / "empty"
    not_a_clip.mkdir()
    out = tmp_path / "out"
    code = main(["img2img", str(init), "a red cat", "--model", str(tmp_path / "model"), "-o", str(out), *ARGS,
                 "--loopback", "2", "--loopback-interrogate", "clip", "--interrogate-clip-model", str(not_a_clip)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == (f"mixkit: error: --interrogate-clip-model {str(not_a_clip)!r} cannot be loaded, so no image was "
                       f"generated: {str(not_a_clip)!r} has no config.json; pass a folder saved with save_pretrained "
                       "or a hub id"), err
    assert not out.exists()


def test_the_captioner_and_clip_are_loaded_before_the_checkpoint(tiny_sd1_dir, init, tmp_path, capsys, monkeypatch):
    """Both interrogation models are in memory when the checkpoint starts loading, not loaded at the first loop."""
    from appflow import Appflow
    from mixkit.interrogate import ClipInterrogator
    from pipelines.img2img import ImageToImage

    events, load_models, clip_load = [], Appflow.load_models, ClipInterrogator.load
    monkeypatch.setattr(Appflow, "load_models", lambda self: events.append("captioner") or load_models(self))
    monkeypatch.setattr(ClipInterrogator, "load", lambda self: events.append("clip") or clip_load(self))
    real = ImageToImage.from_pretrained.__func__
    monkeypatch.setattr(ImageToImage, "from_pretrained",
                        classmethod(lambda cls, *a, **k: events.append("checkpoint") or real(cls, *a, **k)))
    code = main(["img2img", str(init), "a red cat", "--model", str(tiny_sd1_dir), "-o", str(tmp_path), *ARGS,
                 "--loopback", "1", "--loopback-interrogate", "clip"])
    assert code == 0, capsys.readouterr().err
    assert events == ["captioner", "clip", "checkpoint"]
