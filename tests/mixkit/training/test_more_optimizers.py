"""Lion, Prodigy and Adafactor by name: Lion equals lion-pytorch (kohya's Lion) step for step, every one trains
a LoRA that lowers the loss and resumes bit for bit, and Prodigy at an Adam-sized rate warns."""

from __future__ import annotations

import pytest
import torch

from mixkit.training.optimizers import OPTIMIZERS, check_optimizer_args, make_optimizer, optimizer_description


def _groups():
    torch.manual_seed(0)
    weights = [torch.nn.Parameter(torch.randn(16, 8)), torch.nn.Parameter(torch.randn(8))]
    words = torch.nn.Parameter(torch.randn(4, 8))
    return weights, words, [{"params": weights, "lr": 3e-4}, {"params": [words], "lr": 1e-3, "weight_decay": 0.0}]


def test_lion_matches_lion_pytorch_exactly_with_groups_and_decay():
    lion_pytorch = pytest.importorskip("lion_pytorch", reason="lion-pytorch is the oracle (the test extra)")
    weights, words, groups = _groups()
    theirs_params = [torch.nn.Parameter(p.detach().clone()) for p in (*weights, words)]
    ours = make_optimizer("lion", groups, 3e-4)
    theirs = lion_pytorch.Lion([{"params": theirs_params[:2], "lr": 3e-4}, {"params": theirs_params[2:], "lr": 1e-3,
                                                                           "weight_decay": 0.0}],
                               lr=3e-4, weight_decay=ours.defaults["weight_decay"])
    assert ours.defaults["weight_decay"] == pytest.approx(0.1) and ours.defaults["betas"] == (0.9, 0.99)
    generator = torch.Generator().manual_seed(1)
    for _ in range(5):
        for mine, other in zip((*weights, words), theirs_params):
            grad = torch.randn(mine.shape, generator=generator)
            mine.grad, other.grad = grad.clone(), grad.clone()
        ours.step()
        theirs.step()
    for mine, other in zip((*weights, words), theirs_params):
        assert torch.equal(mine, other)
    # Every step moves each weight by the rate (a sign update), whatever the gradient's size.
    before = weights[0].detach().clone()
    weights[0].grad = 1e-9 * torch.ones_like(weights[0])
    ours.step()
    step = (before * (1 - 3e-4 * 0.1) - weights[0]).abs()
    assert torch.allclose(step, torch.full_like(step, 3e-4), rtol=1e-3)


def test_lion_refuses_bad_settings():
    from mixkit.training.lion import Lion

    p = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.raises(ValueError, match="positive learning rate"):
        Lion(p, lr=0.0)
    with pytest.raises(ValueError, match=r"betas must be two numbers in \[0, 1\)"):
        Lion(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="weight_decay must be >= 0"):
        Lion(p, weight_decay=-1.0)


def test_prodigy_at_an_adam_sized_rate_warns_and_the_registry_lists_every_name():
    pytest.importorskip("prodigyopt", reason="prodigyopt is in the train and test extras")
    _, _, groups = _groups()
    with pytest.warns(UserWarning, match="expects a rate of about 1.0"):
        make_optimizer("prodigy", groups, 3e-4)
    assert {"adamw", "adamw8bit", "lion", "prodigy", "adafactor"} <= set(OPTIMIZERS.names())


def test_prodigy_without_the_package_names_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "prodigyopt", None)
    with pytest.raises(ImportError, match="pip install prodigyopt"):
        make_optimizer("prodigy", _groups()[2], 1.0)


