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
        train_text_encoder=False, learning_rate=1e-4, unet_learning_rate=5e-5, text_encoder_learning_rate=1e-5,
        optimizer="adamw8bit",
        lr_schedule="cosine_with_restarts", lr_schedule_num_cycles=3, warmup_steps=10, resolution=512, bucketing=True,
        bucket_step=32, batch_size=2, caption_extension=".caption", shuffle_caption=True, keep_tokens=1, max_steps=1600,
        validation_every=200)
    assert config == expected
    assert SDLoraTrainingConfig.from_json_file(path) == expected  # the Python API reads the same file the same way


def test_kohyas_unet_lr_is_the_unets_own_rate_beside_learning_rate():
    # kohya: --unet_lr sets the UNet's rate; --learning_rate stays the base (the text encoder's, without its own).
    assert translate_kohya_options({"learning_rate": 1e-4, "unet_lr": 5e-5}) == {
        "learning_rate": 1e-4, "unet_learning_rate": 5e-5}


def test_a_kohya_file_with_part_rates_but_no_learning_rate_gets_kohyas_default_base(tmp_path):
    """kohya's --learning_rate defaults to 2e-6: with unet_lr alone the text encoder trains (and ss_learning_rate
    reads) at that, not at mixkit's 1e-4."""
    path = tmp_path / "parts.toml"
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\nunet_lr = 5e-4\n', encoding="utf-8")
    config = resolve_config(SDLoraTrainingConfig, path, [])
    assert (config.learning_rate, config.unet_learning_rate, config.text_encoder_learning_rate) == (2e-6, 5e-4, None)
    assert config.part_learning_rates() == (5e-4, 2e-6)
    assert resolve_config(SDLoraTrainingConfig, path, ["learning_rate=1e-4"]).learning_rate == 1e-4
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\nnetwork_dim = 8\n', encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, path, []).learning_rate == 1e-4  # no part rates: mixkit's default


