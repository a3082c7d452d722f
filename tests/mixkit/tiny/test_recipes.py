"""The mixkit-tiny recipes run end to end through `mixkit train recipe ...` (tiny sizes, a few steps).

These prove the recipes work and write loadable models; the quality of the full recipes is
measured by `mixkit eval tiny` (see README), not here.
"""

from __future__ import annotations

import json
import os

import pytest

from webui.cli import main


@pytest.fixture(scope="module")
def recipe_root(tmp_path_factory):
    return tmp_path_factory.mktemp("recipes")


@pytest.fixture(scope="module", autouse=True)
def isolated_cache(recipe_root):
    """Rendered worlds and hashes go to this module's folder: not ~/.cache, and not left set for later modules."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MIXKIT_CACHE_DIR", str(recipe_root / "cache"))
        yield


@pytest.fixture(scope="module")
def tiny_clip(recipe_root):
    folder = recipe_root / "clip"
    code = main(["train", "recipe", "tiny-clip", "--set", f"output={folder}", "--set", "train_images=48",
                 "--set", "batch_size=10", "--set", "steps=2", "--set", "hidden_size=32", "--set", "layers=1",
                 "--set", "shape_warmup_steps=1", "--set", "layout_head=true"])
    assert code == 0
    return folder


def _saved_keys(folder):
    from safetensors import safe_open

    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return list(f.keys())


@pytest.mark.parametrize("setting, message", [
    ({"shape_warmup_steps": -1}, "shape_warmup_steps"),
    ({"shape_head_weight": 0.0}, "shape_head_weight > 0"),
    ({"shape_head_weight": -1.0}, "shape_head_weight must be >= 0"),
])
def test_tiny_clip_recipe_refuses_bad_shape_settings(setting, message):
    from mixkit.tiny.recipe_clip import TinyClipRecipe

    with pytest.raises(ValueError, match=message):
        TinyClipRecipe(**setting).check()


@pytest.fixture(scope="module")
def vae_folder(recipe_root):
    folder = recipe_root / "vae"
    assert main(["train", "recipe", "tiny-vae", "--set", f"output={folder}", "--set", "train_images=16",
                 "--set", "batch_size=4", "--set", "steps=2"]) == 0
    return folder


def test_tiny_clip_recipe_writes_a_clip_that_load_vlm_reads(tiny_clip):
    from mixkit.models.vlm import load_vlm
    from mixkit.data.shapes_render import render_scene
    from mixkit.data.shapes_vocab import Scene, ShapeSpec

    record = json.loads((tiny_clip / "recipe_record.json").read_text())
    assert record["model"] == "tiny-clip" and record["recipe"]["steps"] == 2
    assert 0 <= record["metrics"]["shape_top1"] <= 1 and record["curve"][-1]["step"] == 3  # 1 shape warm-up + 2
    assert not any("shape_head" in key for key in _saved_keys(tiny_clip))  # the auxiliary head is not shipped
    image = render_scene(Scene((ShapeSpec("star", "red", "small", "center"),), "blue"), 64)
    scores = load_vlm(str(tiny_clip)).classify([image], ["a red star", "a blue circle"])
    assert len(scores) == 1


def test_tiny_blip2_recipe_with_image_positions_writes_a_captioner_load_vlm_reads(tiny_clip, recipe_root):
    from mixkit.data.shapes_render import render_scene
    from mixkit.data.shapes_vocab import Scene, ShapeSpec
    from mixkit.models.vlm import load_vlm

    folder = recipe_root / "blip2"
    assert main(["train", "recipe", "tiny-blip2", "--set", f"clip={tiny_clip}", "--set", f"output={folder}",
                 "--set", "train_images=24", "--set", "batch_size=4", "--set", "stage1_steps=1",
                 "--set", "stage2_steps=2", "--set", "qformer_hidden=16", "--set", "lm_hidden=16",
                 "--set", "image_positions=true", "--set", "train_vision=true",
                 "--set", "tower_warmup_steps=2", "--set", "tower_warmup_images=8", "--set", "eval_images=3"]) == 0
    record = json.loads((folder / "recipe_record.json").read_text())
    assert [stage["stage"] for stage in record["curve"]] == ["data", "tower_warmup", "stage1", "stage2"]
    assert record["curve"][1]["curve"][-1]["step"] == 2
    assert 0 <= record["metrics"]["vqa/accuracy"] <= 1
    architecture = json.loads((folder / "mixkit_vlm.json").read_text())
    assert architecture["bridge"]["qformer"]["image_positions"] == 65  # 8x8 patches of 64 px + CLS
    assert not (recipe_root / "blip2.work").exists()
    assert "bridge.qformer.image_position_embeddings" in _saved_keys(folder)
    umask = os.umask(0)
    os.umask(umask)
    assert (folder / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask  # not safetensors' 0600
    assert folder.stat().st_mode & 0o777 == 0o777 & ~umask
    captioner = load_vlm(str(folder))
    image = render_scene(Scene((ShapeSpec("star", "red", "small", "center"),), "blue"), 64)
    assert isinstance(captioner.caption([image], max_new_tokens=4)[0], str)


def test_tiny_blip2_dataset_repeats_only_the_kinds_of_question_asked_for(tmp_path):
    from mixkit.tiny.recipe_blip2 import write_world_dataset

    def lines(folder, repeats):
        _, mixed = write_world_dataset(folder, 12, 0, 16, question_repeats=repeats)
        return [json.loads(line) for line in mixed.read_text().splitlines()]

    once, more = lines(tmp_path / "a", None), lines(tmp_path / "b", {"position": 3, "size": 2})
    where = [row for row in once if row.get("question", "").startswith("where is")]
    sizes = [row for row in once if row.get("question", "").startswith("what size")]
    assert where and sizes and len(more) == len(once) + 2 * len(where) + len(sizes)
    assert [row for row in more if row not in where + sizes] == [row for row in once if row not in where + sizes]
    assert all(more.count(row) == 3 for row in where) and all(more.count(row) == 2 for row in sizes)


def test_tiny_blip2_dataset_decodes_the_chosen_share_of_images_through_the_vae(tmp_path):
    import numpy as np
    from PIL import Image

    from mixkit.tiny.recipe_blip2 import TinyBlip2Recipe, vae_round_trip, write_world_dataset

    def images(folder, fraction):
        captions, _ = write_world_dataset(folder, 40, 0, 32, decoded_fraction=fraction)
        rows = [json.loads(line) for line in captions.read_text().splitlines()]
        return [np.asarray(Image.open(folder / row["image"])) for row in rows], [row["text"] for row in rows]

    clean, texts = images(tmp_path / "clean", 0.0)
    half, half_texts = images(tmp_path / "half", 0.5)
    every, _ = images(tmp_path / "all", 1.0)
    assert half_texts == texts  # labels are the renders' scenes either way
    decoded = vae_round_trip([Image.fromarray(a) for a in clean], "mixkit-tiny-sd")
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(every, decoded))
    same = [np.array_equal(a, b) for a, b in zip(half, clean)]
    assert 10 <= same.count(False) <= 30  # about half, a seeded choice
    assert all(np.array_equal(h, c if kept else np.asarray(d)) for h, c, d, kept in zip(half, clean, decoded, same))
    for bad in (-0.1, 1.5, "half", True):
        with pytest.raises(ValueError, match="decoded_fraction must be a number in \\[0, 1\\]"):
            TinyBlip2Recipe(decoded_fraction=bad).check()


def test_tiny_vae_recipe_then_tiny_sd_recipe_reusing_it_give_a_folder_the_pipeline_loads(tiny_clip, recipe_root,
                                                                                          vae_folder):
    import torch
    from diffusers import AutoencoderKL
    from transformers import CLIPTextModel

    from pipelines.txt2img import TextToImage

    vae_record = json.loads((vae_folder / "recipe_record.json").read_text())
    assert vae_record["model"] == "tiny-vae" and "vae_psnr" in vae_record["metrics"]
    assert [p.name for p in recipe_root.iterdir() if p.name.startswith(".")] == []  # nothing staged is left
    vae = AutoencoderKL.from_pretrained(vae_folder)
    assert vae.config.scaling_factor > 0 and vae.config.scaling_factor != 0.18215  # measured, not SD's

    folder = recipe_root / "sd"
    code = main(["train", "recipe", "tiny-sd", "--set", f"output={folder}", "--set", f"clip={tiny_clip}",
                 "--set", f"vae={vae_folder}", "--set", "train_images=32", "--set", "batch_size=4", "--set", "steps=2",
                 "--set", "eval_prompts=2", "--set", "eval_every=2", "--set", "unet_channels=[32, 32, 32]"])
    assert code == 0
    record = json.loads((folder / "recipe_record.json").read_text())
    assert {"single/shape", "single/colour", "single/background", "vae_psnr"} <= set(record["metrics"])
    shipped_vae = AutoencoderKL.from_pretrained(folder / "vae")
    assert shipped_vae.config.scaling_factor == vae.config.scaling_factor
    assert TextToImage.from_pretrained(folder).model.recommended.cfg_scale == 5.0  # its mixkit_generation.json

    continued = recipe_root / "sd-continued"  # training can continue from a tiny-sd folder; the record keeps the chain
    assert main(["train", "recipe", "tiny-sd", "--set", f"output={continued}", "--set", f"clip={tiny_clip}",
                 "--set", f"vae={vae_folder}", "--set", f"init_from={folder}", "--set", "train_images=32",
                 "--set", "batch_size=4", "--set", "steps=1", "--set", "eval_prompts=2", "--set", "eval_every=1",
                 "--set", "unet_channels=[32, 32, 32]", "--set", "train_text_encoder=true",
                 "--set", "text_encoder_learning_rate=0.01", "--set", "ema_decay=0",
                 "--set", "full_resolution_attention=true", "--set", "foreground_weight=4",
                 "--set", "full_resolution_transformer_layers=2"]) == 0
    curve = json.loads((continued / "recipe_record.json").read_text())["curve"]
    chain = {entry["stage"]: entry for entry in curve}
    grows = [entry for entry in curve if entry["stage"] == "grow"]  # attention at 16x16, then a second block there
    assert len(grows) == 2 and grows[1]["parameters_before"] == grows[0]["parameters_after"]
    assert all(grow["parameters_after"] > grow["parameters_before"] for grow in grows)
    unet_config = json.loads((continued / "unet" / "config.json").read_text())
    assert unet_config["down_block_types"][0] == "CrossAttnDownBlock2D"
    assert unet_config["transformer_layers_per_block"] == [2, 1, 1]
    assert chain["init"]["recipe"]["steps"] == 2 and chain["init"]["model"] == "tiny-sd"
    assert chain["init"]["earlier"][0]["stage"] == "vae-from"  # the earlier run's own sources come along
    assert chain["vae-from"]["model"] == "tiny-vae"
    first, second = (CLIPTextModel.from_pretrained(f / "text_encoder").state_dict() for f in (folder, continued))
    assert any(not torch.equal(first[k], second[k]) for k in first)  # the text encoder was trained and saved
    for source in (folder, continued):  # the grown UNet loads through the same public path
        result = TextToImage.from_pretrained(source)(prompt="a red circle on a blue background", steps=2, width=64,
                                                     height=64, seed=1)
        assert result.images[0].size == (64, 64)


def test_tiny_vae_can_continue_with_a_frozen_encoder_so_its_latents_stay_valid(vae_folder, recipe_root):
    import torch
    from diffusers import AutoencoderKL

    sharper = recipe_root / "vae-decoder"
    assert main(["train", "recipe", "tiny-vae", "--set", f"output={sharper}", "--set", f"init_from={vae_folder}",
                 "--set", "train_encoder=false", "--set", "foreground_weight=4", "--set", "train_images=16",
                 "--set", "batch_size=4", "--set", "steps=2", "--set", "learning_rate=0.01"]) == 0
    before, after = AutoencoderKL.from_pretrained(vae_folder), AutoencoderKL.from_pretrained(sharper)
    old, new = before.state_dict(), after.state_dict()
    frozen = [k for k in old if k.startswith(("encoder.", "quant_conv."))]
    trained = [k for k in old if k.startswith(("decoder.", "post_quant_conv."))]
    assert frozen and all(torch.equal(old[k], new[k]) for k in frozen)
    assert any(not torch.equal(old[k], new[k]) for k in trained)
    assert after.config.scaling_factor == before.config.scaling_factor  # same latents, same scale
    record = json.loads((sharper / "recipe_record.json").read_text())
    assert record["curve"][0]["stage"] == "init" and record["curve"][0]["recipe"]["steps"] == 2
    assert record["recipe"]["foreground_weight"] == 4


def test_foreground_mask_marks_shape_pixels_and_a_one_pixel_rim():
    import torch

    from mixkit.tiny.recipe_vae import foreground_mask

    images = torch.zeros(1, 3, 6, 6)
    images[:, 2] = -1.0  # background: one colour everywhere ...
    images[0, :, 2, 3] = torch.tensor([1.0, 0.0, 0.0])  # ... but one shape pixel
    expected = torch.zeros(1, 1, 6, 6)
    expected[0, 0, 1:4, 2:5] = 1.0
    assert torch.equal(foreground_mask(images), expected)


def test_tiny_sd_foreground_weights_mark_every_latent_cell_a_shape_or_its_rim_touches():
    import torch

    from mixkit.tiny.recipe_sd import latent_foreground_weights
    from mixkit.tiny.world_data import WorldTensors

    images = torch.zeros(1, 3, 8, 8, dtype=torch.uint8)  # black background, 4x4 pixels per latent cell
    images[0, 0, 2, 3] = 255  # one red pixel; with its rim: rows 1..3, columns 2..4
    train = WorldTensors(images, ["a red dot"], [None])
    expected = torch.ones(1, 1, 2, 2)
    expected[0, 0, 0, :] = 5.0  # the rim reaches column 4, the second cell of the top row
    assert torch.equal(latent_foreground_weights(train, 4, 4.0), expected)
    assert latent_foreground_weights(train, 4, 0.0) is None


def test_reconstruction_loss_weights_shape_pixels_and_is_plain_l1_plus_mse_at_zero():
    import torch
    import torch.nn.functional as F

    from mixkit.tiny.recipe_vae import reconstruction_loss

    images = torch.zeros(1, 3, 4, 4)
    images[0, 0, 0, 0] = 1.0  # shape pixel; its rim covers (0..1, 0..1): 4 of 16 pixels weighted
    reconstruction = torch.full_like(images, 0.5)
    assert torch.equal(reconstruction_loss(reconstruction, images, 0.0),
                       F.l1_loss(reconstruction, images) + F.mse_loss(reconstruction, images))
    # every error is 0.5 (|e| = 0.5, e^2 = 0.25); weights are 3 on 4 pixels x 3 channels, 1 elsewhere
    mean_weight = (12 * 3 + 36 * 1) / 48
    assert torch.allclose(reconstruction_loss(reconstruction, images, 2.0), torch.tensor(mean_weight * 0.75))


@pytest.mark.parametrize("settings, fragment", [
    (["train_encoder=false"], "set init_from"),
    (["init_from=/nowhere/at/all"], "not an autoencoder folder"),
    (["foreground_weight=-1"], "foreground_weight"),
])
def test_tiny_vae_recipe_refuses_settings_that_cannot_work(settings, fragment, capsys):
    args = [a for s in settings for a in ("--set", s)]
    assert main(["train", "recipe", "tiny-vae", *args]) == 2
    assert fragment in capsys.readouterr().err


def test_recipe_needs_a_name_and_unknown_names_list_the_valid_ones(capsys):
    assert main(["train", "recipe"]) == 2
    assert "tiny-sd" in capsys.readouterr().err
    assert main(["train", "recipe", "tiny-nothing"]) == 2
    assert "tiny-blip2" in capsys.readouterr().err


def test_tiny_sd_recipe_without_its_clip_says_what_to_do(tmp_path, capsys):
    assert main(["train", "recipe", "tiny-sd", "--set", f"clip={tmp_path / 'missing'}"]) == 2
    assert "mixkit train recipe tiny-clip" in capsys.readouterr().err


def test_tiny_sd_recipe_continuing_a_model_keeps_its_autoencoder_unless_told_otherwise(tmp_path):
    from mixkit.tiny.recipe_sd import TinySDRecipe
    from mixkit.tiny.shipped import shipped_model_path

    shipped = shipped_model_path("mixkit-tiny-sd")
    recipe = TinySDRecipe(init_from=str(shipped))
    recipe.check()
    assert recipe.vae == str(shipped / "vae")
    (tmp_path / "config.json").write_text("{}")
    other = TinySDRecipe(init_from=str(shipped), vae=str(tmp_path))
    other.check()
    assert other.vae == str(tmp_path)


def test_tiny_sd_recipe_with_a_missing_vae_folder_says_what_to_do(tmp_path, capsys):
    assert main(["train", "recipe", "tiny-sd", "--set", f"vae={tmp_path / 'missing'}"]) == 2
    assert "mixkit train recipe tiny-vae" in capsys.readouterr().err
    assert main(["train", "recipe", "tiny-sd", "--set", f"init_from={tmp_path}"]) == 2
    assert "not a tiny-sd folder" in capsys.readouterr().err
    assert main(["train", "recipe", "tiny-sd", "--set", "offset_noise=1.5"]) == 2
    assert "offset_noise" in capsys.readouterr().err
    assert main(["train", "recipe", "tiny-sd", "--set", "foreground_weight=-1"]) == 2
    assert "foreground_weight must be >= 0" in capsys.readouterr().err


def test_attribute_head_targets_read_layout_only_for_a_lone_shape():
    import torch

    from mixkit.data.shapes import WorldConfig
    from mixkit.data.shapes_vocab import Scene, ShapeSpec
    from mixkit.tiny.recipe_clip import AttributeHead

    world = WorldConfig()
    lone = Scene((ShapeSpec("star", "red", "small", "top left"),), "blue")
    pair = Scene((ShapeSpec("star", "red", "small"), ShapeSpec("cross", "green", "large")), "blue", "left of")
    head = AttributeHead(8, world, layout=True)
    targets = head.targets([lone, pair])
    shapes = len(world.shapes)
    assert targets[0, :shapes].tolist() == [float(s == "star") for s in world.shapes]
    assert targets[1, :shapes].tolist() == [float(s in ("star", "cross")) for s in world.shapes]
    assert targets[0, shapes:].tolist() == [world.positions.index("top left"), world.sizes.index("small")]
    assert targets[1, shapes:].tolist() == [-100, -100]  # a pair has no single position or size
    assert head(torch.zeros(2, 8)).shape == (2, shapes + len(world.positions) + len(world.sizes))
    loss = head.loss(torch.randn(2, 8), targets)
    assert torch.isfinite(loss)
    only_pairs = head.loss(torch.randn(1, 8), targets[1:])  # nothing to read layout from: shape loss only
    assert torch.isfinite(only_pairs)
    assert AttributeHead(8, world, layout=False).targets([lone]).shape == (1, shapes)


def test_attribute_head_loss_leaves_layout_out_when_asked():
    import torch

    from mixkit.data.shapes import WorldConfig
    from mixkit.data.shapes_vocab import Scene, ShapeSpec
    from mixkit.tiny.recipe_clip import AttributeHead

    world = WorldConfig()
    head = AttributeHead(8, world, layout=True)
    targets = head.targets([Scene((ShapeSpec("star", "red", "small", "top left"),), "blue")])
    pooled = torch.randn(1, 8)
    shape_only = torch.nn.functional.binary_cross_entropy_with_logits(head(pooled)[:, :len(world.shapes)],
                                                                      targets[:, :len(world.shapes)])
    assert torch.equal(head.loss(pooled, targets, layout=False), shape_only)
    assert head.loss(pooled, targets, layout=True) > shape_only


def test_a_recipe_replaces_only_its_own_earlier_output(tiny_clip, tmp_path, monkeypatch):
    # A recipe pointed at "." used to delete the working folder's files; only a folder holding recipe_record.json
    # (an earlier recipe output) may be replaced, and only once the new output is whole.
    from mixkit.tiny.recipe_common import check_recipe_output

    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep")
    args = ["train", "recipe", "tiny-vae", "--set", "train_images=8", "--set", "batch_size=4", "--set", "steps=1"]
    monkeypatch.chdir(precious)
    for output in (".", str(precious), ""):
        assert main([*args, "--set", f"output={output}"]) == 2
    assert [p.name for p in precious.iterdir()] == ["notes.txt"] and (precious / "notes.txt").read_text() == "keep"
    with pytest.raises(ValueError, match="is the current folder"):
        check_recipe_output(".")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="already exists and is not an empty folder"):
        check_recipe_output(str(precious))
    assert check_recipe_output(str(tmp_path / "new")) == tmp_path / "new"
    # A rerun of tiny-clip onto its own output replaces it (the record marks it), with a curve point at a stop step.
    record = (tiny_clip / "recipe_record.json").read_text()
    assert main(["train", "recipe", "tiny-clip", "--set", f"output={tiny_clip}", "--set", "train_images=48",
                 "--set", "batch_size=10", "--set", "steps=3", "--set", "hidden_size=32", "--set", "layers=1",
                 "--set", "shape_warmup_steps=1", "--set", "layout_head=true", "--stop-at-step", "1"]) == 0
    assert (tiny_clip / "recipe_record.json").read_text() != record
    assert [p.name for p in tiny_clip.parent.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("recipe_class", ["recipe_clip.TinyClipRecipe", "recipe_sd.TinySDRecipe",
                                          "recipe_vae.TinyVaeRecipe", "recipe_blip2.TinyBlip2Recipe"])
def test_recipe_settings_of_the_wrong_type_are_named(recipe_class):
    import importlib

    from mixkit.tiny.recipe_common import check_recipe_types

    module, name = recipe_class.split(".")
    recipe = getattr(importlib.import_module(f"mixkit.tiny.{module}"), name)
    check_recipe_types(recipe())  # the defaults pass
    steps = "stage2_steps" if name == "TinyBlip2Recipe" else "steps"
    for settings, message in (({"learning_rate": "abc"}, "learning_rate must be a finite number, got 'abc'"),
                              ({"threads": -1}, "threads must be >= 0"), ({steps: 2.5}, f"{steps} must be an integer")):
        with pytest.raises(ValueError, match=message):
            check_recipe_types(recipe(**settings))


def _tiny_sd_args(output, tiny_clip, vae, *extra):
    return ["train", "recipe", "tiny-sd", "--set", f"output={output}", "--set", f"clip={tiny_clip}",
            "--set", f"vae={vae}", "--set", "train_images=32", "--set", "batch_size=4", "--set", "steps=4",
            "--set", "eval_prompts=2", "--set", "eval_every=2", "--set", "unet_channels=[32, 32, 32]",
            "--set", "train_text_encoder=true", "--set", "ema_decay=0.5", *extra]


def _unet_and_text_encoder(folder):
    from safetensors.torch import load_file

    return {**load_file(str(folder / "unet" / "diffusion_pytorch_model.safetensors")),
            **{f"te.{k}": v for k, v in load_file(str(folder / "text_encoder" / "model.safetensors")).items()}}


def test_tiny_sd_recipe_stopped_and_resumed_ends_with_the_weights_of_an_unbroken_run(tiny_clip, vae_folder, tmp_path,
                                                                                   capsys):
    import torch

    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main(_tiny_sd_args(whole, tiny_clip, vae_folder)) == 0
    assert not (tmp_path / "whole-state").exists()  # no states unless asked for
    assert main(_tiny_sd_args(broken, tiny_clip, vae_folder, "--set", "checkpoint_every=1",
                              "--stop-at-step", "3")) == 0
    states = tmp_path / "broken-state"
    assert [p.name for p in states.iterdir()] == ["step-00000003.pt"]  # only the newest is kept
    capsys.readouterr()
    assert main(_tiny_sd_args(broken, tiny_clip, vae_folder, "--set", f"resume_from={states}",
                              "--set", "eval_every=1")) == 0  # reporting settings may change
    assert "resumed at step 3: 1 in this run" in capsys.readouterr().out
    first, second = _unet_and_text_encoder(whole), _unet_and_text_encoder(broken)
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    curve = json.loads((broken / "recipe_record.json").read_text())["curve"]
    assert [entry["step"] for entry in curve if entry["stage"] == "unet"] == [2, 3, 4]  # the stopped run's points too


def test_tiny_sd_recipe_resume_refuses_changed_settings_missing_states_and_an_earlier_stop(tiny_clip, vae_folder,
                                                                                       tmp_path, capsys):
    run = tmp_path / "run"
    assert main(_tiny_sd_args(run, tiny_clip, vae_folder, "--stop-at-step", "2")) == 0
    states = tmp_path / "run-state"
    capsys.readouterr()
    assert main(_tiny_sd_args(run, tiny_clip, vae_folder, "--set", f"resume_from={states}",
                              "--set", "learning_rate=0.001")) == 2
    assert "learning_rate: 0.0006 in the state, 0.001 now" in capsys.readouterr().err
    assert main(_tiny_sd_args(run, tiny_clip, vae_folder, "--set", f"resume_from={states}",
                              "--stop-at-step", "2")) == 2
    assert "--stop-at-step 2 is not after step 2" in capsys.readouterr().err
    assert main(_tiny_sd_args(run, tiny_clip, vae_folder, "--set", f"resume_from={tmp_path / 'nothing'}")) == 2
    assert f"resume_from {str(tmp_path / 'nothing')!r} does not exist" in capsys.readouterr().err
    assert main(_tiny_sd_args(run, tiny_clip, vae_folder, "--set", "checkpoint_every=-1")) == 2
    assert "checkpoint_every must be an integer >= 0" in capsys.readouterr().err
    assert [p.name for p in states.iterdir()] == ["step-00000002.pt"]  # refusals leave the state as it was


def test_tiny_sd_recipe_resumes_with_the_autoencoder_it_trained_itself(tiny_clip, vae_folder, tmp_path, monkeypatch):
    # A run without `vae` trains its autoencoder first (the slow stage); a resume must reuse that one (its latents
    # are what the UNet learned), so the state carries it and the stage does not run again.
    import copy

    import torch
    from diffusers import AutoencoderKL

    import mixkit.tiny.recipe_sd as recipe_sd

    trained = AutoencoderKL.from_pretrained(vae_folder)
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(0.01)  # not the file on disk: the resume can only have it from the state
    # a copy per run: saving a tiny-sd folder turns its modules to fp16
    monkeypatch.setattr(recipe_sd, "train_autoencoder", lambda *args: (copy.deepcopy(trained), {"vae_psnr": 12.5}))
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main(_tiny_sd_args(whole, tiny_clip, "")) == 0
    assert main(_tiny_sd_args(broken, tiny_clip, "", "--stop-at-step", "2")) == 0

    def no_second_training(*args):
        raise AssertionError("the resumed run trained its autoencoder again")

    monkeypatch.setattr(recipe_sd, "train_autoencoder", no_second_training)
    assert main(_tiny_sd_args(broken, tiny_clip, "", "--set", f"resume_from={tmp_path / 'broken-state'}")) == 0
    first, second = _unet_and_text_encoder(whole), _unet_and_text_encoder(broken)
    assert all(torch.equal(first[k], second[k]) for k in first)
    saved = AutoencoderKL.from_pretrained(broken / "vae").state_dict()
    assert all(torch.equal(saved[k], v.half()) for k, v in trained.state_dict().items())
    assert json.loads((broken / "recipe_record.json").read_text())["metrics"]["vae_psnr"] == 12.5


def test_tiny_clip_recipe_stopped_and_resumed_ends_with_the_weights_of_an_unbroken_run(tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    args = ["train", "recipe", "tiny-clip", "--set", "train_images=48", "--set", "batch_size=10", "--set", "steps=3",
            "--set", "hidden_size=32", "--set", "layers=1", "--set", "shape_warmup_steps=1"]
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main([*args, "--set", f"output={whole}"]) == 0
    assert main([*args, "--set", f"output={broken}", "--stop-at-step", "2"]) == 0  # in the contrastive phase
    assert [p.name for p in (tmp_path / "broken-state").iterdir()] == ["step-00000002.pt"]
    capsys.readouterr()
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}"]) == 0
    assert "resumed at step 2: 2 in this run" in capsys.readouterr().out
    first, second = (load_file(str(folder / "model.safetensors")) for folder in (whole, broken))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}",
                 "--set", "layers=2"]) == 2  # another architecture's settings
    assert "layers: 1 in the state, 2 now" in capsys.readouterr().err


def test_tiny_vae_recipe_stopped_and_resumed_ends_with_the_weights_of_an_unbroken_run(tmp_path, capsys):
    import torch
    from safetensors.torch import load_file

    args = ["train", "recipe", "tiny-vae", "--set", "train_images=16", "--set", "batch_size=4", "--set", "steps=4"]
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    assert main([*args, "--set", f"output={whole}"]) == 0
    # a stopped run is the start of the whole run (it used to shorten the learning-rate schedule to the stop step)
    assert main([*args, "--set", f"output={broken}", "--set", "checkpoint_every=1", "--stop-at-step", "2"]) == 0
    assert [p.name for p in (tmp_path / "broken-state").iterdir()] == ["step-00000002.pt"]
    capsys.readouterr()
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}"]) == 0
    assert "resumed at step 2: 2 in this run" in capsys.readouterr().out
    first, second = (load_file(str(folder / "diffusion_pytorch_model.safetensors")) for folder in (whole, broken))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    curve = json.loads((broken / "recipe_record.json").read_text())["curve"]
    assert [entry["step"] for entry in curve if entry["stage"] == "vae"] == [2, 4]
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={whole}"]) == 2
    assert "holds no resume state" in capsys.readouterr().err


def test_start_recipe_checks_every_setting_and_the_output_before_it_takes_the_thread_count(tmp_path):
    import torch

    from mixkit.tiny.recipe_common import RecipeClock, start_recipe
    from mixkit.tiny.recipe_vae import TinyVaeRecipe

    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep")
    before = torch.get_num_threads()
    try:
        for settings, message in (({"learning_rate": "abc"}, "learning_rate must be a finite number"),
                                  ({"output": str(precious)}, "already exists and is not an empty folder")):
            with pytest.raises(ValueError, match=message):
                start_recipe(TinyVaeRecipe(**{"output": str(tmp_path / "new"), "threads": before + 1, **settings}))
            assert torch.get_num_threads() == before  # refused before it changed anything
        assert isinstance(start_recipe(TinyVaeRecipe(output=str(tmp_path / "new"), threads=before + 1)), RecipeClock)
        assert torch.get_num_threads() == before + 1
    finally:
        torch.set_num_threads(before)
    assert [p.name for p in precious.iterdir()] == ["notes.txt"] and not (tmp_path / "new").exists()


def _blip2_args(tiny_clip):
    return ["train", "recipe", "tiny-blip2", "--set", f"clip={tiny_clip}", "--set", "train_images=24",
            "--set", "batch_size=4", "--set", "stage1_steps=1", "--set", "stage2_steps=3", "--set", "qformer_hidden=16",
            "--set", "lm_hidden=16", "--set", "tower_warmup_steps=1", "--set", "tower_warmup_images=8",
            "--set", "eval_images=2"]


def test_tiny_blip2_recipe_stopped_in_stage_2_writes_what_it_has(tiny_clip, tmp_path):
    args = _blip2_args(tiny_clip)
    assert main([*args, "--set", f"output={tmp_path / 'stopped'}", "--stop-at-step", "1"]) == 0
    record = json.loads((tmp_path / "stopped" / "recipe_record.json").read_text())
    assert [entry["steps"] for entry in record["curve"] if entry["stage"] == "stage2"] == [1]
    assert (tmp_path / "stopped" / "model.safetensors").is_file() and not (tmp_path / "stopped.work").exists()
    assert sorted(p.name for p in (tmp_path / "stopped-state").iterdir()) == ["recipe.json", "step-00000001.pt"]


def test_tiny_blip2_recipe_is_reproducible_and_stopped_and_resumed_ends_with_the_weights_of_an_unbroken_run(
        tiny_clip, tmp_path, capsys):
    """Two runs in one process gave two captioners (the tower warm-up's heads took the global RNG as they found it),
    so the recipe had no resume; now a rerun is the same tensor for tensor, and so is a run stopped and resumed."""
    import torch
    from safetensors.torch import load_file

    args = [*_blip2_args(tiny_clip), "--set", "tower_warmup_steps=2"]
    whole, again, broken = tmp_path / "whole", tmp_path / "again", tmp_path / "broken"
    assert main([*args, "--set", f"output={whole}"]) == 0
    torch.rand(7)  # whatever ran before in the process must not matter
    assert main([*args, "--set", f"output={again}"]) == 0
    assert main([*args, "--set", f"output={broken}", "--stop-at-step", "2"]) == 0
    capsys.readouterr()
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}"]) == 0
    assert "resumed at step 2: 1 in this run" in capsys.readouterr().out
    first, second, third = (load_file(str(folder / "model.safetensors")) for folder in (whole, again, broken))
    assert first.keys() == second.keys() == third.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert all(torch.equal(first[k], third[k]) for k in first)
    curve = json.loads((broken / "recipe_record.json").read_text())["curve"]
    assert [(entry["steps"], entry.get("resumed_at")) for entry in curve if entry["stage"] == "stage2"] == [(3, 2)]
    # refused before any work: other settings, a stop before the state, a folder without states, the last step
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}",
                 "--set", "lm_hidden=32"]) == 2
    assert "lm_hidden: 16 in the state, 32 now" in capsys.readouterr().err
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={tmp_path / 'broken-state'}",
                 "--stop-at-step", "1"]) == 2
    assert "not after stage-2 step 2" in capsys.readouterr().err
    assert main([*args, "--set", f"output={broken}", "--set", f"resume_from={whole}"]) == 2
    assert "holds no resume state" in capsys.readouterr().err
    assert main([*args, "--set", f"output={whole}", "--stop-at-step", "4"]) == 2
    assert "must be in 1..stage2_steps=3" in capsys.readouterr().err


def test_tiny_sd_recipe_with_repa_saves_an_ordinary_unet_changed_by_the_alignment_and_resumes_exactly(
        tiny_clip, vae_folder, tmp_path):
    import torch

    plain, aligned, broken = tmp_path / "plain", tmp_path / "aligned", tmp_path / "broken"
    assert main(_tiny_sd_args(plain, tiny_clip, vae_folder)) == 0
    assert main(_tiny_sd_args(aligned, tiny_clip, vae_folder, "--set", "repa_weight=0.5")) == 0
    first, second = _unet_and_text_encoder(plain), _unet_and_text_encoder(aligned)
    assert first.keys() == second.keys()  # the head is not saved: the UNet loads as any other
    assert not all(torch.equal(first[k], second[k]) for k in first)
    record = json.loads((aligned / "recipe_record.json").read_text())
    assert record["recipe"]["repa_weight"] == 0.5
    # the head is in the resume state: stopped and resumed is the unbroken run, bit for bit
    assert main(_tiny_sd_args(broken, tiny_clip, vae_folder, "--set", "repa_weight=0.5", "--set", "checkpoint_every=1",
                              "--stop-at-step", "3")) == 0
    assert main(_tiny_sd_args(broken, tiny_clip, vae_folder, "--set", "repa_weight=0.5",
                              "--set", f"resume_from={tmp_path / 'broken-state'}")) == 0
    resumed = _unet_and_text_encoder(broken)
    assert all(torch.equal(second[k], resumed[k]) for k in second)


def test_repa_alignment_loss_is_minus_the_mean_cosine_of_each_cell_with_its_token():
    import torch
    import torch.nn.functional as F

    from mixkit.tiny.repa import AlignmentHead, alignment_loss

    torch.manual_seed(0)
    head = AlignmentHead(4, 6, hidden=8)
    features = torch.randn(2, 4, 3, 3)
    projected = head(features.flatten(2).transpose(1, 2))
    assert alignment_loss(features, F.normalize(projected, dim=-1), head).item() == pytest.approx(-1.0, abs=1e-6)
    assert alignment_loss(features, -F.normalize(projected, dim=-1), head).item() == pytest.approx(1.0, abs=1e-6)
    tokens = F.normalize(torch.randn(2, 9, 6), dim=-1)
    expected = -F.cosine_similarity(projected, tokens, dim=-1).mean()
    assert alignment_loss(features, tokens, head).item() == pytest.approx(expected.item(), abs=1e-6)


def test_repa_refuses_a_feature_map_that_does_not_match_the_patch_tokens_and_a_negative_weight(capsys):
    from mixkit.tiny.recipe_sd import TinySDRecipe, build_tiny_unet
    from mixkit.tiny.repa import check_alignment_grid

    unet = build_tiny_unet([32, 32, 32], 32, 16, 0)
    assert check_alignment_grid(unet, 16, 64) == 32
    with pytest.raises(ValueError, match="aligned feature map is 8x8 and the CLIP vision tower has 16 patch tokens"):
        check_alignment_grid(unet, 16, 16)
    with pytest.raises(ValueError, match="repa_weight must be >= 0"):
        TinySDRecipe(repa_weight=-0.5).check()