@pytest.mark.parametrize("name, rate", [("lion", 2e-4), ("prodigy", 1.0), ("adafactor", 2e-3)])
def test_each_optimizer_trains_a_lora_and_resumes_bit_for_bit(name, rate, tiny_sd1_dir, colour_dataset, tmp_path,
                                                              fixed_denoising_loss):
    from safetensors.torch import load_file

    from mixkit.lora import LoraRequest, apply_loras
    from mixkit.models.diffusion.loading import load_diffusion_model
    from mixkit.training.sd_lora_config import SDLoraTrainingConfig
    from mixkit.training.sd_lora_trainer import train_sd_lora

    if name == "prodigy":
        pytest.importorskip("prodigyopt", reason="prodigyopt is in the train and test extras")

    def config(output, **overrides):
        return SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset), output=str(tmp_path / output),
                                    resolution=32, batch_size=3, max_steps=8, rank=4, alpha=4.0, learning_rate=rate,
                                    seed=3, optimizer=name, checkpoint_dir=str(tmp_path / f"{output}-ckpt"),
                                    **overrides)

    straight = train_sd_lora(config("straight.safetensors"))
    first = train_sd_lora(config("resumed.safetensors"), stop_at_step=4)
    resumed = train_sd_lora(config("resumed.safetensors", resume_from=str(first.last_checkpoint)))
    assert first.losses + resumed.losses == straight.losses
    a, b = load_file(straight.output), load_file(resumed.output)
    assert all(torch.equal(a[k], b[k]) for k in a)
    model = load_diffusion_model(tiny_sd1_dir)
    before = fixed_denoising_loss(model, colour_dataset)
    apply_loras(model.unet, model.text_encoders, [LoraRequest(str(straight.output))], mode="merge")
    assert fixed_denoising_loss(model, colour_dataset) < before


def test_optimizer_args_set_the_constructors_settings_over_mixkits_defaults():
    """kohya's --optimizer_args: weight_decay, betas ... reach the optimizer and its ss_optimizer description; a
    parameter group's own setting (the word vectors' weight_decay 0) still wins, as torch gives groups precedence."""
    weights, vectors = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    groups = [{"params": [weights]}, {"params": [vectors], "weight_decay": 0.0}]
    optimizer = make_optimizer("lion", groups, 1e-4, {"weight_decay": 0.2, "betas": (0.95, 0.98)})
    assert [(g["weight_decay"], g["betas"]) for g in optimizer.param_groups] == [(0.2, (0.95, 0.98)),
                                                                                   (0.0, (0.95, 0.98))]
    assert optimizer_description(optimizer) == "mixkit.training.lion.Lion(betas=(0.95, 0.98),weight_decay=0.2)"
    assert make_optimizer("adamw", [{"params": [weights]}], 1e-4).param_groups[0]["weight_decay"] == 0.01


@pytest.mark.parametrize("options, message", [
    ({"d_coef": 2}, r"optimizer_args \['d_coef'\] are not settings of optimizer='adamw' \(AdamW\); it takes \['betas'"),
    ({"betas": (0.9, 1.5)}, r"optimizer_args .* for optimizer='adamw': Invalid beta parameter at index 1"),
    ({"lr": 1.0}, "must not set lr: the rate is learning_rate"),
])
def test_optimizer_args_the_constructor_refuses_are_refused_before_training(options, message):
    with pytest.raises(ValueError, match=message):
        check_optimizer_args("adamw", options, 1e-4)


def test_relative_step_adafactor_with_the_adafactor_schedule_is_kohyas_step_for_step():
    # kohya's get_optimizer for Adafactor with relative_step drops the rates (lr=None, no group "lr") and its
    # get_scheduler_fix returns transformers' AdafactorSchedule: the oracle, built here as kohya builds it.
    from transformers.optimization import Adafactor, AdafactorSchedule

    from mixkit.training.lr_schedules import warmup_schedule

    torch.manual_seed(0)
    start = [torch.randn(4, 3), torch.randn(5)]
    ours_params = [torch.nn.Parameter(t.clone()) for t in start]
    theirs_params = [torch.nn.Parameter(t.clone()) for t in start]
    options = {"relative_step": True, "scale_parameter": True, "warmup_init": True}
    groups = [{"params": ours_params[:1], "lr": 1e-4}, {"params": ours_params[1:], "lr": 5e-5}]
    with pytest.warns(UserWarning, match=r"learning rates \[5e-05, 0.0001\] only start the reported rate"):
        ours = make_optimizer("adafactor", groups, 1e-4, options)
    ours_schedule = warmup_schedule(ours, "adafactor", 0, 10, initial_lr=1e-4)
    theirs = Adafactor([{"params": theirs_params[:1]}, {"params": theirs_params[1:]}], lr=None, weight_decay=0.0,
                       **options)
    theirs_schedule = AdafactorSchedule(theirs, 1e-4)  # kohya's "adafactor:<learning_rate>"
    assert ours_schedule.get_last_lr() == theirs_schedule.get_last_lr() == [1e-4, 1e-4]  # before the first step
    for step in range(4):
        gradients = [torch.randn_like(t) for t in start]
        for params, optimizer, schedule in ((ours_params, ours, ours_schedule),
                                            (theirs_params, theirs, theirs_schedule)):
            for param, gradient in zip(params, gradients):
                param.grad = gradient.clone()
            optimizer.step()
            schedule.step()
        assert all(torch.equal(a, b) for a, b in zip(ours_params, theirs_params))
        assert ours_schedule.get_last_lr() == theirs_schedule.get_last_lr()
    # warmup_init: 1e-6 * step, times the parameter's RMS (scale_parameter); not the 1e-4 given
    assert ours_schedule.get_last_lr()[0] < 1e-5


