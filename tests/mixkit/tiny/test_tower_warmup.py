"""The captioner's tower warm-up: exact attribute targets, and a tower that learns them in place."""

from __future__ import annotations

import pytest
import torch

from mixkit.data.shapes_vocab import Scene, ShapeSpec
from mixkit.evaluation.judge_model import IGNORE, JudgeConfig
from mixkit.tiny.tower_warmup import attribute_targets, warm_up_tower

HEADS = list(JudgeConfig().head_sizes())


def _row(targets, i):
    return dict(zip(HEADS, targets[i].tolist()))


def test_attribute_targets_name_each_slot_and_ignore_heads_that_do_not_apply():
    config = JudgeConfig()
    single = Scene((ShapeSpec("star", "red", "small", "bottom right"),), "blue")
    pair = Scene((ShapeSpec("circle", "green", "large"), ShapeSpec("square", "white", "medium")), "black",
                 relation="right of")
    targets = attribute_targets([single, pair])
    assert targets.dtype == torch.long and targets.shape == (2, len(HEADS))
    assert _row(targets, 0) == {
        "layout": 0, "background": config.colours.index("blue"), "position": config.positions.index("bottom right"),
        "shape1": config.shapes.index("star"), "colour1": config.colours.index("red"), "size1": config.sizes.index("small"),
        "shape2": IGNORE, "colour2": IGNORE, "size2": IGNORE}
    # "circle right of square": the square is slot 1 (left), the circle slot 2.
    assert _row(targets, 1) == {
        "layout": 1, "background": config.colours.index("black"), "position": IGNORE,
        "shape1": config.shapes.index("square"), "colour1": config.colours.index("white"),
        "size1": config.sizes.index("medium"), "shape2": config.shapes.index("circle"),
        "colour2": config.colours.index("green"), "size2": config.sizes.index("large")}


def _tiny_tower():
    from transformers import CLIPVisionConfig, CLIPVisionModel

    torch.manual_seed(0)
    return CLIPVisionModel(CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                            num_attention_heads=2, image_size=16, patch_size=8))


def _scenes_and_images():
    from mixkit.data.shapes_render import render_scene

    scenes = [Scene((ShapeSpec(shape, colour, size, "center"),), background)
              for shape, colour, size, background in [("circle", "red", "small", "blue"),
                                                       ("square", "yellow", "large", "black"),
                                                       ("triangle", "white", "medium", "green"),
                                                       ("cross", "purple", "large", "white")]]
    import numpy as np

    images = torch.from_numpy(np.stack([np.asarray(render_scene(s, 16)) for s in scenes])).permute(0, 3, 1, 2)
    return scenes, images.contiguous()


def test_warm_up_trains_the_tower_in_place_and_keeps_no_heads():
    vision = _tiny_tower().eval()
    before = {k: v.clone() for k, v in vision.state_dict().items()}
    scenes, images = _scenes_and_images()
    curve = warm_up_tower(vision, images, attribute_targets(scenes), steps=60, learning_rate=1e-2, batch_size=4,
                          image_mean=[0.5] * 3, image_std=[0.5] * 3, log_every=20)
    assert [entry["step"] for entry in curve] == [20, 40, 60]
    assert curve[-1]["loss"] < curve[0]["loss"] / 2  # four images: it memorises them
    assert curve[-1]["accuracy"]["size1"] == 1.0 and "size2" not in curve[-1]["accuracy"]  # no two-shape scenes
    assert set(vision.state_dict()) == set(before)  # the heads are not attached to the tower
    assert any(not torch.equal(vision.state_dict()[k], before[k]) for k in before)
    assert not vision.training  # the mode it came in with


def test_the_warm_up_is_a_function_of_its_seed_whatever_ran_before_and_leaves_the_global_rng_alone():
    """The heads took torch's global RNG as they found it, so the same call after other work gave another tower
    (the tiny-blip2 recipe was not reproducible run to run)."""
    scenes, images = _scenes_and_images()
    towers, curves = [], []
    for global_seed in (1, 2):
        vision = _tiny_tower()
        torch.manual_seed(global_seed)
        curves.append(warm_up_tower(vision, images, attribute_targets(scenes), steps=5, learning_rate=1e-2,
                                    batch_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3, seed=3, log_every=5))
        after = torch.rand(3)
        torch.manual_seed(global_seed)
        assert torch.equal(after, torch.rand(3))  # the caller's RNG is where it was
        towers.append(vision.state_dict())
    assert curves[0] == curves[1]
    assert all(torch.equal(towers[0][k], towers[1][k]) for k in towers[0])


def test_the_feature_loss_keeps_the_tokens_near_their_values_before_the_warm_up():
    scenes, images = _scenes_and_images()
    pixels = (images.float() / 255 - 0.5) / 0.5
    original = _tiny_tower().eval()
    with torch.no_grad():
        before = original(pixel_values=pixels).last_hidden_state
    drift = {}
    for weight in (0.0, 10.0):
        vision = _tiny_tower().eval()
        warm_up_tower(vision, images, attribute_targets(scenes), steps=60, learning_rate=1e-2, batch_size=4,
                      image_mean=[0.5] * 3, image_std=[0.5] * 3, log_every=20, feature_weight=weight)
        with torch.no_grad():
            drift[weight] = float((vision(pixel_values=pixels).last_hidden_state - before).pow(2).mean())
    assert drift[10.0] < drift[0.0] / 10  # measured: 0.07 against 22


def test_warm_up_refuses_images_that_are_not_bytes_and_mismatched_targets():
    vision = _tiny_tower()
    scenes, images = _scenes_and_images()
    targets = attribute_targets(scenes)
    common = dict(steps=1, learning_rate=1e-3, batch_size=2, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    with pytest.raises(ValueError, match="uint8"):
        warm_up_tower(vision, images.float(), targets, **common)
    with pytest.raises(ValueError, match="targets must be"):
        warm_up_tower(vision, images, targets[:3], **common)


@pytest.mark.parametrize("setting, message", [
    ({"tower_warmup_steps": -1}, "tower_warmup_steps must be an integer >= 0"),
    ({"tower_warmup_steps": True}, "tower_warmup_steps must be an integer >= 0"),
    ({"tower_warmup_images": 0}, "tower_warmup_images must be a positive integer"),
    ({"tower_warmup_learning_rate": 0}, "tower_warmup_learning_rate must be a number > 0"),
    ({"tower_warmup_feature_weight": -1.0}, "tower_warmup_feature_weight must be a number >= 0"),
])
def test_tiny_blip2_recipe_refuses_bad_warm_up_settings(setting, message):
    from mixkit.tiny.recipe_blip2 import TinyBlip2Recipe

    with pytest.raises(ValueError, match=message):
        TinyBlip2Recipe(**setting).check()
