"""What `mixkit.lora.network_options` reads from a file's kohya metadata: the training network (module, LyCORIS algo
and preset with LyCORIS's defaults, dims, DoRA), exactly as `mixkit lora inspect` prints it, for hand-written
metadata and for files written by lycoris-lora's own kohya network."""

from __future__ import annotations

import pytest

from mixkit.lora.network_options import kohya_network_options, trained_network
from mixkit.lora.report import inspect_lora
from tests.mixkit.lora.conftest import make_kohya_lycoris_file


@pytest.mark.parametrize("metadata, summary", [
    # LyCORIS's defaults fill what the args leave out, and say so
    ({"ss_network_module": "lycoris.kohya", "ss_network_dim": "8", "ss_network_alpha": "4.0",
      "ss_network_args": '{"dora_wd": "True"}'},
     "lycoris.kohya, algo lora (LyCORIS's default), preset full (LyCORIS's default), dim 8, alpha 4, DoRA (dora_wd)"),
    ({"ss_network_module": "lycoris.kohya", "ss_network_dim": "4", "ss_network_alpha": "1.5",
      "ss_network_args": '{"algo": "locon", "preset": "mixkit_locon.toml", "conv_dim": "2", "conv_alpha": "1.0", '
                         '"dora_wd": "True", "module_dropout": "0.1"}'},
     "lycoris.kohya, algo locon, preset mixkit_locon.toml, dim 4, alpha 1.5, conv dim 2, conv alpha 1, DoRA (dora_wd), "
     "module_dropout=0.1"),
    # kohya's networks.lora: LoCon when conv_dim is recorded, no preset, no DoRA
    ({"ss_network_module": "networks.lora", "ss_network_dim": "16", "ss_network_alpha": "8.0",
      "ss_network_args": '{"conv_dim": "4", "conv_alpha": "2", "rank_dropout": "0.1"}'},
     "networks.lora, algo locon, dim 16, alpha 8, conv dim 4, conv alpha 2, rank_dropout=0.1"),
    ({"ss_network_module": "networks.lora", "ss_network_dim": "32", "ss_network_alpha": "16.0",
      "ss_network_args": "{}"},
     "networks.lora, algo lora, dim 32, alpha 16"),
    ({"ss_network_dim": "4", "ss_network_args": "None"}, "network module not recorded, dim 4"),
])
def test_the_recorded_network_reads_as_its_summary(metadata, summary):
    assert trained_network(metadata).summary() == summary


def test_a_file_without_kohya_keys_records_no_network():
    assert trained_network({"modelspec.title": "x", "ss_network_args": "None"}) is None
    assert kohya_network_options({}) == {}


@pytest.mark.parametrize("metadata, message", [
    ({"ss_network_dim": "four"}, "metadata ss_network_dim='four' is not a number"),
    ({"ss_network_args": "[1]"}, r"ss_network_args='\[1\]' is not a JSON object"),
    ({"ss_network_args": '{"conv_dim": "x"}'}, "metadata ss_network_args conv_dim='x' is not a number"),
])
def test_an_undecodable_record_is_refused_naming_the_key(metadata, message):
    with pytest.raises(ValueError, match=message):
        trained_network(metadata)


def test_inspect_keeps_going_past_an_undecodable_record(tmp_path):
    import torch
    from safetensors.torch import save_file

    path = tmp_path / "bad.safetensors"
    save_file({"lora_unet_x.lora_down.weight": torch.zeros(2, 4), "lora_unet_x.lora_up.weight": torch.zeros(4, 2)},
              str(path), {"ss_network_module": "networks.lora", "ss_network_args": "{oops"})
    lines = inspect_lora(path).lines()
    assert "trained as:  not recorded in the metadata" in lines
    assert "warning:     metadata ss_network_args='{oops' is not a JSON object of network_args; training network " \
           "not shown" in lines


def test_a_file_written_by_lycoris_through_kohya(tmp_path, sd1):
    path = make_kohya_lycoris_file(tmp_path / "lyco.safetensors", sd1,
                                   {"algo": "locon", "preset": "attn-mlp", "conv_dim": "2", "dora_wd": "True"})
    report = inspect_lora(path)
    assert "trained as:  lycoris.kohya, algo locon, preset attn-mlp, dim 4, alpha 2, conv dim 2, DoRA (dora_wd)" \
        in report.lines()
    assert report.families == {"LoRA/LoCon + DoRA": report.module_count}  # the file is what the line says
    bare = make_kohya_lycoris_file(tmp_path / "bare.safetensors", sd1, {"preset": "attn-mlp"}, record=False)
    assert "trained as:  not recorded in the metadata" in inspect_lora(bare).lines()
