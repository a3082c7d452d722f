"""Hypernetwork training end to end on the tiny SD 1.x model: the loss falls, the written A1111 file gives the trained
modules' UNet outputs through the hypernetwork library, the model comes back bit-identical, a file continues with its
step, A1111's stepped learning rate applies per step, and bad settings fail before training."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from mixkit.hypernetworks import HypernetworkApplication, HypernetworkLibrary, apply_hypernetworks
from mixkit.hypernetworks.create import TrainableHypernetwork
from mixkit.hypernetworks.shape import HypernetworkShape
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.hn_config import SDHypernetworkConfig
from mixkit.training.hn_trainer import _stepped_rate_schedule, checkpoint_identity, train_hypernetwork


def _config(model, dataset, output, **overrides) -> SDHypernetworkConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=6, learning_rate=1e-2, seed=3, mixed_precision="no", enable_sizes=[32, 64])
    return SDHypernetworkConfig(**{**settings, **overrides})


def _weights(model) -> dict[str, torch.Tensor]:
    return {f"{part}.{name}": tensor.detach().clone()
            for part, module in [("unet", model.unet), ("vae", model.vae), ("te", model.text_encoders[0])]
            for name, tensor in module.state_dict().items()}


def _unet_output(unet) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    latents = torch.randn(1, 4, 8, 8, generator=generator)
    context = torch.randn(1, 7, 32, generator=generator)
    with torch.no_grad():
        return unet(latents, torch.tensor([500]), encoder_hidden_states=context).sample


@pytest.fixture(scope="module")
def trained(tiny_sd1_dir, colour_dataset, tmp_path_factory, fixed_denoising_loss):
    model = load_diffusion_model(tiny_sd1_dir)
    before, output_before = _weights(model), _unet_output(model.unet)
    output = tmp_path_factory.mktemp("hn") / "squares.pt"
    config = _config(tiny_sd1_dir, colour_dataset, output, save_every_n_steps=3)
    start = TrainableHypernetwork.new("squares", config, config.seed).eval()
    with apply_hypernetworks(model.unet, [HypernetworkApplication(start.as_hypernetwork(), 1.0)]):
        start_loss = fixed_denoising_loss(model, colour_dataset)
    made = []
    with pytest.MonkeyPatch.context() as patch:  # keep the trainer's own modules, to compare the file with them
        new = TrainableHypernetwork.new
        patch.setattr(TrainableHypernetwork, "new", lambda *args: made.append(new(*args)) or made[-1])
        result = train_hypernetwork(config, model=model)
    return dict(config=config, result=result, model=model, before=before, output_before=output_before,
                start_loss=start_loss, modules=made[0])


def test_the_loss_falls(trained, colour_dataset, fixed_denoising_loss):
    result, model = trained["result"], trained["model"]
    assert result.steps == 6 and len(result.losses) == 6 and result.output == Path(trained["config"].output)
    loaded = HypernetworkLibrary(result.output.parent).load("squares")
    with apply_hypernetworks(model.unet, [HypernetworkApplication(loaded, 1.0)]):
        trained_loss = fixed_denoising_loss(model, colour_dataset)
    assert trained_loss < trained["start_loss"] - 0.02


def test_the_file_gives_the_trained_modules_outputs_through_the_library(trained):
    result, model, modules = trained["result"], trained["model"], trained["modules"]
    assert not modules.training and not any(p.requires_grad for p in modules.parameters())
    modules.attach(model.unet)
    try:
        from_modules = _unet_output(model.unet)
    finally:
        modules.detach()
    loaded = HypernetworkLibrary(result.output.parent).load("squares")
    assert loaded.metadata["step"] == 6 and loaded.metadata["name"] == "squares"
    with apply_hypernetworks(model.unet, [HypernetworkApplication(loaded, 1.0)]):
        from_file = _unet_output(model.unet)
    assert not torch.allclose(from_file, trained["output_before"], atol=1e-4)  # it trained something
    torch.testing.assert_close(from_file, from_modules, rtol=0, atol=1e-6)


def test_the_model_comes_back_unchanged(trained):
    model, before = trained["model"], trained["before"]
    after = _weights(model)
    assert [name for name in before if not torch.equal(before[name], after[name])] == []
    assert torch.equal(_unet_output(model.unet), trained["output_before"])  # no projection left wrapped
    assert not model.unet.training and not any(p.requires_grad for p in model.unet.parameters())


def test_files_along_the_way_are_named_by_their_step_as_a1111_names_them(trained):
    result = trained["result"]
    assert [path.name for path in result.intermediate_outputs] == ["squares-3.pt"]
    saved = torch.load(result.intermediate_outputs[0], weights_only=True)
    assert saved["step"] == 3 and saved["name"] == "squares"  # A1111 keeps the network's name inside
    assert saved["sd_checkpoint"] is None and saved["sd_checkpoint_name"]  # a folder model: its name, no hash


def test_a_file_continues_its_steps_until_the_schedule_ends(trained, tiny_sd1_dir, colour_dataset):
    result, model = trained["result"], trained["model"]
    output = result.output
    # the file brings its own widths: enable_sizes stays at its default
    config = _config(tiny_sd1_dir, colour_dataset, output, hypernetwork=str(output),
                     enable_sizes=HypernetworkShape().enable_sizes, max_steps=5, learning_rate_schedule="1e-2:8")
    before = _weights(model)
    again = train_hypernetwork(config, model=model)
    assert again.steps == 2  # the schedule ends at the network's step 8; it was at 6
    data = torch.load(output, weights_only=True)
    assert data["step"] == 8 and data["layer_structure"] == [1.0, 2.0, 1.0]
    assert all(torch.equal(before[name], tensor) for name, tensor in _weights(model).items())


def test_the_stepped_rate_counts_the_networks_steps():
    parameter = torch.nn.Parameter(torch.zeros(2))
    config = SDHypernetworkConfig(model="m", dataset="d", output="x.pt", learning_rate_schedule="5e-5:100, 5e-6:1500")
    optimizer, schedule = _stepped_rate_schedule(config, [parameter], start_step=98)
    rates = []
    for _ in range(4):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates == pytest.approx([5e-5, 5e-5, 5e-6, 5e-6], rel=1e-12)  # network steps 98, 99, 100, 101


@pytest.mark.parametrize("overrides, message", [
    (dict(enable_sizes=[768]), "none of this model's attention widths [32, 64]"),
])
def test_widths_the_model_lacks_are_refused_and_the_model_is_left_alone(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                        sd1_model, overrides, message):
    before = _weights(sd1_model)
    with pytest.raises(ValueError) as error:
        train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.pt", **overrides), model=sd1_model)
    assert message in str(error.value)
    assert all(torch.equal(before[name], tensor) for name, tensor in _weights(sd1_model).items())
    assert not (tmp_path / "x.pt").exists()


def test_settings_are_refused_before_anything_loads(tmp_path, colour_dataset):
    existing = tmp_path / "old.pt"
    existing.write_bytes(b"x")
    cases = [
        (dict(output=str(existing)), "exists; set hypernetwork="),
        (dict(output=str(tmp_path / "new.safetensors")), "must end in .pt"),
        (dict(output=str(tmp_path / "bad:name.pt")), "characters A1111 removes"),
        (dict(hypernetwork=str(tmp_path / "missing.pt")), "is not a file"),
        (dict(hypernetwork=str(existing), output=str(tmp_path / "o.pt"), layer_structure="1, 4, 1"),
         "layer_structure describe a new hypernetwork"),
        (dict(layer_structure="1, 2"), "must start and end with 1"),
        (dict(activation_func="gelus"), "choose one of linear, relu"),
        (dict(learning_rate_schedule="fast"), "is not 'rate' or 'rate:step'"),
        (dict(learning_rate_schedule="1e-3:10", lr_schedule="cosine"), "sets every step's rate"),
        (dict(template_file="a.txt", template_name="style.txt"), "keep one"),
    ]
    for overrides, message in cases:
        settings = dict(model="no-such-model", dataset=str(colour_dataset), output=str(tmp_path / "o.pt"))
        with pytest.raises(ValueError) as error:
            train_hypernetwork(SDHypernetworkConfig(**{**settings, **overrides}))
        assert message in str(error.value), overrides


def test_a_schedule_already_ended_is_refused(tmp_path, colour_dataset):
    start = TrainableHypernetwork.new("done", SDHypernetworkConfig(model="m", dataset="d", output="o.pt"), 0)
    start.save(tmp_path / "done.pt", step=50)
    config = SDHypernetworkConfig(model="no-such-model", dataset=str(colour_dataset), output=str(tmp_path / "done.pt"),
                                  hypernetwork=str(tmp_path / "done.pt"), learning_rate_schedule="1e-3:50")
    with pytest.raises(ValueError) as error:
        train_hypernetwork(config)
    assert "is at step 50, where learning_rate_schedule '1e-3:50' has already ended" in str(error.value)


def test_template_lines_make_the_captions_with_filewords_and_the_name(tmp_path):
    template = tmp_path / "hypernetwork.txt"
    template.write_text("a picture of [filewords]\n\n[name] art, [filewords]\n", encoding="utf-8")
    config = SDHypernetworkConfig(model="m", dataset="d", output=str(tmp_path / "inky.pt"),
                                  template_file=str(template))
    templates = config.caption_templates()
    assert templates.lines == ("a picture of [filewords]", "[name] art, [filewords]")  # no [name] needed
    captions = templates.captions(["a red square"] * 8, 0, 0)
    assert set(captions) == {"a picture of a red square", "inky art, a red square"}
    assert SDHypernetworkConfig(model="m", dataset="d", output="o.pt").caption_templates() is None


def test_the_base_model_is_recorded_as_a1111_records_it(tmp_path, tiny_sd1_dir):
    single = tmp_path / "base-v1.safetensors"
    single.write_bytes(b"weights")
    assert checkpoint_identity(single, None) == (hashlib.sha256(b"weights").hexdigest()[:10], "base-v1")
    assert checkpoint_identity(tiny_sd1_dir, None) == (None, tiny_sd1_dir.name)  # a folder has no one file to hash


def test_resume_continues_bit_for_bit_with_dropout_and_a_stepped_rate(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                       sd1_model):
    settings = dict(max_steps=4, use_dropout=True, dropout_structure="0, 0.3, 0", learning_rate_schedule="1e-2:2, 1e-3")
    straight = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a" / "h.pt", **settings),
                                  model=sd1_model)
    stopped = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "h.pt", **settings),
                                 model=sd1_model, stop_at_step=2)
    assert stopped.output is None and stopped.last_checkpoint is not None
    resumed = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "h.pt", **settings,
                                         resume_from=str(stopped.last_checkpoint)), model=sd1_model)
    assert resumed.first_step == 2 and resumed.losses == straight.losses[2:]
    a, b = (torch.load(path, weights_only=True) for path in (straight.output, resumed.output))
    assert b["step"] == 4 and all(torch.equal(a[64][i][key], b[64][i][key]) for i in (0, 1) for key in a[64][i])


def _trained_tensors(path) -> dict[str, torch.Tensor]:
    data = torch.load(path, weights_only=True)
    return {f"{width}.{i}.{key}": value for width in (32, 64) for i in (0, 1) for key, value in data[width][i].items()}


def test_continuing_a_file_with_its_optim_equals_one_unbroken_run(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                   sd1_model):
    # 4 steps over epochs of 2 batches, with dropout: the continued run must take the data, noise and dropout of
    # steps 3-4 and the optimizer's moments after step 2
    shape = dict(use_dropout=True, dropout_structure="0, 0.3, 0")
    straight = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "a" / "h.pt", max_steps=4,
                                          save_optimizer_state=True, **shape), model=sd1_model)
    first = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b" / "h.pt", max_steps=2,
                                       save_optimizer_state=True, **shape), model=sd1_model)
    half = Path(first.output)
    saved = torch.load(half.with_name("h.pt.optim"), weights_only=True)
    assert saved["optimizer_name"] == "AdamW"  # A1111's keys and torch class name
    assert saved["hash"] == hashlib.sha256(half.read_bytes()).hexdigest()[:10]
    assert {int(state["step"]) for state in saved["optimizer_state_dict"]["state"].values()} == {2}
    untouched = half.with_name("copy.pt")
    untouched.write_bytes(half.read_bytes())  # the half-way file, continued below without its .optim

    continued = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, half, hypernetwork=str(half), max_steps=2,
                                           enable_sizes=HypernetworkShape().enable_sizes, save_optimizer_state=True),
                                   model=sd1_model)
    assert continued.losses == straight.losses[2:]
    a, b = _trained_tensors(straight.output), _trained_tensors(continued.output)
    assert [key for key in a if not torch.equal(a[key], b[key])] == []
    assert torch.load(continued.output, weights_only=True)["step"] == 4
    optim_a, optim_b = (torch.load(Path(path).with_name("h.pt.optim"), weights_only=True)["optimizer_state_dict"]
                        for path in (straight.output, continued.output))
    assert all(torch.equal(optim_a["state"][i][key], optim_b["state"][i][key])
               for i in optim_a["state"] for key in ("exp_avg", "exp_avg_sq", "step"))

    # without the .optim the optimizer starts afresh (A1111's behaviour), and the run is not the unbroken one
    fresh = train_hypernetwork(_config(tiny_sd1_dir, colour_dataset, untouched, hypernetwork=str(untouched),
                                       max_steps=2, enable_sizes=HypernetworkShape().enable_sizes), model=sd1_model)
    assert fresh.losses[0] == straight.losses[2]  # same weights, data and noise for the first continued step
    assert fresh.losses[1] != straight.losses[3]
    assert not untouched.with_name("copy.pt.optim").exists()  # save_optimizer_state is off by default
