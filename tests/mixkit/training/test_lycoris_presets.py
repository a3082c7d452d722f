"""LyCORIS configs (network_module "lycoris.kohya"): every accepted algo / preset / conv_dim combination builds exactly
the modules LyCORIS 4.1.3's own `kohya.create_network` builds (the oracle), with LyCORIS's conv_dim / conv_alpha
defaults, on the tiny SD 1.x UNet and CLIP text encoder and on the tiny SDXL UNet with its two text encoders;
refusals name the arg and what is accepted.

LyCORIS runs under kohya on kohya's own UNets, which the oracle runs on diffusers' as two documented differences:
- LyCORIS 4.1.3 added Anima's "TimestepEmbedding" class to its full, full-lin, attn-mlp, unet-transformer-only and
  unet-only lists. kohya's SD 1.x/2.x UNet (library/original_unet.py) has that class at `time_embedding`, as diffusers'
  has, so under 4.1.3 full, full-lin and unet-only stop with "duplicated lora name" (the class and the
  `time_embedding.linear_*` names reach the same two layers) and attn-mlp / unet-transformer-only adapt the time
  embedding too. mixkit builds the presets as they were before (`lycoris_presets`): the oracle drops the class, which
  leaves full's layers as they are (the names still reach them) and attn-mlp's the transformer blocks alone.
- kohya's SDXL UNet (library/sdxl_original_unet.py) uses SGM names (`input_blocks.0.0`, `time_embed.0`,
  `label_emb.0.0`, `out.2`) and plain Sequentials for the embeddings, so no preset's names (`conv_in`, `conv_out`,
  `time_embedding.linear_*`) nor the TimestepEmbedding class reach a layer there; on the diffusers SDXL UNet the oracle
  drops them (`test_sdxl_preset_names_reach_no_layer_of_kohyas_sdxl_unet` checks the SGM names against them).
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from mixkit.lora.network_options import kohya_network_options
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.config_file import translate_kohya_options, with_kohya_defaults
from mixkit.training.lora_network import CROSS_ATTENTION_KV, LoraNetwork
from mixkit.training.kohya_export import training_metadata
from mixkit.training.lycoris_presets import LYCORIS_PRESETS
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from tests.mixkit.training.lycoris_oracle import lycoris_created_modules

BASE = dict(model="m", dataset="d", output="o.safetensors")


@pytest.fixture(scope="module")
def sd1(tiny_sd1_dir):
    return load_diffusion_model(tiny_sd1_dir)


@pytest.fixture(scope="module")
def sdxl(tiny_sdxl_dir):
    return load_diffusion_model(tiny_sdxl_dir)


@pytest.fixture(params=["sd1", "sdxl"])
def model(request):
    """Each tiny model shape in turn (one load per module and shape)."""
    return request.getfixturevalue(request.param)


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
    """(rank, alpha) of each adapter, built as the trainer builds them (`sd_lora_trainer`)."""
    conv_rank, conv_alpha = config.conv_layers()
    network = LoraNetwork(model.unet, model.text_encoders, rank=config.rank, alpha=config.alpha, conv_rank=conv_rank,
                          conv_alpha=conv_alpha, train_text_encoder=config.train_text_encoder,
                          preset=LYCORIS_PRESETS.get(config.lycoris_preset) if config.lycoris_preset else None,
                          unet_layers=CROSS_ATTENTION_KV if config.network == "cross-kv" else None,
                          dora=config.dora_wd, top_level_paths=model.family.value != "sdxl")
    return {name: (adapter.rank, float(adapter.alpha)) for name, adapter in network.adapters.items()}


def _lycoris_modules(model, network_args, monkeypatch) -> dict[str, tuple[int, float]]:
    """LyCORIS's own network for the same args, on kohya's UNet as the module docstring describes; text-encoder names
    get the `text_model_` level that transformers 5 dropped from CLIPTextModel and shared files keep (as mixkit's)."""
    import lycoris.kohya

    kohya_sdxl = model.family.value == "sdxl"
    presets = copy.deepcopy(lycoris.kohya.PRESET)
    for preset in presets.values():
        modules = preset.get("unet_target_module", [])
        preset["unet_target_module"] = [m for m in modules if m != "TimestepEmbedding"]
        # kohya's UNet calls its attention class CrossAttention, diffusers' Attention (attn-only's UNet layers)
        if "CrossAttention" in modules:
            preset["unet_target_module"].append("Attention")
        if kohya_sdxl:
            preset["unet_target_name"] = []
    monkeypatch.setattr(lycoris.kohya, "PRESET", presets)
    return lycoris_created_modules(model, 4, 2.0, dict(entry.split("=", 1) for entry in network_args))


def _assert_same_modules(mine: dict, lycoris: dict) -> None:
    assert (sorted(set(mine) - set(lycoris)), sorted(set(lycoris) - set(mine))) == ([], [])
    assert mine == lycoris  # every module's rank and alpha too
    assert len(mine) > 0


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
    ["algo=locon", "conv_dim=0"],  # LyCORIS reads the text "0": no 3x3 conv, so no conv_in / conv_out either
    ["algo=locon", "conv_dim=2", "conv_alpha=0"],  # LoConModule: alpha 0 is alpha = rank, as mixkit's 0
]


@pytest.mark.parametrize("network_args", COMBINATIONS, ids=lambda args: " ".join(args) or "defaults")
def test_each_accepted_combination_builds_lycoris_module_set(model, network_args, monkeypatch):
    _assert_same_modules(_mixkit_modules(model, _config(network_args)),
                         _lycoris_modules(model, network_args, monkeypatch))


