"""CLIP contrastive training: the loss falls, resume is exact, and two processes contrast the global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mixkit.training.clip_config import ClipTrainingConfig
from mixkit.training.clip_trainer import ClipDualEncoder, clip_batch, load_clip, train_clip
from mixkit.training.losses import clip_contrastive_loss


@pytest.fixture(scope="module")
def pairs_dataset(tmp_path_factory):
    """Four distinct colour/caption pairs (a CLIP batch must not contain the same pair twice)."""
    from PIL import Image

    root = tmp_path_factory.mktemp("pairs")
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0)), ("white", (255, 255, 255))]:
        Image.new("RGB", (32, 32), colour).save(root / f"{name}.png")
        (root / f"{name}.txt").write_text(f"a {name} square", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory):
    from mixkit.testing.tiny_vlm import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("tiny-clip"), seed=0)


def _full_batch_loss(folder, dataset_dir, order=None) -> float:
    from mixkit.data import BucketedImageDataset, scan_kohya_folder

    clip, processor = load_clip(str(folder))
    dataset = BucketedImageDataset(scan_kohya_folder(dataset_dir).records, 64)
    indices = order if order is not None else list(range(len(dataset.records)))
    with torch.no_grad():
        images, texts, scale = ClipDualEncoder(clip.eval())(**clip_batch(processor, dataset, indices))
        return clip_contrastive_loss(images, texts, scale).item()


def _config(model, dataset, output, **overrides):
    return ClipTrainingConfig(**{**dict(model=str(model), dataset=str(dataset), output=str(output), batch_size=4,
                                        max_steps=6, learning_rate=2e-3, seed=1), **overrides})


def test_loss_falls_and_model_saves(tiny_clip_dir, pairs_dataset, tmp_path):
    before = _full_batch_loss(tiny_clip_dir, pairs_dataset)
    result = train_clip(_config(tiny_clip_dir, pairs_dataset, tmp_path / "clip-out"))
    after = _full_batch_loss(result.output, pairs_dataset)
    assert after < 0.7 * before, (before, after)
    assert (result.output / "model.safetensors").is_file()


def test_resume_is_exact(tiny_clip_dir, pairs_dataset, tmp_path):
    from safetensors.torch import load_file

    straight = train_clip(_config(tiny_clip_dir, pairs_dataset, tmp_path / "a", max_steps=3))
    config = _config(tiny_clip_dir, pairs_dataset, tmp_path / "b", max_steps=3, checkpoint_dir=str(tmp_path / "ck"))
    train_clip(config, stop_at_step=1)
    config.resume_from = str(tmp_path / "ck")
    resumed = train_clip(config)
    assert resumed.losses == straight.losses[1:]
    a, b = load_file(straight.output / "model.safetensors"), load_file(resumed.output / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_bad_settings():
    with pytest.raises(ValueError, match="learning_rate"):
        ClipTrainingConfig(model="m", dataset="d", output="o", learning_rate=float("nan")).check()
    with pytest.raises(ValueError, match="batch_size"):
        ClipTrainingConfig(model="m", dataset="d", output="o", batch_size=0).check()


def test_two_processes_contrast_the_global_batch(tiny_clip_dir, pairs_dataset, tmp_path):
    """Step 1 of a 2-process run (2 images each) equals the single-process loss over all 4 images.

    Without the all-gather each process would contrast only its own 2 pairs and the mean loss would differ.
    """
    from mixkit.data import BucketedImageDataset, scan_kohya_folder

    # `--multi_gpu` selects torchrun; with ACCELERATE_USE_CPU=1 accelerate runs MULTI_CPU over gloo.
    report = tmp_path / "report.json"
    script = Path(__file__).with_name("clip_two_process_run.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "OMP_NUM_THREADS": "1",
           "ACCELERATE_USE_CPU": "1"}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
               "--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(_free_port()),
               str(script), str(tiny_clip_dir), str(pairs_dataset), str(tmp_path / "out"), str(report)]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert completed.returncode == 0, completed.stderr[-3000:]
    outcome = json.loads(report.read_text())
    assert outcome["world"] == 2 and len(outcome["losses"]) == 2
    dataset = BucketedImageDataset(scan_kohya_folder(pairs_dataset).records, 64)
    batches = dataset.epoch_batches(0, 2, seed=5)
    global_loss = _full_batch_loss(tiny_clip_dir, pairs_dataset, order=batches[0] + batches[1])
    local_mean = (_full_batch_loss(tiny_clip_dir, pairs_dataset, order=batches[0])
                  + _full_batch_loss(tiny_clip_dir, pairs_dataset, order=batches[1])) / 2
    assert outcome["losses"][0] == pytest.approx(global_loss, rel=1e-4), (global_loss, local_mean, outcome)
    assert abs(global_loss - local_mean) > 1e-3  # the check above could not pass without the gather


def _free_port() -> int:
    """A TCP port nobody listens on now, so parallel test runs on one machine do not collide."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_filled_output_is_refused_before_loading(pairs_dataset, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="already exists and is not an empty folder"):
        train_clip(_config(tmp_path / "no-model", pairs_dataset, tmp_path / "taken"))
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]


def test_the_shipped_fp16_tiny_clip_trains_by_name_in_float32(pairs_dataset, tmp_path):
    # mixkit-tiny-clip stores fp16 weights; trained as stored, AdamW overflowed them to NaN in two steps and an all-NaN
    # model was saved with exit code 0. By name it was refused ("not a CLIP model folder").
    from safetensors.torch import load_file

    result = train_clip(_config("mixkit-tiny-clip", pairs_dataset, tmp_path / "o", max_steps=3, learning_rate=1e-4))
    assert all(map(lambda loss: loss == loss, result.losses))  # no NaN
    weights = load_file(result.output / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())
    assert {t.dtype for t in weights.values() if t.is_floating_point()} == {torch.float32}


def test_a_non_finite_loss_stops_the_run_and_writes_nothing(tiny_clip_dir, pairs_dataset, tmp_path):
    from mixkit.training.training_state import check_finite_loss

    with pytest.raises(FloatingPointError, match="loss became nan at step 3; nothing was saved"):
        check_finite_loss(float("nan"), 3)
    with pytest.raises(FloatingPointError, match="loss became (nan|inf) at step"):
        train_clip(_config(tiny_clip_dir, pairs_dataset, tmp_path / "o", max_steps=2, learning_rate=1e30))
    assert not (tmp_path / "o").exists()


def test_contrastive_batches_need_two_pairs_and_types_are_checked():
    for settings, message in ((dict(batch_size=1), "batch_size must be at least 2"),
                              (dict(checkpoint_every="abc"), "checkpoint_every must be an integer"),
                              (dict(seed="abc"), "seed must be an integer")):
        with pytest.raises(ValueError, match=message):
            ClipTrainingConfig(model="m", dataset="d", output="o", **settings).check()


def test_a_checkpoint_past_max_steps_is_refused_not_silently_finished(tiny_clip_dir, pairs_dataset, tmp_path):
    from mixkit.training.training_state import CheckpointMismatchError

    config = _config(tiny_clip_dir, pairs_dataset, tmp_path / "b", max_steps=4, checkpoint_dir=str(tmp_path / "ck"))
    train_clip(config, stop_at_step=3)
    config.max_steps, config.resume_from = 2, str(tmp_path / "ck")
    with pytest.raises(CheckpointMismatchError, match="saved at step 3, past this run's max_steps=2"):
        train_clip(config)
