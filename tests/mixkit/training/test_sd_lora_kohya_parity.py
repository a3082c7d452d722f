"""The LoRA trainer where kohya's sd-scripts defines the behaviour: caption files, alpha 0, class-image balance,
the `ss_*` metadata, bucket_no_upscale, and what a NaN loss tells the user. Tiny runs (1-3 steps, 32 px)."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from mixkit.io import read_safetensors_metadata
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=1, learning_rate=1e-2, rank=4, alpha=4.0, seed=3)
    return SDLoraTrainingConfig(**{**settings, **overrides})


def _caption_dataset(root):
    """Three 32-px squares captioned in kohya's default `.caption` files (tags in mixed case, one repeated)."""
    concept = root / "2_square"
    concept.mkdir(parents=True)
    for name, colour in [("red", (255, 0, 0)), ("blue", (0, 0, 255)), ("green", (0, 200, 0))]:
        Image.new("RGB", (32, 32), colour).save(concept / f"{name}.png")
        (concept / f"{name}.caption").write_text(f"A {name.title()} square, Flat, flat", encoding="utf-8")
    return root


def test_alpha_zero_is_alpha_rank_as_in_kohya(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.lora_network import LoraAdapter

    base = torch.nn.Linear(6, 5)
    adapter = LoraAdapter(base, rank=3, alpha=0)
    torch.nn.init.normal_(adapter.lora_up.weight)
    x = torch.randn(2, 6)
    assert adapter.alpha.item() == 3.0  # kohya's LoRAModule: alpha 0 -> lora_dim, stored as such
    assert torch.allclose(adapter(x), adapter.lora_up(adapter.lora_down(x)))  # scale 1, not 0
    # Through the trainer, LoCon included: the file stores the ranks (what A1111 reads as the scale), and training
    # moves the up weights (with alpha taken as 0 every gradient was zero and the file did nothing).
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "alpha0.safetensors", network="locon", alpha=0.0,
                     conv_rank=2, conv_alpha=0.0, max_steps=2)
    tensors = load_file(train_sd_lora(config).output)
    modules = {key.rsplit(".", 2)[0] for key in tensors if key.endswith("lora_up.weight")}
    ranks = {name: tensors[f"{name}.lora_down.weight"].shape[0] for name in modules}
    assert set(ranks.values()) == {4, 2}
    for name in modules:
        assert tensors[f"{name}.alpha"].item() == ranks[name]
    assert max(tensors[f"{name}.lora_up.weight"].abs().max().item() for name in modules) > 0
    metadata = read_safetensors_metadata(config.output)
    # kohya records the alpha as given (args.network_alpha), the file's `.alpha` as used.
    assert metadata["ss_network_alpha"] == "0.0"
    assert json.loads(metadata["ss_network_args"]) == {"conv_dim": "2", "conv_alpha": "0.0"}


