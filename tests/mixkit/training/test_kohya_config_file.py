"""kohya configs (hunt finding 8): a --config_file TOML with kohya's option names runs as the same mixkit config;
kohya's separate --dataset_config TOML is refused with what to write instead.

kohya's `read_config_from_file` (library/train_util.py) flattens the file's sections into the flat option list;
the option names are those of train_network.py / train_util.add_*_arguments.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mixkit.training.config_file import read_config_file, translate_kohya_options
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from webui.cli.train import resolve_config

KOHYA_CONFIG = """
[model_arguments]
pretrained_model_name_or_path = "/models/sd15"

[additional_network_arguments]
network_module = "networks.lora"
network_dim = 16
network_alpha = 8
network_args = ["conv_dim=4", "conv_alpha=2", "rank_dropout=0.1"]
network_train_unet_only = true
unet_lr = 5e-5
text_encoder_lr = 1e-5

[optimizer_arguments]
optimizer_type = "AdamW8bit"
learning_rate = 1e-4
lr_scheduler = "cosine_with_restarts"
lr_scheduler_num_cycles = 3
lr_warmup_steps = 10

[dataset_arguments]
train_data_dir = "/data/img"
reg_data_dir = "/data/reg"
resolution = "512,512"
enable_bucket = true
bucket_reso_steps = 32
train_batch_size = 2
caption_extension = ".caption"
shuffle_caption = true
keep_tokens = 1

[training_arguments]
output_dir = "/out"
output_name = "my_lora"
save_model_as = "safetensors"
max_train_steps = 1600
sample_every_n_steps = 200
sample_sampler = "ddim"
"""


def test_a_kohya_config_file_becomes_the_same_mixkit_run(tmp_path):
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG, encoding="utf-8")
    config = resolve_config(SDLoraTrainingConfig, path, [])
    expected = SDLoraTrainingConfig(
        model="/models/sd15", dataset="/data/img", class_dataset="/data/reg", output=str(Path("/out/my_lora.safetensors")),
        output_name="my_lora", rank=16, alpha=8, network="locon", conv_rank=4, conv_alpha=2, rank_dropout=0.1,
        train_text_encoder=False, learning_rate=5e-5, text_encoder_learning_rate=1e-5, optimizer="adamw8bit",
        lr_schedule="cosine_with_restarts", lr_schedule_num_cycles=3, warmup_steps=10, resolution=512, bucketing=True,
        bucket_step=32, batch_size=2, caption_extension=".caption", shuffle_caption=True, keep_tokens=1, max_steps=1600,
        validation_every=200)
    assert config == expected
    assert SDLoraTrainingConfig.from_json_file(path) == expected  # the Python API reads the same file the same way


def test_kohyas_learning_rate_under_unet_lr_is_the_text_encoders():
    # kohya: --unet_lr sets the UNet's rate; --learning_rate is then what the text encoder gets.
    assert translate_kohya_options({"learning_rate": 1e-4, "unet_lr": 5e-5}) == {
        "learning_rate": 5e-5, "text_encoder_learning_rate": 1e-4}


def test_set_overrides_use_kohya_names_too_and_win_over_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\nnetwork_dim = 8\n', encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, path, []).rank == 8
    assert resolve_config(SDLoraTrainingConfig, path, ["rank=4"]).rank == 4
    assert resolve_config(SDLoraTrainingConfig, path, ["network_alpha=2"]).alpha == 2


@pytest.mark.parametrize("text, message", [
    ('rank = 4\nnetwork_dim = 8\n', "kohya's network_dim=8 sets rank=8, but rank=4 is also given; keep one"),
    ('resolution = "512,768"\n', "square resolution"),
    ('network_args = ["algo=lokr"]\n', r"network_args entry 'algo=lokr': mixkit knows"),
    ('network_module = "lycoris.kohya"\n', "networks.lora only"),
    ('optimizer_type = "DAdaptation"\n', "no mixkit equivalent"),
    ('sample_sampler = "euler_a"\n', "DDIM only"),
    ('[a]\nrank = 4\n[b]\nrank = 8\n', "'rank' is given twice"),
    ('rank = \n', "is not valid TOML"),
])
def test_what_does_not_translate_is_refused(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        resolve_config(SDLoraTrainingConfig, path, ["model=m", "dataset=d", "output=o.safetensors"])


def test_a_kohya_dataset_config_says_what_to_write_instead(tmp_path):
    path = tmp_path / "ds.toml"
    path.write_text("[general]\nshuffle_caption = true\n\n[[datasets]]\nresolution = 64\n\n  [[datasets.subsets]]\n"
                    "  image_dir = 'ds/10_sks dog'\n  num_repeats = 10\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"kohya --dataset_config file.*<dataset>/<num_repeats>_<class_tokens>/"):
        read_config_file(path)
    with pytest.raises(ValueError, match="dataset config files are not read"):
        resolve_config(SDLoraTrainingConfig, None, [f"dataset_config={path}"])


def test_json_configs_read_as_before(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"model": "m", "dataset": "d", "output": "o.safetensors", "rank": 2}', encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, path, []).rank == 2
    path.write_text("[general]\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"is not valid JSON .*TOML when its name ends in .toml"):
        resolve_config(SDLoraTrainingConfig, path, [])


KOHYA_GUI_SWITCHES = """
v2 = false
xformers = true
sdpa = false
max_data_loader_n_workers = 0
persistent_data_loader_workers = false
lowram = false
no_half_vae = true
save_state = false
save_last_n_epochs = 3
random_crop = false
color_aug = false
full_fp16 = false
optimizer_args = []
lr_scheduler_args = []
sample_every_n_epochs = 0
huggingface_repo_id = ""
"""


def test_kohya_gui_speed_and_logistics_switches_are_accepted(tmp_path):
    # kohya_ss GUI configs carry these (train_util.add_training_arguments / add_sd_models_arguments); none changes
    # what is trained at these values, so the run is the same as without them.
    plain, switched = tmp_path / "plain.toml", tmp_path / "switched.toml"
    plain.write_text(KOHYA_CONFIG)
    switched.write_text(KOHYA_CONFIG + "\n[extra]\n" + KOHYA_GUI_SWITCHES)
    assert resolve_config(SDLoraTrainingConfig, switched, []) == resolve_config(SDLoraTrainingConfig, plain, [])


@pytest.mark.parametrize("line, message", [
    ("random_crop = true", "random_crop=True: mixkit crops images at the centre"),
    ("color_aug = true", "color_aug=True: mixkit has no colour augmentation"),
    ("optimizer_args = [\"weight_decay=0.1\"]", "optimizer_args=.*take no extra arguments"),
])
def test_kohya_switches_that_would_change_the_run_are_refused_naming_them(tmp_path, line, message):
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG + "\n[extra]\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        resolve_config(SDLoraTrainingConfig, path, [])


def test_an_unknown_key_names_the_file_it_came_from(tmp_path):
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG + "\n[extra]\nmystery_option = 1\n")
    with pytest.raises(ValueError, match=r"unknown setting\(s\) mystery_option \(from .*kohya.toml\)"):
        resolve_config(SDLoraTrainingConfig, path, [])


def test_a_trainers_own_setting_is_never_taken_for_a_kohya_option():
    # tiny-sd's `vae` is its VAE folder; kohya's --vae (accepted only empty) must not shadow it.
    assert translate_kohya_options({"vae": "my-tiny-vae"}, {"vae"}) == {"vae": "my-tiny-vae"}
    with pytest.raises(ValueError, match="vae='my-tiny-vae': the model's own VAE is used in training"):
        translate_kohya_options({"vae": "my-tiny-vae"})