# Every preset mixkit builds (from the registry, so a new one is compared by construction) x both algos x LyCORIS's
# conv settings: conv_dim / conv_alpha left to their defaults, set, and conv_dim=0 (no 3x3 convolution).
CONV_SETTINGS = {"conv-default": [], "conv-2-1": ["conv_dim=2", "conv_alpha=1"], "conv-0": ["conv_dim=0"]}
GRID = [[f"algo={algo}", f"preset={preset}", *conv] for preset in LYCORIS_PRESETS.names() for algo in ("lora", "locon")
        for conv in CONV_SETTINGS.values()]


@pytest.mark.parametrize("network_args", GRID, ids=" ".join)
def test_every_preset_algo_and_conv_setting_builds_lycoris_module_set(model, network_args, monkeypatch):
    _assert_same_modules(_mixkit_modules(model, _config(network_args)),
                         _lycoris_modules(model, network_args, monkeypatch))


def _recorded_network_args(model, config) -> list[str]:
    """The `ss_network_args` entries mixkit writes for a run of `config` on `model`, as kohya --network_args."""
    conv_rank, conv_alpha = config.conv_layers()
    metadata = training_metadata(network=config.network, rank=config.rank, alpha=config.alpha, conv_rank=conv_rank,
                                 conv_alpha=conv_alpha, family=model.family.value,
                                 train_text_encoder=config.train_text_encoder, tag_frequency={}, dataset_dirs={},
                                 num_images=0, settings={}, started_at=0.0, base_model_name="m",
                                 dora_wd=config.dora_wd, lycoris_preset=config.lycoris_preset)
    assert metadata["ss_network_module"] == "lycoris.kohya"
    return [f"{key}={value}" for key, value in json.loads(metadata["ss_network_args"]).items()]


@pytest.mark.parametrize("network_args", COMBINATIONS + GRID, ids=lambda args: " ".join(args) or "defaults")
def test_the_recorded_network_args_build_the_files_modules_in_lycoris(model, network_args, monkeypatch):
    """A file says how it was trained: its ss_network_args, given back to LyCORIS, build the run's modules (a run with
    conv_dim=0 must say so, or LyCORIS's default conv_dim = network_dim would add every 3x3 convolution)."""
    config = _config(network_args)
    _assert_same_modules(_mixkit_modules(model, config),
                         _lycoris_modules(model, _recorded_network_args(model, config), monkeypatch))


@pytest.mark.parametrize("network, args", [
    ("lora", ["algo=lora", "preset=attn-mlp", "dora_wd=True"]),
    ("locon", ["algo=locon", "preset=mixkit_locon.toml", "conv_dim=2", "conv_alpha=1.0", "dora_wd=True"]),
    ("cross-kv", ["algo=lora", "preset=mixkit_cross_kv.toml", "dora_wd=True"]),
])
def test_a_dora_run_on_mixkits_own_layers_records_a_preset_that_builds_them(model, network, args, monkeypatch):
    config = SDLoraTrainingConfig(**BASE, network=network, rank=4, alpha=2.0, conv_rank=2, conv_alpha=1.0,
                                  train_text_encoder=True, dora_wd=True)
    assert _recorded_network_args(model, config) == args
    _assert_same_modules(_mixkit_modules(model, config), _lycoris_modules(model, args, monkeypatch))
    assert _config(args).network == network  # and the entries read back as that network


def test_sdxl_preset_names_reach_no_layer_of_kohyas_sdxl_unet(sdxl):
    """What the SDXL oracle drops: under kohya, LyCORIS matches its target names (regular expressions from the start
    of the path) against kohya's SDXL UNet, whose paths are the SGM ones mixkit writes SDXL files with; none matches,
    and the layers diffusers names so are top-level SGM layers (input_blocks.0.0, time_embed.*, label_emb.*, out.2)."""
    import lycoris.kohya

    from mixkit.lora.model_index import ldm_block_prefixes, ldm_name

    prefixes = ldm_block_prefixes(sdxl.unet)
    sgm_paths = {path: ldm_name(path, prefixes) for path, _ in sdxl.unet.named_modules() if path}
    names = {name for preset in lycoris.kohya.PRESET.values() for name in preset.get("unet_target_name", [])}
    assert {"conv_in", "conv_out", "time_embedding.linear_1"} <= names
    assert [(name, sgm) for name in names for sgm in sgm_paths.values() if sgm and re.match(name, sgm)] == []
    assert {path: sgm_paths[path] for path in ("conv_in", "conv_out", "time_embedding.linear_1",
                                               "add_embedding.linear_2")} == {
        "conv_in": "input_blocks.0.0", "conv_out": "out.2", "time_embedding.linear_1": "time_embed.0",
        "add_embedding.linear_2": "label_emb.0.2"}


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


def test_sdxl_leaves_out_the_sd1_paths(sdxl):
    network = LoraNetwork(sdxl.unet, sdxl.text_encoders, rank=2, alpha=1.0, conv_rank=2,
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


def test_a_shipped_preset_file_reads_by_its_name_from_any_folder():
    """kohya records the preset as given on its command line, a path on its author's disk."""
    assert _config(["preset=/home/me/presets/mixkit_cross_kv.toml"]).network == "cross-kv"
    locon = _config(["algo=locon", r"preset=C:\presets\mixkit_locon.toml", "conv_dim=2"])
    assert (locon.network, locon.lycoris_preset, locon.conv_layers()) == ("locon", None, (2, 2.0))
    with pytest.raises(ValueError, match=r"its own preset files \['mixkit_cross_kv.toml', 'mixkit_locon.toml'\]"):
        _config(["preset=mixkit_loha.toml"])
