"""LyCORIS configs (network_module "lycoris.kohya"): every accepted algo / preset / conv_dim combination builds exactly
the modules LyCORIS 4.1.3's own `kohya.create_network` builds on the tiny SD 1.x UNet and CLIP text encoder (the
oracle), with LyCORIS's conv_dim / conv_alpha defaults; refusals name the arg and what is accepted."""

from __future__ import annotations

import copy

import pytest

from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.config_file import translate_kohya_options, with_kohya_defaults
from mixkit.training.lora_network import LoraNetwork
from mixkit.lora.network_options import kohya_network_options
from mixkit.training.lycoris_presets import LYCORIS_PRESETS
from mixkit.training.sd_lora_config import SDLoraTrainingConfig

BASE = dict(model="m", dataset="d", output="o.safetensors")


@pytest.fixture(scope="module")
def sd1(tiny_sd1_dir):
    return load_diffusion_model(tiny_sd1_dir)


def _config(network_args, **kohya) -> SDLoraTrainingConfig:
    settings = {"network_module": "lycoris.kohya", "network_args": network_args, "network_dim": 4,
                "network_alpha": 2.0, **kohya}
    known = {"model", "dataset", "output"} | set(SDLoraTrainingConfig.__dataclass_fields__)
    # kohya's defaults too: its LoRA trainer trains the text encoder's adapters unless network_train_unet_only
    config = SDLoraTrainingConfig(**BASE, **with_kohya_defaults(settings, translate_kohya_options(settings, known),
                                                                known))
    config.check()
    return config


def _mixkit_modules(model, config) -> dict[str, tuple[int, float]]:
    conv_rank, conv_alpha = config.conv_layers()
    network = LoraNetwork(model.unet, model.text_encoders, rank=config.rank, alpha=config.alpha, conv_rank=conv_rank,
                          conv_alpha=conv_alpha, train_text_encoder=config.train_text_encoder,
                          preset=LYCORIS_PRESETS.get(config.lycoris_preset), dora=config.dora_wd)
    return {name: (adapter.rank, float(adapter.alpha)) for name, adapter in network.adapters.items()}


def _lycoris_modules(model, network_args, monkeypatch) -> dict[str, tuple[int, float]]:
    """LyCORIS's own network for the same args; text-encoder names get the `text_model_` level that transformers 5
    dropped and shared files keep (as mixkit's names do)."""
    import lycoris.kohya

    presets = copy.deepcopy(lycoris.kohya.PRESET)
    for preset in presets.values():
        # LyCORIS 4.1.3 lists Anima's "TimestepEmbedding" class beside the "time_embedding.linear_*" names, and a
        # diffusers UNet's time_embedding is of that class, so LyCORIS asserts on the duplicate name; kohya's UNet
        # is where the names apply (`lycoris_presets`). Dropping the class leaves the same layers, adapted once.
        modules = preset.get("unet_target_module", [])
        preset["unet_target_module"] = [m for m in modules if m != "TimestepEmbedding"]
        # kohya's UNet calls its attention class CrossAttention, diffusers' Attention (attn-only's UNet layers)
        if "CrossAttention" in modules:
            preset["unet_target_module"].append("Attention")
    monkeypatch.setattr(lycoris.kohya, "PRESET", presets)
    kwargs = dict(entry.split("=", 1) for entry in network_args)
    network = lycoris.kohya.create_network(1.0, 4, 2.0, None, model.text_encoders[0], model.unet, **kwargs)
    out = {}
    for module in network.loras:
        name = module.lora_name.replace("lora_te_", "lora_te_text_model_", 1)
        out[name] = (module.lora_dim, float(module.alpha))
    return out


