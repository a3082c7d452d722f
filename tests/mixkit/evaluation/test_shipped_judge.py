"""The judge shipped in mixkit/evaluation/judge_weights: loads through load_judge and reads clean world images.

A fast quality smoke test (~200 images): the full validation (2,000 images) is in judge_record.json.
"""

from __future__ import annotations

import json

from mixkit.data.shapes import generate_samples
from mixkit.evaluation.judge_io import RECORD_FILE, SHIPPED_JUDGE_FOLDER, load_shipped_judge
from mixkit.evaluation.judge_training import FULL_WORLD
from mixkit.evaluation.scoring import score_images


def test_shipped_judge_scores_clean_images_of_unseen_seeds():
    judge = load_shipped_judge()
    world = FULL_WORLD.__class__(**{**FULL_WORLD.__dict__, "caption_mode": "rich"})
    samples = generate_samples(200, seed=4242, config=world, split="all")
    scores = score_images(judge, [s.render(64, world) for s in samples], [s.caption for s in samples])
    for name in ("single/shape", "single/colour", "single/background", "single/size", "single/position"):
        assert scores[name] >= 0.95, (name, scores)
    assert scores["two/objects"] >= 0.85 and scores["two/background"] >= 0.95, scores


def test_shipped_judge_is_small_and_documented():
    record = json.loads((SHIPPED_JUDGE_FOLDER / RECORD_FILE).read_text())
    assert {"recipe", "validation_accuracy", "train_cpu_seconds_including_render"} <= set(record)
    assert (SHIPPED_JUDGE_FOLDER / "judge.safetensors").stat().st_size < 1_000_000