def test_kohya_metadata_class_balance_and_caption_extension(tiny_sd1_dir, tmp_path):
    dataset = _caption_dataset(tmp_path / "data")
    class_dir = tmp_path / "class" / "1_square"
    class_dir.mkdir(parents=True)
    for name in ("grey", "white"):
        Image.new("RGB", (32, 32), (128, 128, 128) if name == "grey" else (255, 255, 255)).save(class_dir / f"{name}.png")
    config = _config(tiny_sd1_dir, dataset, tmp_path / "o" / "kohya.safetensors", caption_extension=".caption",
                     class_dataset=str(tmp_path / "class"), bucketing=True, min_bucket_reso=32, max_bucket_reso=64,
                     bucket_step=32, gradient_accumulation_steps=2, max_steps=3, text_encoder_learning_rate=5e-3)
    result = train_sd_lora(config)
    metadata = read_safetensors_metadata(result.output)
    # Captions come from the .caption files (the folder name was used before caption_extension existed), counted as
    # kohya counts tags: lower-cased, each occurrence; class images (no caption: their folder name) included.
    assert json.loads(metadata["ss_tag_frequency"]) == {
        "2_square": {"a red square": 1, "a blue square": 1, "a green square": 1, "flat": 6},
        "1_square": {"square": 2}}
    # 3 images x 2 repeats = 6 training samples; the 2 class images are repeated to 6 samples per epoch (kohya's
    # balance), while ss_num_reg_images keeps kohya's count before balancing.
    assert (metadata["ss_num_train_images"], metadata["ss_num_reg_images"]) == ("6", "2")
    bucket_info = json.loads(metadata["ss_bucket_info"])
    assert [b["count"] for b in bucket_info["buckets"].values()] == [12]  # 6 + 6, in one 32x32 bucket
    assert [b["resolution"] for b in bucket_info["buckets"].values()] == [[32, 32]]
    assert bucket_info["mean_img_ar_error"] == 0.0
    # 12 samples in batches of 3: 4 batches an epoch; 3 steps of 2 accumulated batches end in epoch 2.
    assert (metadata["ss_num_batches_per_epoch"], metadata["ss_num_epochs"], metadata["ss_epoch"]) == ("4", "2", "2")
    assert (metadata["ss_total_batch_size"], metadata["ss_batch_size_per_device"]) == ("6", "3")
    # kohya records the options as given: no unet_lr, so ss_unet_lr None (the UNet trains at learning_rate)
    assert (metadata["ss_learning_rate"], metadata["ss_unet_lr"], metadata["ss_text_encoder_lr"]) == \
        ("0.01", "None", "0.005")
    assert metadata["ss_optimizer"] == "torch.optim.adamw.AdamW"  # kohya's name; weight decay at AdamW's default
    assert (metadata["ss_color_aug"], metadata["ss_random_crop"], metadata["ss_debiased_estimation"]) == \
        ("False", "False", "False")
    assert 0 <= int(metadata["ss_session_id"]) <= 2**32
    # mixkit's old names for kohya's keys are gone, not written twice.
    assert not {"ss_text_encoder_learning_rate", "ss_debiased_estimation_loss"} & set(metadata)


def test_each_rate_is_recorded_as_given_and_the_unet_trains_at_its_own(tiny_sd1_dir, colour_dataset, tmp_path):
    """kohya's unet_lr beside learning_rate: the UNet's adapters train at it (0 here: they stay as initialised, up
    weights zero), the text encoder's at learning_rate, and ss_* keep the three options as given."""
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "parts.safetensors", unet_learning_rate=0.0,
                     train_text_encoder=True, max_steps=2)
    tensors = load_file(train_sd_lora(config).output)
    ups = {key: value for key, value in tensors.items() if key.endswith("lora_up.weight")}
    assert all(value.abs().max() == 0 for key, value in ups.items() if key.startswith("lora_unet_"))
    assert any(value.abs().max() > 0 for key, value in ups.items() if key.startswith("lora_te_"))
    metadata = read_safetensors_metadata(config.output)
    assert (metadata["ss_learning_rate"], metadata["ss_unet_lr"], metadata["ss_text_encoder_lr"]) == \
        ("0.01", "0.0", "None")


def test_adafactor_picking_its_own_step_is_recorded_as_kohya_records_it(tiny_sd1_dir, colour_dataset, tmp_path):
    """kohya's get_optimizer, Adafactor at its default relative_step: args.learning_rate and args.unet_lr become None,
    the scheduler "adafactor:<learning_rate>"; the text-encoder rate, read before, stays in the file."""
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "ada.safetensors", optimizer="adafactor",
                     unet_learning_rate=2e-3, text_encoder_learning_rate=5e-3, train_text_encoder=True)
    with pytest.warns(UserWarning, match="picks its own step size"):
        metadata = read_safetensors_metadata(train_sd_lora(config).output)
    assert (metadata["ss_learning_rate"], metadata["ss_unet_lr"], metadata["ss_text_encoder_lr"],
            metadata["ss_lr_scheduler"]) == ("None", "None", "0.005", "adafactor:0.01")


