"""DoRA runs of the SD LoRA trainer (LyCORIS's dora_wd): the switch in configs and kohya network_args, a tiny run
whose file carries trained `dora_scale` magnitudes and, loaded through the community-LoRA loader, gives the trained
network's own UNet and text-encoder outputs; network_weights, EMA and intermediate saves with DoRA."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from mixkit.io import read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.config_file import translate_kohya_options
from mixkit.training.lora_network import LoraNetwork
from mixkit.training.network_weights import load_network_weights
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from tests.mixkit.training.lycoris_oracle import lycoris_created_modules
from tests.mixkit.training.model_outputs import unet_and_text_outputs

RANKS = dict(rank=2, alpha=2.0, conv_rank=2, conv_alpha=1.0)


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=2,
                    max_steps=3, learning_rate=1e-2, seed=3, train_text_encoder=True, network="locon",
                    dora_wd=True, **RANKS)
    return SDLoraTrainingConfig(**{**settings, **overrides})


def _network(model, dora=True) -> LoraNetwork:
    return LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, conv_rank=2, conv_alpha=1.0,
                       train_text_encoder=True, dora=dora)


@pytest.fixture(scope="module")
def dora_run(tiny_sd1_dir, colour_dataset, tmp_path_factory):
    output = tmp_path_factory.mktemp("dora") / "dora.safetensors"
    return train_sd_lora(_config(tiny_sd1_dir, colour_dataset, output, save_every_n_steps=2))


def test_dora_wd_must_be_a_bool():
    with pytest.raises(TypeError, match="dora_wd must be true or false, got 'yes'"):
        SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", dora_wd="yes").check()


@pytest.mark.parametrize("network", ["lora", "locon", "cross-kv"])
def test_every_network_kind_may_train_dora(network):
    SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", network=network, dora_wd=True).check()


def test_kohya_network_args_spell_it_as_lycoris_does():
    assert translate_kohya_options({"network_args": ["conv_dim=4", "dora_wd=True"]}) == {
        "conv_rank": 4, "network": "locon", "dora_wd": True}
    assert translate_kohya_options({"network_args": "dora_wd=false"}) == {"dora_wd": False}
    # LyCORIS's default wd_on_output=True is what mixkit trains; the other side is refused, not ignored
    assert translate_kohya_options({"network_args": ["dora_wd=True", "wd_on_output=True"]}) == {"dora_wd": True}
    with pytest.raises(ValueError, match="'wd_on_output=False': mixkit's DoRA normalises each output row"):
        translate_kohya_options({"network_args": ["dora_wd=True", "wd_on_output=False"]})
    with pytest.raises(ValueError, match="'dora_wd=yes': the value must be True or False"):
        translate_kohya_options({"network_args": ["dora_wd=yes"]})


def test_the_file_carries_trained_magnitudes_and_lycoris_metadata(dora_run, tiny_sd1_dir):
    tensors = load_file(dora_run.output)
    modules = {k.rpartition(".")[0] for k in tensors if k.endswith(".alpha")}
    assert {k.rpartition(".")[0] for k in tensors if k.endswith(".dora_scale")} == modules
    assert any(m.startswith("lora_te") for m in modules) and any("resnets" in m for m in modules)
    fresh = _network(load_diffusion_model(tiny_sd1_dir)).kohya_state_dict()
    for key in (k for k in tensors if k.endswith(".dora_scale")):
        assert tensors[key].shape == fresh[key].shape and tensors[key].shape[1:] == (1,) * (tensors[key].dim() - 1)
    moved = [k for k in tensors if k.endswith(".dora_scale") and not torch.equal(tensors[k], fresh[k])]
    assert len(moved) > len(modules) // 2  # the magnitudes trained, not only the directions
    metadata = read_safetensors_metadata(dora_run.output)
    assert metadata["ss_network_module"] == "lycoris.kohya"
    # no built-in LyCORIS preset builds LoCon's layers (full adds conv_in, conv_out, time_embedding): the file names
    # the preset file mixkit ships for them (`test_the_files_network_args_build_its_modules_in_lycoris`)
    assert json.loads(metadata["ss_network_args"]) == {"algo": "locon", "preset": "mixkit_locon.toml", "conv_dim": "2",
                                                       "conv_alpha": "1.0", "dora_wd": "True"}
    assert json.loads(metadata["mixkit_training_config"])["dora_wd"] is True
    step_file = dora_run.output.with_name("dora-step00000002.safetensors")
    assert load_file(step_file).keys() == tensors.keys()


@pytest.mark.parametrize("mode", ["merge", "runtime"])
def test_the_file_through_the_community_loader_gives_the_trained_networksunet_and_text_outputs(dora_run, tiny_sd1_dir, mode):
    from mixkit.lora import LoraRequest, apply_loras

    trained = load_diffusion_model(tiny_sd1_dir)
    network = _network(trained)
    load_network_weights(network, dora_run.output)
    network.attach().eval()
    expected = unet_and_text_outputs(trained)
    network.detach()
    base = unet_and_text_outputs(trained)

    loaded = load_diffusion_model(tiny_sd1_dir)
    apply_loras(loaded.unet, loaded.text_encoders, [LoraRequest(str(dora_run.output))], mode=mode)
    for got, want, before in zip(unet_and_text_outputs(loaded), expected, base):
        assert (want - before).abs().max() > 1e-3  # the run changed both parts
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_a_dora_file_continues_only_as_dora(dora_run, tiny_sd1_dir, colour_dataset, tmp_path):
    continued = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "c.safetensors", max_steps=1,
                                      learning_rate=1e-12, network_weights=str(dora_run.output)))
    first, second = load_file(dora_run.output), load_file(continued.output)
    assert first.keys() == second.keys()
    assert all(torch.allclose(first[k], second[k], rtol=0, atol=1e-9) for k in first)

    model = load_diffusion_model(tiny_sd1_dir)
    with pytest.raises(ValueError, match=r"is a DoRA file \(.* has dora_scale\) and this run trains plain LoRA; "
                                         "set dora_wd: true"):
        load_network_weights(_network(model, dora=False), dora_run.output)
    plain = {k: v for k, v in first.items() if not k.endswith(".dora_scale")}
    from safetensors.torch import save_file

    save_file(plain, tmp_path / "plain.safetensors")
    with pytest.raises(ValueError, match="is a plain LoRA file .* lacks dora_scale.* set dora_wd: false"):
        load_network_weights(_network(model), tmp_path / "plain.safetensors")


def test_max_norm_and_ema_keep_working_with_dora(tiny_sd1_dir, colour_dataset, tmp_path):
    """Max-norm bounds the low-rank change (LyCORIS's apply_max_norm leaves the magnitude too); the EMA averages the
    magnitudes with the other trained parameters, so its file differs from the last step's in them as well."""
    def run(name, **overrides):
        return load_file(train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / f"{name}.safetensors",
                                               max_steps=2, scale_weight_norms=1e-3, **overrides)).output)

    last = run("last")
    for name in {k.rpartition(".")[0] for k in last if k.endswith(".dora_scale")}:
        up, down = last[f"{name}.lora_up.weight"].flatten(1), last[f"{name}.lora_down.weight"].flatten(1)
        assert (up @ down).norm() * float(last[f"{name}.alpha"]) / down.shape[0] <= 1e-3 * (1 + 1e-4)
    averaged = run("ema", use_ema=True, ema_decay=0.5)
    fresh = _network(load_diffusion_model(tiny_sd1_dir)).kohya_state_dict()
    magnitudes = [k for k in last if k.endswith(".dora_scale")]
    assert any(not torch.equal(averaged[k], fresh[k]) for k in magnitudes)
    assert any(not torch.equal(averaged[k], last[k]) for k in magnitudes)