def test_set_overrides_use_kohya_names_too_and_win_over_the_file(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\nnetwork_dim = 8\n', encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, path, []).rank == 8
    assert resolve_config(SDLoraTrainingConfig, path, ["rank=4"]).rank == 4
    assert resolve_config(SDLoraTrainingConfig, path, ["network_alpha=2"]).alpha == 2


@pytest.mark.parametrize("text, message", [
    ('rank = 4\nnetwork_dim = 8\n', "kohya's network_dim=8 sets rank=8, but rank=4 is also given; keep one"),
    ('resolution = "512x768"\n', "kohya's form is \"<side>\" or \"<width>,<height>\""),
    ('network_args = ["algo=lokr"]\n', r"network_args entry 'algo=lokr' is LyCORIS's: set network_module"),
    ('network_args = ["foo=1"]\n', r"network_args entry 'foo=1': mixkit knows"),
    ('network_module = "networks.oft"\n', "mixkit trains kohya's networks.lora and LyCORIS's"),
    ('network_module = "lycoris.kohya"\nnetwork_args = ["algo=lokr"]\n', "algo lora and locon"),
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


def test_a_kohya_dataset_config_is_the_runs_dataset_not_its_config(tmp_path):
    path = tmp_path / "ds.toml"
    path.write_text("[general]\nshuffle_caption = true\n\n[[datasets]]\nresolution = 64\n\n  [[datasets.subsets]]\n"
                    "  image_dir = 'ds/10_sks dog'\n  num_repeats = 10\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"kohya --dataset_config file.*not a --config file.*dataset=<file.toml>"):
        read_config_file(path)
    config = resolve_config(SDLoraTrainingConfig, None, ["model=m", "output=o.safetensors", f"dataset_config={path}"])
    assert config.dataset == str(path)


def test_dataset_config_makes_kohya_ignore_train_data_dir_and_reg_data_dir(tmp_path, caplog):
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG + '\n[extra]\ndataset_config = "ds.toml"\n')  # it has train_ and reg_data_dir
    with caplog.at_level("WARNING"):
        config = resolve_config(SDLoraTrainingConfig, path, [])
    assert config.dataset == "ds.toml" and config.class_dataset is None
    assert "train_data_dir, reg_data_dir ignored" in caplog.text


def test_network_train_text_encoder_only_trains_the_text_encoder_alone(tmp_path):
    base = ["model=m", "dataset=d", "output=o.safetensors"]
    config = resolve_config(SDLoraTrainingConfig, None, base + ["network_train_text_encoder_only=true"])
    assert (config.train_unet, config.train_text_encoder) == (False, True)
    config = resolve_config(SDLoraTrainingConfig, None, base + ["network_train_text_encoder_only=false"])
    assert (config.train_unet, config.train_text_encoder) == (True, False)
    # with network_train_unet_only too, kohya would train nothing: refused, naming the clash
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG + "\n[extra]\nnetwork_train_text_encoder_only = true\n")
    with pytest.raises(ValueError, match="network_train_.*train_text_encoder"):
        resolve_config(SDLoraTrainingConfig, path, [])


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
    ("optimizer_args = [\"weight_decay\"]", "optimizer_args entry 'weight_decay': kohya's form is key=value"),
    ("optimizer_args = [\"betas=fast\"]", "optimizer_args entry 'betas=fast': .*Python literal"),
    # kohya_ss GUI keys at values that would change the run: refused naming what kohya does
    ("weighted_captions = true", r"weighted_captions=True: kohya's weighted_captions reads .*\(word:1.2\)"),
    ("caption_dropout_every_n_epochs = 3", "caption_dropout_every_n_epochs=3: .*N-th epoch.*caption_dropout_rate"),
    ('face_crop_aug_range = "2.0,4.0"', "face_crop_aug_range='2.0,4.0': kohya's face-centred crop augmentation"),
    ("token_warmup_step = 100", "token_warmup_step=100: kohya's token warm-up .* not implemented"),
    ("stop_text_encoder_training = 500", "stop_text_encoder_training=500: kohya's train_db.py .*train_text_encoder"),
    ("output_config = true", "output_config=True: .*exits without training.*--print-config"),
    ('lr_scheduler_type = "torch.optim.lr_scheduler.StepLR"', "lr_scheduler_type=.*custom scheduler class"),
    ("dataset_repeats = 5", "dataset_repeats=5: kohya repeats only an --in_json .*<repeats>_<concept>"),
    ("save_state_on_train_end = true", "save_state_on_train_end=True: .*checkpoint_dir"),
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


# Keys that real kohya_ss GUI / --output_config TOMLs carry (training hunt, finding 3). At these values none changes
# what kohya's train_network.py trains: vae_batch_size only batches latent caching, the tracker names only label logs,
# dataset_repeats acts on --in_json datasets only, token_warmup_min only with token_warmup_step > 0, and
# stop_text_encoder_training is train_db.py's option (train_network.py does not define it).
KOHYA_GUI_EXTRAS = """
vae_batch_size = 4
log_tracker_name = "my-project"
wandb_run_name = "run-1"
output_config = false
save_state_on_train_end = false
lr_scheduler_type = ""
dataset_repeats = 1
weighted_captions = false
caption_dropout_every_n_epochs = 0
face_crop_aug_range = ""
token_warmup_min = 1
token_warmup_step = 0
network_train_text_encoder_only = false
save_n_epoch_ratio = 0
stop_text_encoder_training = 0
"""


def test_more_kohya_gui_keys_are_accepted_at_values_that_change_nothing(tmp_path):
    plain, extras = tmp_path / "plain.toml", tmp_path / "extras.toml"
    plain.write_text(KOHYA_CONFIG)
    extras.write_text(KOHYA_CONFIG + "\n[extra]\n" + KOHYA_GUI_EXTRAS)
    assert resolve_config(SDLoraTrainingConfig, extras, []) == resolve_config(SDLoraTrainingConfig, plain, [])


def test_kohyas_fractional_lr_warmup_steps_stays_a_ratio_and_other_fractions_are_refused(tmp_path):
    # kohya's --lr_warmup_steps is int_or_float: a float below 1 is a ratio of the run's steps (get_scheduler_fix).
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG.replace("lr_warmup_steps = 10", "lr_warmup_steps = 0.1"))
    config = resolve_config(SDLoraTrainingConfig, path, ["validation_every=0"])  # (the file has no sample prompts)
    assert config.warmup_steps == 0.1
    config.check()
    base = dict(model="m", dataset="d", output=str(tmp_path / "o.safetensors"))
    for bad, message in ((2.5, r"got 2.5$"), (10.0, r"got 10.0 \(write 10 for 10 steps"), (1.0, "got 1.0"),
                         (-1, "got -1"), (True, "got True"), ("10%", "got '10%'"), (float("nan"), "got nan")):
        with pytest.raises(ValueError, match="warmup_steps must be a whole number of steps >= 0, or a ratio of "
                                             "the run's steps below 1 .*" + message):
            SDLoraTrainingConfig(**base, warmup_steps=bad).check()


def test_an_empty_sample_prompts_is_no_prompts_file_as_in_kohya(tmp_path):
    # kohya_ss GUI writes sample_prompts = "" for "no prompts"; it used to be read as the path ".".
    path = tmp_path / "kohya.toml"
    path.write_text(KOHYA_CONFIG.replace("sample_every_n_steps = 200", 'sample_prompts = ""'))
    config = resolve_config(SDLoraTrainingConfig, path, [])
    config.check()
    assert config.sample_prompt_list() == []
    with pytest.raises(ValueError, match="validation_every=200 needs at least one entry"):
        resolve_config(SDLoraTrainingConfig, path, ["validation_every=200"]).check()


def test_a_kohya_file_without_network_train_unet_only_trains_the_text_encoder_as_kohya_does(tmp_path):
    """kohya's train_network.py trains the text encoder's adapters unless network_train_unet_only is set; mixkit's
    own default is the UNet only, which a kohya file must not silently get."""
    kohya = tmp_path / "kohya.toml"
    kohya.write_text(KOHYA_CONFIG.replace("network_train_unet_only = true\n", ""), encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, kohya, []).train_text_encoder is True
    assert SDLoraTrainingConfig.from_json_file(kohya).train_text_encoder is True
    assert resolve_config(SDLoraTrainingConfig, kohya, ["train_text_encoder=false"]).train_text_encoder is False
    own = tmp_path / "own.toml"  # mixkit's own names only: mixkit's default
    own.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\nrank = 8\n', encoding="utf-8")
    assert resolve_config(SDLoraTrainingConfig, own, []).train_text_encoder is False
    assert resolve_config(SDLoraTrainingConfig, own, ["network_dim=8"]).train_text_encoder is False  # a flag, not a file



def test_loraplus_in_network_args_is_kohyas_loraplus_lr_ratio(tmp_path):
    """kohya's documented way to turn LoRA+ on is `--network_args "loraplus_lr_ratio=16"` (networks/lora.py)."""
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\n'
                    'network_args = ["loraplus_lr_ratio=16", "rank_dropout=0.1"]\n', encoding="utf-8")
    config = resolve_config(SDLoraTrainingConfig, path, [])
    assert (config.loraplus_lr_ratio, config.rank_dropout) == (16, 0.1)
    with pytest.raises(ValueError, match="loraplus_lr_ratio=8 is also given; keep one"):
        translate_kohya_options({"loraplus_lr_ratio": 8, "network_args": ["loraplus_lr_ratio=16"]})


