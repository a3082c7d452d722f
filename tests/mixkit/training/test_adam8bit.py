"""8-bit AdamW through bitsandbytes: it really keeps 8-bit optimizer states and the loss falls; without
bitsandbytes the error names the package; unknown optimizers list the valid names."""

from __future__ import annotations

import sys

import pytest
import torch

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.optimizers import OPTIMIZERS, make_optimizer
from mixkit.training.sd_finetune_config import SDFinetuneConfig
from mixkit.training.sd_finetune_trainer import train_sd_finetune

try:
    import bitsandbytes  # noqa: F401

    BNB_REASON = None
except Exception as error:  # bitsandbytes raises RuntimeError on some platforms, not only ImportError
    BNB_REASON = f"bitsandbytes cannot be imported here: {error}"


@pytest.mark.skipif(BNB_REASON is not None, reason=BNB_REASON or "")
def test_adamw8bit_keeps_uint8_moments_resumes_exactly_and_the_loss_falls(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                          fixed_denoising_loss):
    from safetensors.torch import load_file

    def config(name, **overrides):
        return SDFinetuneConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / name),
                                resolution=32, batch_size=3, max_steps=4, learning_rate=2e-3, seed=2, use_ema=False,
                                optimizer="adamw8bit", checkpoint_dir=str(tmp_path / f"{name}-ckpt"), **overrides)

    straight = train_sd_finetune(config("straight"))
    interrupted = config("resumed")
    first = train_sd_finetune(interrupted, stop_at_step=2)
    state = torch.load(first.last_checkpoint, weights_only=True)["optimizer"]["state"]
    # bitsandbytes >= 0.48 nests its quantised states; tensors of >= 4096 values (the tiny UNet's
    # convs) are quantised to uint8, smaller ones keep fp32 moments.
    moments = [s.get("__bnb_optimizer_quant_state__", s)["state1"] for s in state.values()]
    assert any(m.dtype == torch.uint8 for m in moments) and any(m.dtype == torch.float32 for m in moments)
    interrupted.resume_from = str(first.last_checkpoint)
    resumed = train_sd_finetune(interrupted)
    assert first.losses + resumed.losses == straight.losses
    a = load_file(straight.output / "unet" / "diffusion_pytorch_model.safetensors")
    b = load_file(resumed.output / "unet" / "diffusion_pytorch_model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    before = fixed_denoising_loss(load_diffusion_model(tiny_sd1_dir), colour_dataset)
    after = fixed_denoising_loss(load_diffusion_model(straight.output), colour_dataset)
    assert after < 0.9 * before, (before, after)


@pytest.mark.skipif(BNB_REASON is not None, reason=BNB_REASON or "")
def test_adamw8bit_differs_from_adamw_only_by_quantisation():
    """Same parameters and gradients: the 8-bit step is close to the fp32 step but not identical."""
    torch.manual_seed(0)
    start = torch.randn(64, 128)
    grads = [torch.randn(64, 128) for _ in range(3)]
    results = {}
    for name in ("adamw", "adamw8bit"):
        weight = torch.nn.Parameter(start.clone())
        optimizer = make_optimizer(name, [{"params": [weight]}], 1e-2)
        for grad in grads:
            weight.grad = grad.clone()
            optimizer.step()
        results[name] = weight.detach()
    relative = (results["adamw8bit"] - results["adamw"]).norm() / (results["adamw"] - start).norm()
    assert 0 < relative < 0.05, relative


def test_missing_bitsandbytes_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    with pytest.raises(ImportError, match="pip install bitsandbytes"):
        make_optimizer("adamw8bit", [{"params": [torch.nn.Parameter(torch.zeros(2))]}], 1e-3)


def test_unknown_optimizer_lists_the_valid_names(tmp_path):
    assert {"adamw", "adamw8bit"} <= set(OPTIMIZERS.names())
    config = SDFinetuneConfig(model=str(tmp_path), dataset=str(tmp_path), output=str(tmp_path / "o"), optimizer="sgd")
    with pytest.raises(ValueError, match="Unknown optimizer 'sgd'.*'adamw', 'adamw8bit'"):
        config.check()