COMBINATIONS = [
    [],  # LyCORIS's defaults: algo lora, preset full, conv_dim = network_dim
    ["algo=lora"],
    ["algo=locon", "conv_dim=2", "conv_alpha=1"],
    ["algo=locon", "preset=full", "conv_dim=3"],
    ["algo=lora", "preset=attn-mlp"],
    ["algo=lora", "preset=attn-mlp", "conv_dim=2"],  # attn-mlp adapts no 3x3 conv whatever conv_dim says
    ["algo=lora", "preset=attn-only"],
    ["algo=locon", "preset=unet-transformer-only"],
    ["preset=full-lin"],
    ["preset=unet-only", "conv_dim=2", "conv_alpha=0.5"],
    ["preset=unet-convblock-only"],
    ["algo=lora", "preset=full", "dora_wd=True"],
    ["algo=locon", "conv_dim=0"],  # LyCORIS reads the text "0": no 3x3 conv, conv_in / conv_out included
    ["algo=locon", "conv_dim=2", "conv_alpha=0"],  # LoConModule: alpha 0 is alpha = rank, as mixkit's 0
]


@pytest.mark.parametrize("network_args", COMBINATIONS, ids=lambda args: " ".join(args) or "defaults")
def test_each_accepted_combination_builds_lycoris_module_set(sd1, network_args, monkeypatch):
    config = _config(network_args)
    mine = _mixkit_modules(sd1, config)
    lycoris = _lycoris_modules(sd1, network_args, monkeypatch)
    assert (sorted(set(mine) - set(lycoris)), sorted(set(lycoris) - set(mine))) == ([], [])
    assert mine == lycoris  # every module's rank and alpha too
    assert len(mine) > 0


def test_lycoris_defaults_follow_network_dim_and_alpha():
    config = _config(["algo=lora"], network_dim=8, network_alpha=3.0)
    assert (config.network, config.lycoris_preset, config.conv_layers()) == ("lora", "full", (8, 3.0))
    assert _config(["preset=attn-mlp", "conv_dim=4"]).conv_layers()[0] is None  # attn-mlp adapts no 3x3 conv


def test_a_unet_preset_trains_no_text_encoder_even_in_a_kohya_config():
    assert _config(["preset=unet-transformer-only"]).train_text_encoder is False
    with pytest.raises(ValueError, match="adapts no text-encoder layer, but train_text_encoder is true"):
        SDLoraTrainingConfig(**BASE, lycoris_preset="unet-only", train_text_encoder=True).check()


@pytest.mark.parametrize("entry, message", [
    ("algo=loha", "entry 'algo=loha': mixkit trains LyCORIS's algo lora and locon"),
    ("algo=lokr", "algo=lora or algo=locon"),
    ("algo=ia3", "algo=lora or algo=locon"),
    ("algo=full", "algo=lora or algo=locon"),
    ("use_tucker=True", r"'use_tucker=True': mixkit's LoCon has no Tucker.*accepts \['algo'"),
    ("train_norm=True", r"'train_norm=True': mixkit adapts no normalisation layer"),
    ("preset=ia3", r"'preset=ia3': mixkit builds LyCORIS's presets \['full'"),
    ("preset=my_preset.toml", "preset files are not read"),
    ("factor=8", "no LoKr adapter"),
    ("bogus=1", r"'bogus=1': not a LyCORIS option mixkit trains.*accepts \['algo'"),
    ("dropout=0.1", "LyCORIS's dropout is not kohya's network_dropout"),
    ("rank_dropout=0.1", "LyCORIS's rank_dropout is not kohya's rank_dropout"),
    ("wd_on_output=False", "wd_on_output=True"),
    ("dora_wd=yes", "must be True or False"),
    ("conv_dim=2.5", "must be an integer"),
])
def test_what_mixkit_does_not_train_is_refused_naming_the_arg(entry, message):
    with pytest.raises(ValueError, match=message):
        _config([entry])


def test_lycoris_options_need_lycoris_and_network_dropout_is_refused_under_it():
    with pytest.raises(ValueError, match=r"'algo=locon' is LyCORIS's: set network_module = \"lycoris.kohya\""):
        translate_kohya_options({"network_args": ["algo=locon"]})
    with pytest.raises(ValueError, match="neuron_dropout, which LyCORIS ignores"):
        _config(["algo=lora"], network_dropout=0.1)
    with pytest.raises(ValueError, match="mixkit trains kohya's networks.lora and LyCORIS's 'lycoris.kohya'"):
        translate_kohya_options({"network_module": "networks.oft"})


def test_accepted_zero_dropouts_module_dropout_and_loraplus_translate():
    config = _config(["dropout=0", "rank_dropout=0.0", "module_dropout=0.1", "loraplus_lr_ratio=16"])
    assert (config.network_dropout, config.rank_dropout, config.module_dropout, config.loraplus_lr_ratio) == \
        (0.0, 0.0, 0.1, 16)