def _lycoris_modules_of(metadata: dict, model) -> dict[str, tuple[int, float]]:
    """(rank, alpha) of each module LyCORIS 4.1.3's kohya.create_network builds from a file's recorded network, as
    kohya would run it with `--network_args` from `ss_network_args` (a mixkit preset file's name resolved to the
    shipped file); text-encoder names get the `text_model_` level transformers 5 dropped and files keep."""
    return lycoris_created_modules(model, int(metadata["ss_network_dim"]), float(metadata["ss_network_alpha"]),
                                   json.loads(metadata["ss_network_args"]))


def _file_modules(path) -> dict[str, tuple[int, float]]:
    tensors = load_file(path)
    return {key[:-len(".alpha")]: (tensors[key[:-len(".alpha")] + ".lora_down.weight"].shape[0], tensors[key].item())
            for key in tensors if key.endswith(".alpha")}


def test_the_files_network_args_build_its_modules_in_lycoris(dora_run, tiny_sd1_dir):
    """The file says how it was trained: kohya + LyCORIS given its recorded network_args build exactly its modules,
    ranks and alphas, and mixkit reads the same args back as the run's config."""
    from mixkit.lora.network_options import kohya_network_options

    metadata = read_safetensors_metadata(dora_run.output)
    assert _lycoris_modules_of(metadata, load_diffusion_model(tiny_sd1_dir)) == _file_modules(dora_run.output)
    back = SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors",
                                **translate_kohya_options(kohya_network_options(metadata)))
    back.check()
    assert (back.network, back.lycoris_preset, back.dora_wd, back.conv_layers(), back.rank, back.alpha) == \
        ("locon", None, True, (2, 1.0), 2, 2.0)


def test_a_cross_kv_dora_file_records_its_layers(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.lora.network_options import kohya_network_options

    run = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "kv.safetensors", network="cross-kv",
                                max_steps=1, conv_rank=None, conv_alpha=None))
    metadata = read_safetensors_metadata(run.output)
    assert metadata["ss_network_module"] == "lycoris.kohya"
    assert json.loads(metadata["ss_network_args"]) == {"algo": "lora", "preset": "mixkit_cross_kv.toml",
                                                       "dora_wd": "True"}
    modules = _file_modules(run.output)
    assert {name[-len("attn2_to_k"):] for name in modules if name.startswith("lora_unet")} == {"attn2_to_k",
                                                                                             "attn2_to_v"}
    assert _lycoris_modules_of(metadata, load_diffusion_model(tiny_sd1_dir)) == modules
    back = SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors",
                                **translate_kohya_options(kohya_network_options(metadata)))
    back.check()
    assert (back.network, back.lycoris_preset, back.dora_wd) == ("cross-kv", None, True)


def test_inspect_says_how_a_mixkit_dora_file_was_trained(dora_run):
    from mixkit.lora.report import inspect_lora

    assert ("trained as:  lycoris.kohya, algo locon, preset mixkit_locon.toml, dim 2, alpha 2, conv dim 2, "
            "conv alpha 1, DoRA (dora_wd)") in inspect_lora(dora_run.output).lines()
