"""score_images / score_captions: which attributes count, slots of two-shape prompts, error messages.

An oracle judge (reads back the true labels of the scenes it is given) isolates the scoring logic
from the classifier's accuracy.
"""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from mixkit.data.shapes import WorldConfig, generate_samples
from mixkit.data.shapes_captions import caption_scene
from mixkit.data.shapes_vocab import COLOURS, SHAPES, Scene, ShapeSpec
from mixkit.evaluation.judge_model import IGNORE, AttributeJudge, JudgeConfig, scene_labels
from mixkit.evaluation.scoring import judge_predict, score_images
from mixkit.evaluation.tiny_eval import eval_prompts, evaluate_generator, score_captions


class OracleJudge(AttributeJudge):
    """Answers with the labels of `scenes`, in order, whatever the pixels."""

    def __init__(self, scenes):
        super().__init__(JudgeConfig())
        self.queue = [scene_labels(scene, self.config) for scene in scenes]

    def forward(self, images):
        batch, self.queue = self.queue[:len(images)], self.queue[len(images):]
        logits = {}
        for name, size in self.config.head_sizes().items():
            values = torch.zeros(len(images), size)
            for row, labels in enumerate(batch):
                values[row, labels[name] if labels[name] != IGNORE else 0] = 1.0
            logits[name] = values
        return logits


def _blank(count):
    return [Image.new("RGB", (64, 64))] * count


SINGLE = Scene((ShapeSpec("star", "red", "small", "left"),), "blue")
PAIR = Scene((ShapeSpec("circle", "red", "small"), ShapeSpec("square", "green", "large")), "white", "left of")


def test_perfect_readings_score_one_on_every_named_attribute():
    scenes = [SINGLE, PAIR]
    prompts = [caption_scene(SINGLE, "rich"), caption_scene(PAIR, "rich")]
    scores = score_images(OracleJudge(scenes), _blank(2), prompts)
    assert scores == {"single/all": 1.0, "single/background": 1.0, "single/colour": 1.0, "single/count": 1.0,
                      "single/position": 1.0, "single/shape": 1.0, "single/size": 1.0, "single/n": 1.0,
                      "two/all": 1.0, "two/background": 1.0, "two/colours": 1.0, "two/count": 1.0,
                      "two/objects": 1.0, "two/relation": 1.0, "two/shapes": 1.0, "two/n": 1.0}


def test_plain_prompts_do_not_score_size_or_position():
    scores = score_images(OracleJudge([SINGLE]), _blank(1), ["a red star on a blue background"])
    assert "single/size" not in scores and "single/position" not in scores and scores["single/all"] == 1.0


def test_wrong_readings_lower_exactly_the_wrong_attribute():
    seen = [Scene((ShapeSpec("star", "green", "small", "left"),), "blue"), SINGLE]
    scores = score_images(OracleJudge(seen), _blank(2), [caption_scene(SINGLE, "rich")] * 2)
    assert scores["single/colour"] == 0.5 and scores["single/all"] == 0.5
    assert scores["single/shape"] == scores["single/background"] == scores["single/position"] == 1.0


def test_relation_maps_prompt_order_onto_slots():
    # "square on the right of circle" is the same picture as "circle on the left of square".
    mirrored = "a large green square on the right of a small red circle, on a white background"
    assert score_images(OracleJudge([PAIR]), _blank(1), [mirrored])["two/relation"] == 1.0
    wrong = "a large green square on the left of a small red circle, on a white background"
    assert score_images(OracleJudge([PAIR]), _blank(1), [wrong])["two/relation"] == 0.0
    unordered = "a green square and a red circle on a white background"
    scores = score_images(OracleJudge([PAIR]), _blank(1), [unordered])
    assert scores["two/objects"] == 1.0 and "two/relation" not in scores


def test_score_images_errors_name_the_problem():
    with pytest.raises(ValueError, match="2 images but 1 prompts"):
        score_images(OracleJudge([SINGLE]), _blank(2), ["a red star on a blue background"])
    with pytest.raises(ValueError, match="prompt 0 cannot be scored.*unknown shape 'blob'"):
        score_images(OracleJudge([SINGLE]), _blank(1), ["a red blob on a blue background"])
    with pytest.raises(TypeError, match="AttributeJudge"):
        judge_predict(object(), _blank(1))


def test_score_captions_counts_unparseable_as_wrong():
    truths = [SINGLE, SINGLE, PAIR]
    captions = ["a small red star on the left, on a blue background", "a red star on a purple background",
                "gibberish"]
    scores = score_captions(captions, truths)
    assert scores["parsed"] == pytest.approx(2 / 3)
    assert scores["shape"] == 1.0 and scores["colour"] == 1.0
    assert scores["background"] == pytest.approx(1 / 3) and scores["all"] == pytest.approx(1 / 3)
    assert scores["size_named"] == 0.5 and scores["size"] == 1.0
    assert scores["two/objects"] == 0.0


def test_eval_prompts_are_fixed_and_use_held_out_combinations():
    from mixkit.data.shapes import with_held_out

    world = with_held_out(WorldConfig(), 0.1, seed=0)
    prompts = eval_prompts(world, count=50, two_shape_count=10)
    assert [p.prompt for p in prompts] == [p.prompt for p in eval_prompts(world, count=50, two_shape_count=10)]
    held = set(world.held_out)
    assert all((p.scene.objects[0].shape, p.scene.objects[0].colour, p.scene.background) in held for p in prompts[:50])
    assert all(len(p.scene.objects) == 2 for p in prompts[50:])


def test_evaluate_generator_with_the_renderer_as_generator():
    samples = generate_samples(6, seed=2, config=WorldConfig(shapes=SHAPES, colours=COLOURS, caption_mode="rich"))
    by_prompt = {s.caption: s for s in samples}
    judge = OracleJudge([s.scene for s in samples])
    scores = evaluate_generator(lambda prompt: by_prompt[prompt].render(64), judge, list(by_prompt))
    assert all(value == 1.0 for key, value in scores.items() if not key.endswith("/n"))
    with pytest.raises(TypeError, match="expected a PIL image"):
        evaluate_generator(lambda prompt: None, judge, ["a red star on a blue background"])