@pytest.mark.parametrize("metadata, expected", [
    # a DoRA file of mixkit's first DoRA trainer (before presets were written)
    ({"ss_network_module": "lycoris.kohya", "ss_network_dim": "4", "ss_network_alpha": "2.0",
      "ss_network_args": '{"algo": "lora", "dora_wd": "True"}'},
     dict(network="lora", lycoris_preset="full", dora_wd=True, rank=4, alpha=2.0)),
    # what mixkit writes now for a networks.lora-layer DoRA run
    ({"ss_network_module": "lycoris.kohya", "ss_network_dim": "4", "ss_network_alpha": "2.0",
      "ss_network_args": '{"algo": "lora", "preset": "attn-mlp", "dora_wd": "True"}'},
     dict(network="lora", lycoris_preset="attn-mlp", dora_wd=True, rank=4, alpha=2.0)),
    ({"ss_network_module": "networks.lora", "ss_network_dim": "8", "ss_network_alpha": "8.0",
      "ss_network_args": '{"conv_dim": "2", "conv_alpha": "1.0"}'},
     dict(network="locon", lycoris_preset=None, dora_wd=False, rank=8, conv_rank=2)),
])
def test_a_files_network_metadata_reads_back_as_a_config(metadata, expected):
    options = kohya_network_options(metadata)
    config = SDLoraTrainingConfig(**BASE, **translate_kohya_options(options))
    config.check()
    assert {key: getattr(config, key) for key in expected} == expected


def test_undecodable_network_args_metadata_is_refused():
    with pytest.raises(ValueError, match="ss_network_args='\\[1\\]' is not a JSON object"):
        kohya_network_options({"ss_network_args": "[1]"})


def test_sdxl_leaves_out_the_sd1_paths(sdxl_model):
    network = LoraNetwork(sdxl_model.unet, sdxl_model.text_encoders, rank=2, alpha=1.0, conv_rank=2,
                          preset=LYCORIS_PRESETS.get("full"), top_level_paths=False)
    assert not [name for name in network.adapters if "conv_in" in name or "time_embedding" in name
                or "conv_out" in name]
    assert any("resnets" in name for name in network.adapters)


def test_a_lycoris_run_writes_lycoris_metadata_and_continues_from_its_file(tiny_sd1_dir, colour_dataset, tmp_path):
    import json

    from mixkit.io import read_safetensors_metadata
    from mixkit.training.sd_lora_trainer import train_sd_lora

    settings = dict(model=str(tiny_sd1_dir), dataset=str(colour_dataset), resolution=32, batch_size=2, max_steps=2,
                    learning_rate=1e-2, seed=3, rank=2, alpha=2.0, conv_rank=None, conv_alpha=None,
                    train_text_encoder=True, network="lora", lycoris_preset="full", dora_wd=True)
    first = train_sd_lora(SDLoraTrainingConfig(**settings, output=str(tmp_path / "a.safetensors")))
    metadata = read_safetensors_metadata(first.output)
    assert metadata["ss_network_module"] == "lycoris.kohya"
    assert json.loads(metadata["ss_network_args"]) == {"algo": "lora", "preset": "full", "conv_dim": "2",
                                                       "conv_alpha": "2.0", "dora_wd": "True"}
    assert "lora_unet_conv_in.dora_scale" in load_file_keys(first.output)
    again = SDLoraTrainingConfig(**{**settings, "max_steps": 1, "output": str(tmp_path / "b.safetensors"),
                                    "network_weights": str(first.output)})
    assert train_sd_lora(again).steps == 1
    # the file's metadata is the same config again
    back = SDLoraTrainingConfig(**BASE, **with_kohya_defaults(
        kohya_network_options(metadata), translate_kohya_options(kohya_network_options(metadata)), set()))
    assert (back.network, back.lycoris_preset, back.conv_layers(), back.dora_wd, back.rank, back.alpha) == \
        ("lora", "full", (2, 2.0), True, 2, 2.0)


def load_file_keys(path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(path), "pt") as handle:
        return set(handle.keys())
