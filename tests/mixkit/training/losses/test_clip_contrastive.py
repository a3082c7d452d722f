"""CLIP loss against values computed by hand, clamp behaviour, gradients, and the 2-process gather."""

from __future__ import annotations

import math
import os

import pytest
import torch

from mixkit.training.losses import clip_contrastive_loss, logit_scale_value


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def test_orthonormal_pairs_give_log_one_plus_exp_minus_scale():
    features = torch.eye(2)
    loss = clip_contrastive_loss(features, features.clone(), torch.tensor(math.log(2.0)))
    assert loss.item() == pytest.approx(softplus(-2.0), rel=1e-6)


def test_asymmetric_batch_matches_hand_computation_and_ignores_feature_norm():
    images = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    texts = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    s = 3.0
    # logits_per_image = s * [[1, 0], [0.6, 0.8]]; logits_per_text = its transpose.
    image_side = (softplus(-s) + softplus(-0.2 * s)) / 2
    text_side = (softplus(-0.4 * s) + softplus(-0.8 * s)) / 2
    expected = (image_side + text_side) / 2
    loss = clip_contrastive_loss(images * 7.0, texts * 0.5, torch.tensor(math.log(s)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_logit_scale_is_clamped_at_100_and_stops_its_gradient():
    # float64: at scale 100 the per-row losses are ~1e-9, below float32 resolution around 1.
    log_scale = torch.tensor(math.log(1000.0), dtype=torch.float64, requires_grad=True)
    assert logit_scale_value(log_scale).item() == pytest.approx(100.0)
    images = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    texts = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    loss = clip_contrastive_loss(images, texts, log_scale)
    expected = ((softplus(-100) + softplus(-20)) / 2 + (softplus(-40) + softplus(-80)) / 2) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert log_scale.grad.item() == 0.0


def test_gradient_reaches_only_trainable_parts():
    torch.manual_seed(0)
    frozen_tower = torch.nn.Linear(4, 3).requires_grad_(False)
    image_projection = torch.nn.Linear(3, 3)
    text_projection = torch.nn.Linear(5, 3)
    log_scale = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07)))
    loss = clip_contrastive_loss(
        image_projection(frozen_tower(torch.randn(4, 4))), text_projection(torch.randn(4, 5)), log_scale
    )
    loss.backward()
    assert frozen_tower.weight.grad is None
    assert image_projection.weight.grad.abs().sum() > 0
    assert text_projection.weight.grad.abs().sum() > 0
    assert log_scale.grad.abs() > 0


def test_mismatched_batches_are_refused_with_shapes():
    with pytest.raises(ValueError, match=r"\(3, 2\)"):
        clip_contrastive_loss(torch.ones(3, 2), torch.ones(2, 2), torch.tensor(0.0))


def _rank_loss(rank: int, world: int, init_file: str, images, texts, out_dir: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        local = slice(rank * 2, rank * 2 + 2)
        loss = clip_contrastive_loss(images[local], texts[local], torch.tensor(math.log(5.0)))
        torch.save(loss.detach(), os.path.join(out_dir, f"loss{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def test_two_processes_see_the_global_batch(tmp_path):
    """The mean of per-rank losses with gathered negatives equals the one-process loss on all 4 pairs."""
    torch.manual_seed(1)
    images, texts = torch.randn(4, 3), torch.randn(4, 3)
    torch.multiprocessing.spawn(
        _rank_loss, args=(2, str(tmp_path / "init"), images, texts, str(tmp_path)), nprocs=2, join=True
    )
    per_rank = [torch.load(tmp_path / f"loss{r}.pt") for r in range(2)]
    whole = clip_contrastive_loss(images, texts, torch.tensor(math.log(5.0)))
    assert (sum(per_rank) / 2).item() == pytest.approx(whole.item(), rel=1e-5)
    local_only = clip_contrastive_loss(images[:2], texts[:2], torch.tensor(math.log(5.0)))
    assert per_rank[0].item() != pytest.approx(local_only.item(), rel=1e-3)