def test_kohyas_optimizer_args_become_the_optimizers_settings(tmp_path):
    """kohya's get_optimizer reads each value as a Python literal: "0.9,0.99" is a tuple, "True" a bool."""
    path = tmp_path / "run.toml"
    path.write_text('model = "m"\ndataset = "d"\noutput = "o.safetensors"\noptimizer_type = "Lion"\n'
                    'optimizer_args = ["weight_decay=0.2", "betas=0.95,0.98", "use_triton=False"]\n', encoding="utf-8")
    config = resolve_config(SDLoraTrainingConfig, path, [])
    assert config.optimizer_args == {"weight_decay": 0.2, "betas": (0.95, 0.98), "use_triton": False}
    # mixkit's own mapping form, and kohya's empty list (no setting: trainers without optimizer_args accept it)
    assert translate_kohya_options({"optimizer_args": {"eps": 1e-6}}) == {"optimizer_args": {"eps": 1e-6}}
    assert translate_kohya_options({"optimizer_args": []}) == {}


def test_config_files_saved_with_a_byte_order_mark_read_as_without(tmp_path):
    """Windows PowerShell 5's `Out-File -Encoding utf8` and older Notepad write a UTF-8 byte-order mark, which
    tomllib and json refuse at line 1 column 1."""
    for name, text in [("run.toml", "network_dim = 8\n"), ("run.json", '{"network_dim": 8}')]:
        path = tmp_path / name
        path.write_bytes(b"\xef\xbb\xbf" + text.encode())
        assert read_config_file(path) == {"network_dim": 8}


@pytest.mark.parametrize("option", ["optimizer_args", "lr_scheduler_args"])
@pytest.mark.parametrize("value, words", [
    (["num_cycles={[1]: 2}"], "the value is not a number, True/False or a tuple"),  # literal_eval's TypeError
    (5, "kohya's form is a list of key=value strings"),  # `list(5)`'s TypeError
])
def test_key_value_options_that_do_not_read_are_refused_naming_the_option(option, value, words):
    with pytest.raises(ValueError, match=words) as refused:
        translate_kohya_options({option: value})
    assert option in str(refused.value)