def test_the_adafactor_schedule_goes_with_relative_step_adafactor_only(tmp_path):
    from mixkit.training.lr_schedules import warmup_schedule
    from mixkit.training.sd_lora_config import SDLoraTrainingConfig

    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"))
    fixed = {"optimizer": "adafactor", "optimizer_args": {"relative_step": False}}
    for relative in ({"optimizer": "adafactor"}, {"optimizer": "adafactor", "optimizer_args": {"relative_step": True}},
                     {"optimizer": "adafactor", "optimizer_args": {"relative_step": False, "warmup_init": True}}):
        SDLoraTrainingConfig(**base, **relative, lr_schedule="adafactor").check()
        # lr_schedule left at "constant" (kohya's default too) runs "adafactor", as kohya switches to it by itself
        config = SDLoraTrainingConfig(**base, **relative)
        config.check()
        assert config.relative_step_adafactor() and config.lr_schedule_to_run() == "adafactor"
        with pytest.raises(ValueError, match="lr_schedule='cosine' would not act .*relative_step\": false"):
            SDLoraTrainingConfig(**base, **relative, lr_schedule="cosine").check()
        with pytest.raises(ValueError, match="takes no warm-up .*warmup_steps=5"):
            SDLoraTrainingConfig(**base, **relative, warmup_steps=5).check()
    config = SDLoraTrainingConfig(**base, **fixed, lr_schedule="cosine", warmup_steps=5)
    config.check()
    assert not config.relative_step_adafactor() and config.lr_schedule_to_run() == "cosine"
    with pytest.raises(ValueError, match="lr_schedule='adafactor' reports the step size .*relative_step=False"):
        SDLoraTrainingConfig(**base, **fixed, lr_schedule="adafactor").check()
    with pytest.raises(ValueError, match="needs optimizer='adafactor' without optimizer_args relative_step=False"):
        warmup_schedule(make_optimizer("adamw", [{"params": [torch.nn.Parameter(torch.zeros(1))]}], 1e-3),
                        "adafactor", 0, 10)


def test_adafactor_takes_kohyas_defaults_where_optimizer_args_are_silent():
    """kohya's get_optimizer: relative_step=True unless given, turned on by warmup_init, and transformers' own
    defaults for the rest (scale_parameter=True, warmup_init=False, weight_decay=0); at a given rate only with
    relative_step=False, the groups keeping their rates."""
    weights = [torch.nn.Parameter(torch.zeros(2))]
    with pytest.warns(UserWarning, match="picks its own step size"):
        plain = make_optimizer("adafactor", [{"params": weights, "lr": 3e-4}], 1e-4)
    assert {key: plain.defaults[key] for key in ("lr", "relative_step", "scale_parameter", "warmup_init",
                                                  "weight_decay")} == \
        {"lr": None, "relative_step": True, "scale_parameter": True, "warmup_init": False, "weight_decay": 0.0}
    assert "lr" not in plain.param_groups[0] or plain.param_groups[0]["lr"] is None
    with pytest.warns(UserWarning, match="picks its own step size"):
        warm = make_optimizer("adafactor", [{"params": weights}], 1e-4, {"relative_step": False, "warmup_init": True})
    assert (warm.defaults["relative_step"], warm.defaults["warmup_init"]) == (True, True)
    fixed = make_optimizer("adafactor", [{"params": weights, "lr": 3e-4}], 1e-4, {"relative_step": False})
    assert (fixed.defaults["lr"], fixed.param_groups[0]["lr"], fixed.defaults["scale_parameter"]) == (1e-4, 3e-4, True)
    # a rate of 0 has nothing to ignore, so nothing is said (kohya: "if lr != 0.0")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_optimizer("adafactor", [{"params": weights}], 0.0)