def test_kohya_metadata_without_bucketing_or_text_encoder_rate(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.optimizers import make_optimizer, optimizer_description

    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors"))
    metadata = read_safetensors_metadata(result.output)
    assert (metadata["ss_bucket_info"], metadata["ss_text_encoder_lr"]) == ("null", "None")  # json.dumps(None), as kohya
    assert metadata["ss_num_train_images"] == "6" and metadata["ss_num_reg_images"] == "0"
    # kohya writes --optimizer_args in brackets; mixkit's settings that differ from the class's defaults go there.
    weight = [torch.nn.Parameter(torch.zeros(2))]
    assert optimizer_description(make_optimizer("lion", [{"params": weight}], 1e-4)) == \
        "mixkit.training.lion.Lion(weight_decay=0.1)"
    assert optimizer_description(make_optimizer("adamw", [{"params": weight}], 1e-4)) == "torch.optim.adamw.AdamW"


def test_caption_extension_is_checked_before_anything_loads(tmp_path):
    for bad, message in ((".png", "is an image suffix"), ("caption", "starting with a dot")):
        with pytest.raises(ValueError, match=message):
            _config(tmp_path / "no-model", tmp_path, tmp_path / "o.safetensors", caption_extension=bad).check()
    # The missing-caption error names the extension in use.
    dataset = tmp_path / "d" / "1_x"
    dataset.mkdir(parents=True)
    Image.new("RGB", (32, 32)).save(dataset / "a.png")
    (dataset / "a.txt").write_text("a txt caption", encoding="utf-8")
    config = _config(tmp_path / "no-model", tmp_path / "d", tmp_path / "o.safetensors", caption_extension=".caption",
                     missing_captions="error")
    with pytest.raises(ValueError, match="no caption file 'a.caption' \\(caption_extension='.caption'\\)"):
        train_sd_lora(config)
    assert not (tmp_path / "o.safetensors").exists()


def test_bucket_no_upscale_refuses_images_below_the_step_before_loading(tmp_path):
    dataset = tmp_path / "d" / "1_x"
    dataset.mkdir(parents=True)
    Image.new("RGB", (32, 48)).save(dataset / "small.png")
    config = _config(tmp_path / "no-model", tmp_path / "d", tmp_path / "o" / "o.safetensors", bucketing=True,
                     bucket_no_upscale=True, min_bucket_reso=32, resolution=64)  # bucket_step: 64, the default
    with pytest.raises(ValueError, match="small.png \\(32x48 pixels has a side below the bucket step 64\\).*set "
                                         "bucket_step to 32 or less"):
        train_sd_lora(config)  # a model load would fail differently: the images are checked first
    assert not (tmp_path / "o").exists()


def test_a_nan_loss_names_a_real_checkpoint_or_how_to_have_one(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.training_state import check_finite_loss

    with pytest.raises(FloatingPointError, match="checkpoint_every is 0.*set checkpoint_every \\(like 100\\)"):
        check_finite_loss(float("nan"), 2)
    with pytest.raises(FloatingPointError, match="the first falls at step 5"):
        check_finite_loss(float("inf"), 2, checkpoint_every=5)
    with pytest.raises(FloatingPointError, match="resume with resume_from='ck/step-00000001.pt', the last checkpoint"):
        check_finite_loss(float("nan"), 2, last_checkpoint="ck/step-00000001.pt")
    check_finite_loss(1.5, 2)
    # Through the trainer (the hunter's repro: Lion at an absurd rate overflows in a step or two).
    output = tmp_path / "nan.safetensors"
    config = _config(tiny_sd1_dir, colour_dataset, output, learning_rate=1e12, optimizer="lion", max_steps=6,
                     checkpoint_every=1)
    with pytest.raises(FloatingPointError) as raised:
        train_sd_lora(config)
    message = str(raised.value)
    step = int(message.split(" at step ")[1].split(";")[0])
    assert step >= 2, message
    named = tmp_path / "nan-checkpoints" / f"step-{step - 1:08d}.pt"
    assert f"resume_from={str(named)!r}" in message and named.is_file()
    assert not output.exists()


def _portrait_and_landscape(root):
    concept = root / "1_shape"
    concept.mkdir(parents=True)
    for name, size in [("tall", (32, 64)), ("wide", (64, 32)), ("square", (48, 48))]:
        Image.new("RGB", size, (200, 50, 50)).save(concept / f"{name}.png")
        (concept / f"{name}.txt").write_text(f"a {name} shape", encoding="utf-8")
    return root


def test_a_width_height_resolution_trains_and_is_recorded_as_kohya_writes_it(tiny_sd1_dir, tmp_path):
    # kohya --resolution "32,48" --enable_bucket: buckets of 32 x 48 = 1536 pixels on a 16-pixel step
    config = _config(tiny_sd1_dir, _portrait_and_landscape(tmp_path / "data"), tmp_path / "wh.safetensors",
                     resolution=[32, 48], bucketing=True, bucket_step=16, min_bucket_reso=16, max_bucket_reso=64,
                     batch_size=1, max_steps=3, lr_schedule="cosine", lr_schedule_args={"num_cycles": 1.0},
                     warmup_steps=1, train_text_encoder=True, text_encoder_learning_rate=5e-3, loraplus_lr_ratio=16,
                     loraplus_text_encoder_lr_ratio=4, rank_dropout=0.1, validation_prompts=["a tall shape"],
                     validation_every=3, validation_steps=1)
    metadata = read_safetensors_metadata(train_sd_lora(config).output)
    # mixkit draws sample images at the run's width x height (kohya: 512x512 unless a prompt sets --w / --h)
    [sample] = (tmp_path / "sample").glob("*.png")
    assert Image.open(sample).size == (32, 48)
    # kohya's args.resolution is the (width, height) tuple its prepare_dataset_args makes; SAI's spec "WxH"
    assert (metadata["ss_resolution"], metadata["modelspec.resolution"]) == ("(32, 48)", "32x48")
    buckets = json.loads(metadata["ss_bucket_info"])["buckets"]
    # 1:2 and 2:1 are nearer 32x48's 0.67 and 48x32's 1.5 than 16x64's 0.25 and 64x16's 4 (kohya's select_bucket)
    assert sorted(tuple(b["resolution"]) for b in buckets.values()) == [(32, 32), (32, 48), (48, 32)]
    assert all(b["count"] == 1 for b in buckets.values())
    # kohya records the options as given: no unet_lr, so ss_unet_lr None (the UNet trains at learning_rate)
    assert (metadata["ss_learning_rate"], metadata["ss_unet_lr"], metadata["ss_text_encoder_lr"]) == \
        ("0.01", "None", "0.005")
    assert (metadata["ss_lr_scheduler"], metadata["ss_lr_warmup_steps"]) == ("cosine", "1")
    # kohya's ss_network_args: its --network_args entries as strings
    assert json.loads(metadata["ss_network_args"]) == {"rank_dropout": "0.1", "loraplus_lr_ratio": "16",
                                                       "loraplus_text_encoder_lr_ratio": "4"}
    assert (metadata["ss_loraplus_unet_lr_ratio"], metadata["ss_loraplus_text_encoder_lr_ratio"]) == ("None", "4")


def test_a_square_resolution_is_recorded_as_kohyas_pair(tiny_sd1_dir, colour_dataset, tmp_path):
    metadata = read_safetensors_metadata(train_sd_lora(_config(tiny_sd1_dir, colour_dataset,
                                                               tmp_path / "sq.safetensors")).output)
    assert (metadata["ss_resolution"], metadata["modelspec.resolution"]) == ("(32, 32)", "32x32")
