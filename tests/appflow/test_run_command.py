"""`mixkit apps run` / `python -m appflow run` end to end on the tiny models, and `describe`: outputs written and read
back against the Python API called directly, errors before any model loads, Ctrl-C as Interrupt."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import webui.cli
from appflow import Appflow, Chain, Step, validate_chain
from appflow.__main__ import main as appflow_main
from appflow.apps import APPS
from appflow.run_command import claim_run_folder
from mixkit.io.audio import pcm16, read_wav
from pipelines.control import GenerationControl

SD_FAST = ["--option", "steps=2", "--option", "width=32", "--option", "height=32"]


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.setattr(webui.cli, "SUBCOMMANDS", ["apps"])
    return webui.cli.main


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fail the test if any model is loaded: the errors below must come before."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("appflow.cache.ModelCache.get", refuse)


@pytest.fixture
def picture(tmp_path):
    path = tmp_path / "in" / "photo.png"
    path.parent.mkdir()
    Image.new("RGB", (48, 40), (30, 60, 200)).save(path)
    return path


def read_result(folder) -> dict:
    return json.loads((folder / "result.json").read_text())


def test_text_to_image_writes_the_png_with_its_infotext_and_the_seed(cli, capsys, tiny_sd1_dir, tmp_path):
    out = tmp_path / "out"
    code = cli(["apps", "run", "text2image_generation", "--models", f"generator={tiny_sd1_dir}", "--input",
                "prompt=a red fox", "--seed", "7", *SD_FAST, "--option", "guidance_scale=5", "-o", str(out)])
    assert code == 0
    assert capsys.readouterr().out.split() == [str(out / "image.png"), str(out / "result.json")]
    document = read_result(out)
    assert document["app"] == "text2image_generation" and document["interrupted"] is False
    outputs = document["outputs"]
    assert outputs["image"] == outputs["result"] == "image.png" and outputs["images"] == ["image.png"]
    assert outputs["seeds"] == [7]
    [infotext] = outputs["infotexts"]
    assert infotext.startswith("a red fox\n") and "Steps: 2," in infotext and "Seed: 7," in infotext \
        and "CFG scale: 5," in infotext
    by_hand = Appflow("text2image_generation", models=[tiny_sd1_dir], steps=2, width=32, height=32, cfg_scale=5,
                      seed=7)(prompt="a red fox")
    with Image.open(out / "image.png") as image:
        assert image.info["parameters"] == infotext == by_hand["infotexts"][0]
        assert np.array_equal(np.asarray(image.convert("RGB")), np.asarray(by_hand["image"]))
    # the same folder again: refused before the run, then replaced with --overwrite
    assert cli(["apps", "run", "text2image_generation", "--models", f"generator={tiny_sd1_dir}", "--input",
                "prompt=x", *SD_FAST, "-o", str(out)]) == 2
    assert "already holds files" in capsys.readouterr().err
    assert cli(["apps", "run", "text2image_generation", "--model", str(tiny_sd1_dir), "--input", "prompt=x",
                "--seed", "8", *SD_FAST, "-o", str(out), "--overwrite"]) == 0
    assert read_result(out)["outputs"]["seeds"] == [8]


def test_captions_of_a_folder_as_one_batch_match_the_python_api(cli, tiny_blip2_dir, picture, tmp_path):
    second = picture.parent / "second.png"
    Image.new("RGB", (64, 64), (255, 255, 255)).save(second)
    out = tmp_path / "captions"
    assert appflow_main(["run", "image2text_generation", "--model", str(tiny_blip2_dir), "--input",
                         f"image={picture.parent}", "--option", "max_new_tokens=4", "-o", str(out)]) == 0
    by_hand = Appflow("image2text_generation", models=[tiny_blip2_dir], max_new_tokens=4)(
        image=[str(picture), str(second)])
    outputs = read_result(out)["outputs"]
    assert outputs["texts"] == by_hand["texts"] and outputs["text"] == by_hand["text"]
    assert sorted(p.name for p in out.iterdir()) == ["result.json"]


def test_a_video_is_written_with_its_frames(cli, tiny_text_to_video_dir, tmp_path):
    out = tmp_path / "video"
    assert cli(["apps", "run", "text_to_video_generation", "--model", str(tiny_text_to_video_dir), "--input",
                "prompt=a cat", "--seed", "6", "--option", "num_frames=3", "--option", "steps=2", "--option",
                "width=32", "--option", "height=40", "--option", "fps=10", "--video-format", "gif", "-o",
                str(out)]) == 0
    outputs = read_result(out)["outputs"]
    assert outputs["video"] == {"file": "video.gif", "format": "gif", "fps": 10, "frame_count": 3, "width": 32,
                                "height": 40}
    assert outputs["frames"] == ["frames-00.png", "frames-01.png", "frames-02.png"] and outputs["seed"] == 6
    by_hand = Appflow("text_to_video_generation", models=[tiny_text_to_video_dir], num_frames=3, steps=2, width=32,
                      height=40, seed=6)(prompt="a cat")
    with Image.open(out / "frames-01.png") as frame:
        assert np.array_equal(np.asarray(frame.convert("RGB")), np.asarray(by_hand["frames"][1]))
    with Image.open(out / "video.gif") as gif:
        assert gif.n_frames == 3 and gif.size == (32, 40)


def test_music_is_one_wav_read_back_as_the_apps_samples(cli, tiny_audioldm_dir, tmp_path):
    out = tmp_path / "music"
    assert cli(["apps", "run", "music_generation", "--models", f"audio_generator={tiny_audioldm_dir}", "--input",
                "prompt=a bell", "--seed", "3", "--option", "audio_length_in_s=0.02", "--option", "steps=2", "-o",
                str(out)]) == 0
    by_hand = Appflow("music_generation", models=[tiny_audioldm_dir], audio_length_in_s=0.02, steps=2, seed=3)(
        prompt="a bell")
    samples, rate = read_wav(out / "audio.wav")
    assert rate == by_hand["audio"].sample_rate
    assert np.array_equal(samples, pcm16(by_hand["waveform"]).astype(np.float32) / 32768.0)
    outputs = read_result(out)["outputs"]
    assert outputs["waveform"] == outputs["result"] == outputs["audio"] and outputs["audio"]["file"] == "audio.wav"
    assert sorted(p.name for p in out.iterdir()) == ["audio.wav", "result.json"]


@pytest.mark.parametrize("argv, message", [
    (["run", "qr_art"], "Unknown AppFlow app 'qr_art'. Did you mean 'qrcode_art'? Valid names: 'text2image_generation'"),
    (["run", "text2image_generation", "--input", "prompt=x", "--option", "steps=0"],
     "App 'text2image_generation', step 'generate': steps must be in [1, 1000], got 0."),
    (["run", "text2image_generation", "--input", "prompt=x", "--option", "steps=many"],
     "App 'text2image_generation', step 'generate': steps must be"),
    (["run", "text2image_generation", "--input", "prompt=x", "--option", "batch_size=two"],
     "App 'text2image_generation': --option batch_size takes a number, got 'two'."),
    (["run", "text2image_generation", "--input", "promt=x"], "has no input(s) ['promt']; its inputs: prompt (text)"),
    (["run", "text2image_generation"], "needs input 'prompt' (text): pass --input prompt=VALUE"),
    (["run", "zero_shot_classification", "--input", "image=nope.png", "--input", "labels=a"],
     "App 'zero_shot_classification': input 'image' (image): no image file 'nope.png'"),
    (["run", "music_generation", "--input", "prompt=x", "--option", "audio_length_in_s=-1"],
     "App 'music_generation', step 'generate': audio_length_in_s"),
    (["run", "image2text_generation", "--seed", "1", "--input", "image=x", "--option", "do_sample=true",
      "--option", "seed=2"], "given both as --seed and as --option seed="),
    (["run", "openset_det_sam", "--input", "image=x", "--seed", "1"], "has no seed option"),
    (["run", "openset_det_sam", "--models", "vae=x"], "has no model role 'vae'; its roles: detector, segmenter"),
    (["run", "text2image_generation", "--input", "prompt"], "--input 'prompt' must be NAME=VALUE"),
])
def test_errors_exit_2_on_one_line_naming_what_was_wrong_before_any_model_loads(cli, capsys, no_model_loads, tmp_path,
                                                                                argv, message):
    assert cli(["apps", *argv, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mixkit: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()
    assert appflow_main([*argv, "-o", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


class InterruptedInFirstStep(GenerationControl):
    """The user's first Ctrl-C landing during the first sampling step (what `interrupt_on_sigint` does on SIGINT):
    the running SD step stops after it and returns its image."""

    def take_skip(self) -> bool:  # asked by the pipeline after each sampling step that was not interrupted
        self.interrupt()
        return super().take_skip()


@pytest.fixture
def two_pass_app(monkeypatch):
    """An app of two SD steps, so an Interrupt in the first leaves the second unrun (AppInterrupted); registered for
    this test only (`APPS.unregister` trips over AppRegistry's `aliases` dict, hence the entry set directly)."""
    chain = Chain("cli_test_two_pass", [Step("text_to_image", id="draft"),
                                        Step("image_to_image", id="refine", inputs={"image": "draft.image"})],
                  inputs=["prompt"], outputs={"draft": "draft.image", "draft_infotexts": "draft.infotexts"})
    validate_chain(chain)
    monkeypatch.setitem(APPS._entries, chain.name, chain)
    return chain.name


def test_ctrl_c_interrupts_and_what_the_finished_steps_made_is_saved(cli, capsys, monkeypatch, tiny_sd1_dir,
                                                                     two_pass_app, tmp_path):
    monkeypatch.setattr("pipelines.control.GenerationControl", InterruptedInFirstStep)
    out = tmp_path / "partial"
    assert cli(["apps", "run", two_pass_app, "--model", str(tiny_sd1_dir), "--input", "prompt=a fox", "--seed", "1",
                *SD_FAST, "-o", str(out)]) == 130
    captured = capsys.readouterr()
    assert "interrupted; saved what the finished steps made (draft, draft_infotexts, images)" in captured.err
    document = read_result(out)
    assert document["interrupted"] is True
    [infotext] = document["outputs"]["draft_infotexts"]
    assert document["outputs"] == {"images": ["draft.png"], "draft": "draft.png", "draft_infotexts": [infotext]}
    assert sorted(path.name for path in out.iterdir()) == ["draft.png", "result.json"]
    with Image.open(out / "draft.png") as draft:
        assert draft.info["parameters"] == infotext and infotext.startswith("a fox\nSteps: 2,")


def test_a_hub_id_missing_from_the_cache_offline_fails_at_once_with_exit_2(cli, capsys, monkeypatch, picture,
                                                                          tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    assert cli(["apps", "run", "image2text_generation", "--model", "someone/not-cached", "--input",
                f"image={picture}", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "'someone/not-cached'" in err and "not in the Hugging Face cache" in err and "HF_HUB_OFFLINE" in err
    assert not (tmp_path / "out").exists()


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_shows_the_sampling_steps_and_a_pipe_does_not(cli, capsys, monkeypatch, tiny_audioldm_dir,
                                                                  tmp_path):
    argv = ["apps", "run", "music_generation", "--model", str(tiny_audioldm_dir), "--input", "prompt=a bell",
            "--option", "audio_length_in_s=0.02", "--option", "steps=3"]
    bar = re.compile(r"3/3 \[[^\]]*(step/s|s/step)")  # tqdm's "3/3 [00:00<00:00, 9.1step/s]"
    assert cli([*argv, "-o", str(tmp_path / "piped")]) == 0
    assert not bar.search(capsys.readouterr().err)
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    assert cli([*argv, "-o", str(tmp_path / "shown")]) == 0
    assert bar.search(terminal.getvalue())


def test_describe_prints_inputs_options_with_defaults_and_models(cli, capsys):
    assert cli(["apps", "describe", "mask_guided_inpainting"]) == 0
    out = capsys.readouterr().out
    assert "  mask: image (required; a mask image: white (or opaque strokes) = repaint)" in out
    assert "  steps=auto\n" in out and "  mask_blur=4\n" in out and "  seed=-1\n" in out
    assert "models (--models ROLE=SOURCE):\n  generator (stable-diffusion): " in out
    assert cli(["apps", "describe", "zero_shot_classification", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"] == {"image": "image", "labels": "texts"} and info["batch_inputs"] == ["image"]
    assert appflow_main(["describe", "zero_shot_classification", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == info
    assert cli(["apps", "describe", "nope"]) == 2
    assert "Unknown AppFlow app 'nope'" in capsys.readouterr().err


def test_apps_without_a_sub_command_still_lists(cli, capsys):
    assert cli(["apps", "qrcode_art", "--json"]) == 0
    assert [info["name"] for info in json.loads(capsys.readouterr().out)] == ["qrcode_art"]
    assert cli(["apps", "list", "qrcode_art"]) == 0
    assert capsys.readouterr().out.startswith("qrcode_art\n")


def test_without_o_each_run_gets_a_new_numbered_folder(cli, capsys, monkeypatch, tiny_blip2_dir, picture, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs" / "appflow" / "00007-other").mkdir(parents=True)
    argv = ["apps", "run", "image2text_generation", "--model", str(tiny_blip2_dir), "--input", f"image={picture}",
            "--option", "max_new_tokens=2"]
    assert cli(argv) == 0 and cli(argv) == 0
    printed = capsys.readouterr().out.split()
    assert printed == ["outputs/appflow/00008-image2text_generation/result.json",
                       "outputs/appflow/00009-image2text_generation/result.json"]


def test_auto_label_writes_masks_the_labelme_file_and_boxes_labels_in_result_json(cli, tiny_blip2_dir, tiny_dino_dir,
                                                                                 tiny_sam_dir, picture, tmp_path):
    out = tmp_path / "labels"
    models = [f"captioner={tiny_blip2_dir}", f"detector={tiny_dino_dir}", f"segmenter={tiny_sam_dir}"]
    assert cli(["apps", "run", "auto_label", *[arg for model in models for arg in ("--models", model)], "--input",
                f"image={picture}", "--option", "box_threshold=0", "--option", "text_threshold=0", "-o",
                str(out)]) == 0
    by_hand = Appflow("auto_label", models=[tiny_blip2_dir, tiny_dino_dir, tiny_sam_dir], box_threshold=0.0,
                      text_threshold=0.0)(image=str(picture))
    outputs = read_result(out)["outputs"]
    assert outputs["labels"] == by_hand["labels"] and len(outputs["labels"]) > 0
    assert np.allclose(outputs["boxes"], by_hand["boxes"].tolist()) and outputs["caption"] == by_hand["caption"]
    count = len(by_hand["labels"])
    assert outputs["seg_masks"] == outputs["masks"] == [f"seg_masks-{i:02d}.png" for i in range(count)]
    for index in range(count):
        with Image.open(out / f"seg_masks-{index:02d}.png") as mask:
            assert np.array_equal(np.asarray(mask) > 0, by_hand["seg_masks"][index].numpy())
    annotation = json.loads((out / "annotation.json").read_text())
    assert annotation == outputs["annotation"] and annotation["imagePath"] == "photo.png"
    assert len(annotation["shapes"]) >= count


def test_run_folders_number_on_past_99999_from_the_highest_of_any_width(tmp_path):
    root = tmp_path / "runs"
    for name in ("99999-a", "00003-b", "notes-1", "7-c"):
        (root / name).mkdir(parents=True)
    first = claim_run_folder(str(root), "app")
    second = claim_run_folder(str(root), "app")
    assert (first, second) == (str(root / "100000-app"), str(root / "100001-app"))
    assert (root / "100000-app").is_dir() and (root / "100001-app").is_dir()  # claimed: made, empty
    assert claim_run_folder(str(tmp_path / "new" / "root"), "app") == str(tmp_path / "new" / "root" / "00001-app")


def test_a_run_folder_taken_after_the_listing_is_skipped_not_shared(tmp_path, monkeypatch):
    """Two runs started together list the same folders; the one that makes its folder second takes the next
    number (simulated: the listing is stale, 00001-app was made by the other run after it)."""
    (tmp_path / "00001-app").mkdir()
    monkeypatch.setattr(Path, "iterdir", lambda self: iter(()))
    assert claim_run_folder(str(tmp_path), "app") == str(tmp_path / "00002-app")


def test_without_o_the_folder_is_claimed_before_the_run_and_removed_when_it_fails(cli, capsys, monkeypatch,
                                                                                tiny_blip2_dir, picture, tmp_path):
    monkeypatch.chdir(tmp_path)
    seen = []

    def failing_run(flow, inputs):
        seen.append(sorted(p.name for p in (tmp_path / "outputs" / "appflow").iterdir()))
        raise ValueError("the run failed")

    monkeypatch.setattr("appflow.run_command.run_with_progress", failing_run)
    argv = ["apps", "run", "image2text_generation", "--model", str(tiny_blip2_dir), "--input", f"image={picture}"]
    assert cli(argv) == 2
    assert "the run failed" in capsys.readouterr().err
    assert seen == [["00001-image2text_generation"]]
    assert list((tmp_path / "outputs" / "appflow").iterdir()) == []
