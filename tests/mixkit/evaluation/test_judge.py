"""The attribute judge: labels by slot, a few training steps, save/load round trip and load errors.

The full recipe (minutes of CPU) is not run here; a tiny run proves the mechanics and that the
judge does learn (background colour, the easiest attribute, from a few dozen steps).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from mixkit.data.shapes import WorldConfig
from mixkit.data.shapes_vocab import Scene, ShapeSpec
from mixkit.errors import CheckpointFormatError, ModelNotFoundError
from mixkit.evaluation.judge_io import CONFIG_FILE, WEIGHTS_FILE, load_judge, save_judge
from mixkit.evaluation.judge_model import IGNORE, AttributeJudge, JudgeConfig, count_parameters, scene_labels
from mixkit.evaluation.judge_training import JudgeTrainingConfig, render_dataset, train_judge


def test_default_judge_is_a_few_hundred_thousand_parameters_and_fits_in_a_megabyte_as_fp16():
    judge = AttributeJudge(JudgeConfig())
    assert 100_000 < count_parameters(judge) < 500_000
    logits = judge(torch.rand(2, 3, 64, 64))
    assert {name: tuple(v.shape) for name, v in logits.items()} == {
        name: (2, size) for name, size in JudgeConfig().head_sizes().items()}


def test_labels_put_the_left_or_top_shape_in_slot_one():
    config = JudgeConfig()
    red, green = ShapeSpec("circle", "red", "small"), ShapeSpec("star", "green", "large")
    right_of = scene_labels(Scene((red, green), "white", "right of"), config)
    assert right_of["layout"] == 1
    assert config.shapes[right_of["shape1"]] == "star" and config.colours[right_of["colour2"]] == "red"
    above = scene_labels(Scene((red, green), "white", "above"), config)
    assert above["layout"] == 2 and config.shapes[above["shape1"]] == "circle"
    single = scene_labels(Scene((ShapeSpec("cross", "blue", "medium", "top left"),), "black"), config)
    assert single["shape2"] == single["colour2"] == single["size2"] == IGNORE
    assert config.positions[single["position"]] == "top left" and right_of["position"] == IGNORE


def _tiny_recipe(**changes):
    world = WorldConfig(shapes=("circle", "square"), colours=("red", "blue"), backgrounds=("white", "black"),
                        two_shape_fraction=0.0)
    recipe = JudgeTrainingConfig(train_count=96, validation_count=48, steps=40, batch_size=16, learning_rate=1e-2,
                                 world=world, judge=JudgeConfig(image_size=32, channels=(8, 8, 16, 16), hidden=32))
    return replace(recipe, **changes)


def test_a_tiny_training_run_learns_the_background_and_is_deterministic():
    first, record = train_judge(_tiny_recipe())
    assert record["validation_accuracy"]["background"] >= 0.9
    assert set(record) >= {"recipe", "parameters", "train_cpu_seconds_including_render", "min_validation_accuracy"}
    second, _ = train_judge(_tiny_recipe())
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values()):
        assert torch.equal(a, b), name


def test_save_and_load_round_trip(tmp_path):
    judge, record = train_judge(_tiny_recipe(steps=3))
    save_judge(judge, tmp_path / "judge", record)
    loaded = load_judge(tmp_path / "judge")
    assert loaded.config == judge.config and not loaded.training
    assert json.loads((tmp_path / "judge" / "judge_record.json").read_text())["recipe"]["steps"] == 3
    images, _ = render_dataset(8, 5, _tiny_recipe().world, judge.config)
    with torch.no_grad():
        expected = judge.half().float()(images.float() / 255)  # what fp16 storage keeps
        got = loaded(images.float() / 255)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name])


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(ModelNotFoundError, match=CONFIG_FILE):
        load_judge(tmp_path)
    save_judge(AttributeJudge(JudgeConfig(channels=(8, 8, 16, 16), hidden=16)), tmp_path)
    (tmp_path / CONFIG_FILE).write_text(json.dumps(JudgeConfig().to_dict()))
    with pytest.raises(CheckpointFormatError, match=WEIGHTS_FILE):
        load_judge(tmp_path)
    (tmp_path / CONFIG_FILE).write_text('{"wings": 2}')
    with pytest.raises(CheckpointFormatError, match="unknown judge config keys"):
        load_judge(tmp_path)


def test_training_config_is_checked():
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_judge(_tiny_recipe(steps=0))
    with pytest.raises(ValueError, match="validation images must be ones the judge never trained on"):
        train_judge(_tiny_recipe(seed=1, validation_seed=1))
    with pytest.raises(ValueError, match="no class for"):
        train_judge(_tiny_recipe(judge=JudgeConfig(shapes=("circle",))))


def test_adamw_first_step_and_convergence():
    from mixkit.evaluation.judge_training import AdamW

    # Adam's first step moves every weight by lr * g / (|g| + eps) after decoupled decay.
    weight = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    weight.grad = torch.tensor([0.5, -4.0, 0.0])
    AdamW([weight], weight_decay=0.1).step(0.01)
    expected = torch.tensor([1.0, -2.0, 3.0]) * (1 - 0.01 * 0.1) - 0.01 * torch.tensor([1.0, -1.0, 0.0])
    torch.testing.assert_close(weight.detach(), expected, atol=1e-6, rtol=0)
    target = torch.tensor([0.3, -0.7])
    point = torch.zeros(2, requires_grad=True)
    optimizer = AdamW([point])
    for _ in range(300):
        point.grad = None
        ((point - target) ** 2).sum().backward()
        optimizer.step(0.05)
    torch.testing.assert_close(point.detach(), target, atol=1e-3, rtol=0)


def test_one_cycle_schedule_warms_up_then_decays():
    from mixkit.evaluation.judge_training import one_cycle_learning_rate

    rates = [one_cycle_learning_rate(step, 100, 1.0) for step in range(100)]
    assert rates[0] == pytest.approx(0.04) and max(rates) == rates[15] == 1.0
    assert all(a <= b for a, b in zip(rates[:15], rates[1:16])) and all(a >= b for a, b in zip(rates[15:], rates[16:]))
    assert rates[-1] < 0.001
