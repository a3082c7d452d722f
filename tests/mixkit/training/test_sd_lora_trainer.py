"""SD LoRA training end to end on tiny models: the loss falls, the file is kohya-shaped and loads in
mixkit and diffusers alike, resume is exact, and bad input fails early with a clear message."""

from __future__ import annotations

import json

import pytest
import torch

from mixkit.io import addnet_sha256_safetensors, read_safetensors_metadata
from mixkit.models.diffusion.loading import load_diffusion_model
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora
from mixkit.training.training_state import CheckpointMismatchError


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=6, learning_rate=1e-2, rank=4, alpha=4.0, seed=3)
    return SDLoraTrainingConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def trained_sd1(tiny_sd1_dir, colour_dataset, tmp_path_factory):
    output = tmp_path_factory.mktemp("sd1-lora") / "colours.safetensors"
    config = _config(tiny_sd1_dir, colour_dataset, output, train_text_encoder=True, min_snr_gamma=5.0, noise_offset=0.05,
                     max_steps=10, learning_rate=2e-2)
    return config, train_sd_lora(config)



def assert_trained_alike(a: dict, b: dict) -> None:
    """Two LoRA files from runs that differ only in float rounding: all but a few weights within 1e-4.

    Measured: every weight within 1e-5 on an AVX512-BF16 CPU; on an AVX-512 CPU without it, 8 of 21,552 off by up
    to 5e-3 (2 threads). The kernels' summation order changes with batch size and thread count, and Adam's
    normalisation turns rounding in a near-zero gradient into a full-size step. A real difference (other latents,
    another target) moves nearly every weight.
    """
    assert a.keys() == b.keys()
    off = sum(int((~torch.isclose(a[k], b[k], rtol=0, atol=1e-4)).sum()) for k in a)
    assert off <= 0.005 * sum(a[k].numel() for k in a), f"{off} weights differ by more than 1e-4"

def test_file_is_kohya_format_with_metadata_and_hashes(trained_sd1):
    config, result = trained_sd1
    from safetensors.torch import load_file

    tensors = load_file(result.output)
    names = {key.split(".")[0] for key in tensors}
    assert any(n.startswith("lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q") for n in names)
    assert any(n.startswith("lora_te_text_model_encoder_layers_0_self_attn_q_proj") for n in names)
    for name in names:
        assert tensors[f"{name}.alpha"].item() == 4.0
        assert tensors[f"{name}.lora_down.weight"].shape[0] == 4 == tensors[f"{name}.lora_up.weight"].shape[1]
    metadata = read_safetensors_metadata(result.output)
    assert metadata["ss_network_module"] == "networks.lora"
    assert (metadata["ss_network_dim"], metadata["ss_network_alpha"]) == ("4", "4.0")
    assert metadata["ss_base_model_version"] == "sd_v1"
    assert json.loads(metadata["ss_tag_frequency"]) == {"2_square": {"flat": 3, "a red square": 1, "a blue square": 1,
                                                                   "a green square": 1}}
    # kohya keys both by the image folder's name; class images go to ss_reg_dataset_dirs.
    assert json.loads(metadata["ss_dataset_dirs"]) == {"2_square": {"n_repeats": 2, "img_count": 3}}
    assert (metadata["ss_reg_dataset_dirs"], metadata["ss_num_reg_images"]) == ("{}", "0")
    assert metadata["ss_mixed_precision"] in ("no", "bf16", "fp16")  # what ran, never "auto"
    assert metadata["ss_min_snr_gamma"] == "5.0" and metadata["ss_max_train_steps"] == "10"
    assert (metadata["ss_lr_scheduler"], metadata["ss_lr_warmup_steps"]) == ("constant", "0")
    # kohya hashes the tensor bytes; A1111 recomputes the same value from the finished file.
    assert metadata["sshs_model_hash"] == addnet_sha256_safetensors(result.output, use_cache=False)
    assert len(metadata["sshs_legacy_hash"]) == 8


def test_loss_falls_on_a_fixed_evaluation_set(trained_sd1, tiny_sd1_dir, colour_dataset, fixed_denoising_loss):
    from mixkit.lora import LoraRequest, apply_loras

    _, result = trained_sd1
    model = load_diffusion_model(tiny_sd1_dir)
    before = fixed_denoising_loss(model, colour_dataset)
    apply_loras(model.unet, model.text_encoders, [LoraRequest(str(result.output))], mode="merge")
    after = fixed_denoising_loss(model, colour_dataset)
    assert after < 0.9 * before, (before, after)


def test_mixkit_and_diffusers_loaders_change_the_image_the_same_way(trained_sd1, tiny_sd1_dir):
    from diffusers import StableDiffusionPipeline

    from mixkit.lora import LoraRequest, apply_loras

    _, result = trained_sd1

    def generate(pipe):
        return pipe("a red square", num_inference_steps=2, height=32, width=32, output_type="np",
                    generator=torch.Generator().manual_seed(0)).images

    pipe = StableDiffusionPipeline.from_pretrained(tiny_sd1_dir, safety_checker=None, requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    base = generate(pipe)
    pipe.load_lora_weights(str(result.output))
    with_diffusers = generate(pipe)
    pipe.unload_lora_weights()
    torch.testing.assert_close(torch.from_numpy(generate(pipe)), torch.from_numpy(base))
    apply_loras(pipe.unet, [pipe.text_encoder], [LoraRequest(str(result.output))], mode="merge")
    with_mixkit = generate(pipe)
    change = abs(with_diffusers - base).max()
    assert change > 1e-2, "the trained LoRA should visibly change the image"
    assert abs(with_mixkit - with_diffusers).max() < 0.05 * change


def test_resume_reaches_the_same_weights_as_an_uninterrupted_run(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    # With a decaying rate, trained word vectors, caption augmentation, the pseudo-Huber loss and input perturbation:
    # the resumed run replays the schedule, restores the vectors and draws the same captions and noise. The warm-up,
    # kohya's ratio 0.75 of 4 steps = 3 steps, is still running when the run stops at step 2.
    settings = dict(max_steps=4, batch_size=2, gradient_accumulation_steps=2, min_snr_gamma=5.0, noise_offset=0.1,
                    warmup_steps=0.75, lr_schedule="cosine", train_word_vectors=["square"], shuffle_caption=True,
                    caption_tag_dropout_rate=0.3, caption_dropout_rate=0.2, loss_type="huber", ip_noise_gamma=0.1,
                    multires_noise_iterations=4, debiased_estimation_loss=True, network_dropout=0.1,
                    rank_dropout=0.2, module_dropout=0.1)
    model = load_diffusion_model(tiny_sd1_dir)
    straight = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "straight.safetensors", **settings), model=model)
    interrupted = _config(tiny_sd1_dir, colour_dataset, tmp_path / "resumed.safetensors",
                          checkpoint_dir=str(tmp_path / "ckpt"), **settings)
    first = train_sd_lora(interrupted, stop_at_step=2, model=model)
    assert first.output is None and first.last_checkpoint.name == "step-00000002.pt"
    interrupted.resume_from = str(tmp_path / "ckpt")
    resumed = train_sd_lora(interrupted, model=model)
    assert resumed.losses == straight.losses[2:]
    a, b = load_file(straight.output), load_file(resumed.output)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert any(v.abs().sum() > 0 for k, v in a.items() if "lora_up" in k)
    assert "bundle_emb.square.string_to_param.*" in a


def test_a_fractional_warm_up_trains_as_its_share_of_the_run(tiny_sd1_dir, colour_dataset, tmp_path):
    # kohya's lr_warmup_steps = 0.5 of a 3-step run is int(1.5) = 1 warm-up step; it used to multiply the first
    # step's rate by 1 / 0.5 instead. The file records the ratio as kohya's ss_lr_warmup_steps does.
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    ratio = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "ratio.safetensors", max_steps=3,
                                  warmup_steps=0.5, lr_schedule="cosine"), model=model)
    steps = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "steps.safetensors", max_steps=3,
                                  warmup_steps=1, lr_schedule="cosine"), model=model)
    a, b = load_file(ratio.output), load_file(steps.output)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_safetensors_metadata(ratio.output)["ss_lr_warmup_steps"] == "0.5"


def test_sdxl_trains_both_encoders_and_refuses_an_sd1_checkpoint(tiny_sdxl_dir, tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    sd1_run = _config(tiny_sd1_dir, colour_dataset, tmp_path / "sd1.safetensors", max_steps=2, batch_size=1,
                      checkpoint_dir=str(tmp_path / "sd1-ckpt"))
    train_sd_lora(sd1_run, stop_at_step=1)
    config = _config(tiny_sdxl_dir, colour_dataset, tmp_path / "xl.safetensors", max_steps=2, batch_size=2,
                     train_text_encoder=True)
    result = train_sd_lora(config)
    names = {key.split(".")[0] for key in load_file(result.output)}
    assert any(n.startswith("lora_te1_") for n in names) and any(n.startswith("lora_te2_") for n in names)
    assert read_safetensors_metadata(result.output)["ss_base_model_version"] == "sdxl_base_v1-0"
    config.resume_from = str(tmp_path / "sd1-ckpt")
    with pytest.raises(CheckpointMismatchError, match="different model"):
        train_sd_lora(config)


def test_locon_adapts_resnet_convs_and_loads_in_mixkit(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    from mixkit.lora import LoraRequest, apply_loras

    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "locon.safetensors", network="locon", conv_rank=2,
                     conv_alpha=1.0, max_steps=1, batch_size=1)
    result = train_sd_lora(config)
    tensors = load_file(result.output)
    assert tensors["lora_unet_down_blocks_0_resnets_0_conv1.lora_down.weight"].shape[:2] == (2, 32)
    assert tensors["lora_unet_down_blocks_0_resnets_0_conv1.alpha"].item() == 1.0
    assert json.loads(read_safetensors_metadata(result.output)["ss_network_args"]) == {"conv_dim": "2", "conv_alpha": "1.0"}
    model = load_diffusion_model(tiny_sd1_dir)
    applied = apply_loras(model.unet, model.text_encoders, [LoraRequest(str(result.output))], mode="merge")
    assert applied is not None


def test_cross_kv_adapts_and_merges_into_the_cross_attention_keys_and_values_only(tiny_sd1_dir, colour_dataset,
                                                                                    tmp_path):
    from safetensors.torch import load_file

    from mixkit.lora import LoraRequest, apply_loras

    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "kv.safetensors", network="cross-kv", max_steps=2,
                     batch_size=1, train_text_encoder=True)
    tensors = load_file(train_sd_lora(config).output)
    unet_layers = {k.split(".")[0] for k in tensors if k.startswith("lora_unet_")}
    assert unet_layers and all(k.endswith(("_attn2_to_k", "_attn2_to_v")) for k in unet_layers)
    model = load_diffusion_model(tiny_sd1_dir)
    kv_layers = sum(1 for name, _ in model.unet.named_modules() if name.endswith(("attn2.to_k", "attn2.to_v")))
    assert len(unet_layers) == kv_layers
    assert any(k.startswith("lora_te_") for k in tensors)  # the text encoder keeps its usual targets
    before = {k: v.clone() for k, v in model.unet.state_dict().items()}
    apply_loras(model.unet, model.text_encoders, [LoraRequest(str(tmp_path / "kv.safetensors"))], mode="merge")
    changed = {k for k, v in model.unet.state_dict().items() if not torch.equal(v, before[k])}
    assert changed and all(".attn2.to_k." in k or ".attn2.to_v." in k for k in changed)


@pytest.mark.parametrize("overrides, message", [
    ({"rank": 0}, "rank must be a positive integer"),
    ({"rank": -2}, "rank must be a positive integer"),
    ({"learning_rate": float("nan")}, "learning_rate must be a finite number"),
    ({"resolution": 500}, "divisible by 8"),
    ({"network": "loha"}, "Unknown network kind"),
    ({"mixed_precision": "fp8"}, "mixed_precision"),
])
def test_bad_settings_fail_before_loading_anything(overrides, message, tmp_path):
    config = _config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", **overrides)
    with pytest.raises(ValueError, match=message):
        train_sd_lora(config)


def test_empty_dataset_is_a_clear_error(tmp_path):
    from mixkit.data import EmptyDatasetError

    (tmp_path / "data" / "3_empty").mkdir(parents=True)
    with pytest.raises(EmptyDatasetError, match="no usable images"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path / "data", tmp_path / "out.safetensors"))
    assert not (tmp_path / "out.safetensors").exists()


def test_a_dataset_of_only_unreadable_images_names_them_and_their_decode_errors(tmp_path):
    # The per-file warnings go to the log, which an API caller (or logging.disable) never sees: the error says it.
    from PIL import Image

    from mixkit.data import EmptyDatasetError

    folder = tmp_path / "data" / "5_dog"
    folder.mkdir(parents=True)
    Image.new("RGB", (16, 16), "red").save(tmp_path / "whole.png")
    whole = (tmp_path / "whole.png").read_bytes()
    for name in ("a", "b"):
        (folder / f"{name}.png").write_bytes(whole[:12])  # cut inside the PNG header: PIL cannot identify it
        (folder / f"{name}.txt").write_text("dog")
    with pytest.raises(EmptyDatasetError, match=r"all 2 image\(s\) are unreadable: .*5_dog/a\.png \(.+\); "
                                                r".*5_dog/b\.png \(.+\)\. Replace"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path / "data", tmp_path / "out.safetensors"))


def test_bf16_and_gradient_checkpointing_run_and_leave_the_model_unchanged(tiny_sd1_dir, colour_dataset, tmp_path):
    model = load_diffusion_model(tiny_sd1_dir)
    before = {k: v.clone() for k, v in model.unet.state_dict().items()}
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "bf16.safetensors", max_steps=2, batch_size=1,
                                   mixed_precision="bf16", gradient_checkpointing=True), model=model)
    assert result.output.is_file() and all(torch.isfinite(torch.tensor(result.losses)))
    assert not model.unet.training and not model.unet.is_gradient_checkpointing
    after = model.unet.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    # A later full-precision run in the same process is not blocked by accelerate's global state.
    assert train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "fp32.safetensors", max_steps=1,
                                 batch_size=1), model=model).output.is_file()


def test_bf16_with_a_model_the_trainer_loads_itself_trains_what_fp32_trains(tiny_sd1_dir, colour_dataset, tmp_path):
    """bf16 stores the frozen UNet and text encoder in bf16 (channels-last on CPU), adapters in fp32; the
    adapters learn the same thing as in fp32, up to bf16 rounding, and validation images still render."""
    from safetensors.torch import load_file

    common = dict(max_steps=3, batch_size=2, validation_prompts=["red"], validation_every=3, validation_steps=2)
    half = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "bf16.safetensors", mixed_precision="bf16",
                                 **common))
    # rendered by the bf16 run (fp32 adapters, bf16 base), under kohya's sample name
    assert len(list((tmp_path / "sample").glob("bf16_000003_00_*.png"))) == 1
    full = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "fp32.safetensors", **common))
    half_tensors, full_tensors = load_file(half.output), load_file(full.output)
    assert half_tensors.keys() == full_tensors.keys()
    assert all(t.dtype == torch.float32 for t in half_tensors.values())
    ups = [k for k in full_tensors if k.endswith("lora_up.weight")]
    moved = sum(float(full_tensors[k].abs().sum()) for k in ups)
    gap = sum(float((half_tensors[k] - full_tensors[k]).abs().sum()) for k in ups)
    assert moved > 0 and gap < 0.1 * moved  # same direction of learning, bf16 rounding apart


def test_two_processes_match_one_process_with_gradient_accumulation(tiny_sd1_dir, colour_dataset, tmp_path):
    """2 processes x batch 1 see batches 2s and 2s+1 at step s, like one process accumulating over 2
    micro-batches; DDP's gradient mean equals accelerate's loss / 2, so the weights agree."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file

    script = Path(__file__).with_name("sd_lora_two_process_run.py")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "OMP_NUM_THREADS": "1",
           "ACCELERATE_USE_CPU": "1"}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2", "--num_machines", "1",
               "--multi_gpu", "--mixed_precision", "no", "--dynamo_backend", "no",
               "--main_process_port", str(_free_port()),
               str(script), str(tiny_sd1_dir), str(colour_dataset), str(tmp_path / "two.safetensors")]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    single = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "one.safetensors", max_steps=2,
                                   batch_size=1, gradient_accumulation_steps=2))
    two, one = load_file(tmp_path / "two.safetensors"), load_file(single.output)
    assert two.keys() == one.keys()
    assert any(one[k].abs().sum() > 0 for k in one if "lora_up" in k)
    # Measured on an AVX-512 CPU without BF16: one element off by 4e-6 (1 thread) or 8.5e-5 (2 threads), the rest
    # within 1e-6: the kernels' summation order changes with batch size and threads, and Adam's normalisation
    # turns such rounding in a near-zero gradient into a visible step. A wrong accumulation is off everywhere.
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-3, atol=5e-4)


def _free_port() -> int:
    """A TCP port nobody listens on now, so parallel test runs on one machine do not collide."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_dreambooth_class_images_join_with_the_prior_loss_weight(tiny_sd1_dir, colour_dataset, tmp_path):
    from PIL import Image

    from mixkit.training.dataset_scan import scan_dataset

    class_dir = tmp_path / "class" / "1_square"
    class_dir.mkdir(parents=True)
    Image.new("RGB", (32, 32), (128, 128, 128)).save(class_dir / "grey.png")
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "db.safetensors", class_dataset=str(tmp_path / "class"),
                     prior_loss_weight=0.5, max_steps=1, batch_size=2)
    report = scan_dataset(config)
    weights = {r.path.name: r.loss_weight for r in report.records}
    assert weights == {"red.png": 1.0, "blue.png": 1.0, "green.png": 1.0, "grey.png": 0.5}
    result = train_sd_lora(config)
    metadata = read_safetensors_metadata(result.output)
    assert metadata["ss_prior_loss_weight"] == "0.5"
    assert json.loads(metadata["ss_reg_dataset_dirs"]) == {"1_square": {"n_repeats": 1, "img_count": 1}}
    assert json.loads(metadata["ss_dataset_dirs"]) == {"2_square": {"n_repeats": 2, "img_count": 3}}
    assert metadata["ss_num_reg_images"] == "1"
    config.prior_loss_weight = float("inf")
    with pytest.raises(ValueError, match="prior_loss_weight"):
        train_sd_lora(config)


def _class_folder(root, source):
    """The instance images again, as a one-repeat class (prior-preservation) folder."""
    import shutil

    folder = root / "1_square"
    folder.mkdir(parents=True)
    for image in (source / "2_square").glob("*.png"):
        shutil.copy(image, folder / image.name)
        shutil.copy(image.with_suffix(".txt"), folder / image.with_suffix(".txt").name)
    return root


def test_base_model_prior_target_asks_class_images_for_what_the_base_model_already_predicts(
        tiny_sd1_dir, colour_dataset, tmp_path):
    # One batch holds the six instance samples and the three class samples. The adapters start at zero,
    # so at the first step the model *is* the base model: with prior_target='base_model' the class rows
    # add nothing to the loss, whatever their weight, exactly as rows of weight 0 would.
    classes = _class_folder(tmp_path / "class", colour_dataset)

    def first_loss(name, **overrides):
        config = _config(tiny_sd1_dir, colour_dataset, tmp_path / f"{name}.safetensors", class_dataset=str(classes),
                         batch_size=9, max_steps=1, **overrides)
        return train_sd_lora(config).losses[0]

    base_model = first_loss("base", prior_target="base_model", prior_loss_weight=1000.0)
    ignored = first_loss("zero", prior_target="noise", prior_loss_weight=0.0)
    dreambooth = first_loss("noise", prior_target="noise", prior_loss_weight=1000.0)
    assert base_model == pytest.approx(ignored, rel=1e-5)
    assert dreambooth > 100 * base_model


def test_base_model_prior_target_trains_and_is_recorded(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    classes = _class_folder(tmp_path / "class", colour_dataset)
    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "kept.safetensors", class_dataset=str(classes),
                     prior_target="base_model", max_steps=3)
    result = train_sd_lora(config)
    weights = load_file(result.output)
    assert any(weights[k].abs().sum() > 0 for k in weights if "lora_up" in k)
    assert read_safetensors_metadata(result.output)["ss_prior_target"] == "base_model"


def test_prior_target_is_checked(tiny_sd1_dir, colour_dataset, tmp_path):
    with pytest.raises(KeyError, match="base_model"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.safetensors", prior_target="teacher"))
    with pytest.raises(ValueError, match="class_dataset"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.safetensors", prior_target="base_model"))
    assert not (tmp_path / "x.safetensors").exists()


def test_disabled_network_runs_the_base_model_and_reattaches(tiny_sd1_dir):
    from mixkit.training.lora_network import LoraNetwork

    model = load_diffusion_model(str(tiny_sd1_dir))
    unet = model.unet
    torch.manual_seed(0)
    inputs = (torch.randn(1, 4, 4, 4), torch.tensor([10]), torch.randn(1, 77, unet.config.cross_attention_dim))
    with torch.no_grad():
        plain = unet(*inputs).sample
        network = LoraNetwork(unet, model.text_encoders, rank=2, alpha=2.0).attach()
        for adapter in network.adapters.values():
            torch.nn.init.normal_(adapter.lora_up.weight)
        adapted = unet(*inputs).sample
        with network.disabled():
            assert torch.equal(unet(*inputs).sample, plain)
        assert torch.equal(unet(*inputs).sample, adapted) and not torch.allclose(adapted, plain)
    network.detach()


def test_cached_latents_train_what_per_step_encoding_trains_and_encode_each_image_once(tiny_sd1_dir, colour_dataset,
                                                                                      tmp_path):
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    encoded_rows = []
    encode = model.vae.encode
    model.vae.encode = lambda pixels, *a, **k: encoded_rows.append(len(pixels)) or encode(pixels, *a, **k)
    # Two epochs of three images repeated twice (kohya's 2_square): per-step encoding sees each image four
    # times, the cache once (a repeat inside one batch: test_latent_cache.py).
    settings = dict(max_steps=4, batch_size=3, noise_offset=0.1, min_snr_gamma=5.0)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors", **settings), model=model)
    per_step_rows, encoded_rows[:] = sum(encoded_rows), []
    cached = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "cached.safetensors", cache_latents=True,
                                   **settings), model=model)
    images = len(list(colour_dataset.glob("*/*.png")))
    assert images == 3 and per_step_rows == 4 * 3 and sum(encoded_rows) == images
    # The same latent draws: only the encoder's batch composition differs, so the runs agree to rounding.
    assert cached.losses == pytest.approx(plain.losses, rel=1e-4)
    a, b = load_file(plain.output), load_file(cached.output)
    assert_trained_alike(a, b)
    assert read_safetensors_metadata(cached.output)["ss_cache_latents"] == "True"


def test_latents_cached_on_disk_serve_a_later_run_without_the_encoder(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                      monkeypatch):
    from safetensors.torch import load_file

    from mixkit.io.cache_inventory import cache_entries

    monkeypatch.setenv("MIXKIT_CACHE_DIR", str(tmp_path / "cache"))
    model = load_diffusion_model(tiny_sd1_dir)
    encoded_rows = []
    encode = model.vae.encode
    model.vae.encode = lambda pixels, *a, **k: encoded_rows.append(len(pixels)) or encode(pixels, *a, **k)
    settings = dict(max_steps=4, batch_size=3, noise_offset=0.1, min_snr_gamma=5.0)
    in_memory = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "memory.safetensors", cache_latents=True,
                                      **settings), model=model)
    runs, rows_per_run = [], []
    for i in range(2):
        encoded_rows.clear()
        runs.append(train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / f"disk{i}.safetensors",
                                          cache_latents_to_disk=True, **settings), model=model))
        rows_per_run.append(sum(encoded_rows))
    images = len(list(colour_dataset.glob("*/*.png")))
    assert rows_per_run == [images, 0]  # the first disk run encodes each image once, the second none
    expected = load_file(in_memory.output)
    for run in runs:
        assert run.losses == in_memory.losses
        assert all(torch.equal(tensor, expected[key]) for key, tensor in load_file(run.output).items())
        assert read_safetensors_metadata(run.output)["ss_cache_latents"] == "True"
    [entry] = [e for e in cache_entries() if e.kind == "latents"]
    assert entry.detail.startswith(f"training latents of {images} images (AutoencoderKL encoder in float32")


def test_cache_latents_must_be_a_boolean(tiny_sd1_dir, colour_dataset, tmp_path):
    with pytest.raises(TypeError, match="cache_latents must be true or false"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.safetensors", cache_latents="yes"))
    with pytest.raises(TypeError, match="cache_latents_to_disk must be true or false"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.safetensors", cache_latents_to_disk=1))


def test_ema_exports_the_moving_average_of_the_steps_weights(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    # With the word vectors trained too: they are averaged and bundled like the adapters.
    settings = dict(max_steps=3, batch_size=2, train_word_vectors=["square"])
    model = load_diffusion_model(tiny_sd1_dir)
    raw = [load_file(train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / f"raw{n}.safetensors",
                                           **{**settings, "max_steps": n}), model=model).output) for n in (1, 2, 3)]
    ema_run = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "ema.safetensors", use_ema=True,
                                    ema_decay=0.5, **settings), model=model)
    ema = load_file(ema_run.output)
    # Update 1 copies; update 2 decays by min(2/11, 0.5); update 3 by min(3/12, 0.5) (diffusers' warm-up).
    d2, d3 = 2 / 11, 3 / 12
    for key, last in raw[2].items():
        expected = ((raw[0][key] * d2 + raw[1][key] * (1 - d2)) * d3 + last * (1 - d3)) if key.endswith("weight") \
            or key.startswith("bundle_emb") else last
        assert torch.allclose(ema[key], expected, atol=1e-6), key
    assert any(not torch.allclose(ema[k], raw[2][k]) for k in ema if "lora_up" in k)
    assert "bundle_emb.square.string_to_param.*" in ema
    metadata = read_safetensors_metadata(ema_run.output)
    assert (metadata["ss_use_ema"], metadata["ss_ema_decay"]) == ("True", "0.5")
    assert read_safetensors_metadata(tmp_path / "raw3.safetensors")["ss_use_ema"] == "False"
    assert "ss_ema_decay" not in read_safetensors_metadata(tmp_path / "raw3.safetensors")


def test_ema_is_part_of_the_checkpoint_so_resume_is_exact(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    settings = dict(max_steps=4, batch_size=2, use_ema=True, ema_decay=0.9)
    model = load_diffusion_model(tiny_sd1_dir)
    straight = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "straight.safetensors", **settings),
                             model=model)
    interrupted = _config(tiny_sd1_dir, colour_dataset, tmp_path / "resumed.safetensors",
                          checkpoint_dir=str(tmp_path / "ckpt"), **settings)
    train_sd_lora(interrupted, stop_at_step=2, model=model)
    interrupted.resume_from = str(tmp_path / "ckpt")
    resumed = train_sd_lora(interrupted, model=model)
    a, b = load_file(straight.output), load_file(resumed.output)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # A checkpoint of a run without EMA cannot seed one with it (the averages would be missing).
    plain = _config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors", max_steps=4, batch_size=2,
                    resume_from=str(tmp_path / "ckpt"), use_ema=False)
    with pytest.raises(CheckpointMismatchError):
        train_sd_lora(plain, model=model)


@pytest.mark.parametrize("use_ema", [False, True])
def test_save_every_n_steps_writes_the_file_a_shorter_run_would_end_with(tiny_sd1_dir, colour_dataset, tmp_path,
                                                                         use_ema):
    """The step-2 file of a 4-step run is the 2-step run's file (constant rate), and writing it (with EMA: from the
    averages) leaves the run itself unchanged: its final file is the one a run without intermediate files writes."""
    from safetensors.torch import load_file

    settings = dict(max_steps=4, batch_size=2, train_word_vectors=["square"], use_ema=use_ema, ema_decay=0.5)
    model = load_diffusion_model(tiny_sd1_dir)
    saving = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "run.safetensors", save_every_n_steps=2,
                                   **settings), model=model)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors", **settings), model=model)
    short = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "short.safetensors",
                                  **{**settings, "max_steps": 2}), model=model)
    assert saving.intermediate_outputs == [tmp_path / "run-step00000002.safetensors"]  # step 4: the output itself
    for written, expected in ((saving.intermediate_outputs[0], short.output), (saving.output, plain.output)):
        a, b = load_file(written), load_file(expected)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), written
    assert "bundle_emb.square.string_to_param.*" in load_file(saving.intermediate_outputs[0])
    assert read_safetensors_metadata(saving.intermediate_outputs[0])["ss_steps"] == "2"


@pytest.mark.parametrize("every", [-1, True, 2.5, "100"])
def test_save_every_n_steps_must_be_a_count(every, tmp_path):
    with pytest.raises(ValueError, match="save_every_n_steps must be an integer >= 0"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", save_every_n_steps=every))


@pytest.mark.parametrize("overrides, error, message", [
    ({"use_ema": "yes"}, TypeError, "use_ema must be true or false"),
    ({"use_ema": True, "ema_decay": 1.0}, ValueError, r"ema_decay must be a number in \[0, 1\)"),
    ({"use_ema": True, "ema_decay": -0.1}, ValueError, "ema_decay"),
])
def test_ema_settings_are_checked(overrides, error, message, tmp_path):
    with pytest.raises(error, match=message):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", **overrides))


def test_min_and_max_timestep_bound_the_trained_timesteps(tiny_sd1_dir, colour_dataset, tmp_path):
    model = load_diffusion_model(tiny_sd1_dir)
    seen = []
    hook = model.unet.register_forward_pre_hook(lambda _m, args: seen.extend(args[1].tolist()))
    try:
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "high.safetensors", max_steps=4,
                              min_timestep=900), model=model)
        high, seen[:] = list(seen), []
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "low.safetensors", max_steps=4,
                              max_timestep=50), model=model)
        low = list(seen)
    finally:
        hook.remove()
    assert len(high) == len(low) == 4 * 3
    assert all(900 <= t < 1000 for t in high) and all(0 <= t < 50 for t in low)
    metadata = read_safetensors_metadata(tmp_path / "high.safetensors")
    assert (metadata["ss_min_timestep"], metadata["ss_max_timestep"]) == ("900", "None")


@pytest.mark.parametrize("overrides, message", [
    ({"min_timestep": -1}, "min_timestep must be an integer >= 0"),
    ({"min_timestep": 10.5}, "min_timestep must be an integer >= 0"),
    ({"min_timestep": 500, "max_timestep": 500}, "max_timestep must be an integer above min_timestep=500"),
])
def test_timestep_bounds_are_checked_before_loading(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", **overrides))


def test_max_timestep_beyond_the_models_schedule_is_refused(tiny_sd1_dir, colour_dataset, tmp_path):
    with pytest.raises(ValueError, match="must lie in 0..1000, the model's num_train_timesteps"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "out.safetensors", max_timestep=2000))
    assert not (tmp_path / "out.safetensors").exists()


def test_loraplus_puts_the_up_weights_in_groups_of_their_own_at_the_ratio(tiny_sd1_dir):
    from mixkit.training.lora_network import LoraNetwork

    model = load_diffusion_model(tiny_sd1_dir)
    network = LoraNetwork(model.unet, model.text_encoders, rank=2, alpha=2.0, train_text_encoder=True)
    plain = network.parameter_groups(1e-3, 5e-4)
    split = network.parameter_groups(1e-3, 5e-4, up_lr_ratio=16.0)
    assert [g["lr"] for g in plain] == [1e-3, 5e-4]
    assert [g["lr"] for g in split] == [1e-3, 1e-3 * 16, 5e-4, 5e-4 * 16]
    ups = {id(a.lora_up.weight) for a in network.adapters.values()}
    assert all(id(p) in ups for g in split[1::2] for p in g["params"])
    assert not any(id(p) in ups for g in split[0::2] for p in g["params"])
    # Every trained tensor is in exactly one group either way.
    assert sorted(id(p) for g in split for p in g["params"]) == sorted(id(p) for g in plain for p in g["params"])


def test_loraplus_trains_and_is_recorded(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    settings = dict(max_steps=2, batch_size=2, learning_rate=1e-3)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors", **settings), model=model)
    plus = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plus.safetensors", loraplus_lr_ratio=8.0,
                                 **settings), model=model)
    a, b = load_file(plain.output), load_file(plus.output)
    # Step 1 moves only the up weights (down gets no gradient while up is zero); Adam's first steps move each
    # weight by about its rate, so the up weights moved about 8 times as far.
    ups = [k for k in a if "lora_up" in k]
    ratio = sum(b[k].abs().sum() for k in ups) / sum(a[k].abs().sum() for k in ups)
    assert 6.0 < ratio < 10.0
    assert read_safetensors_metadata(plus.output)["ss_loraplus_lr_ratio"] == "8.0"
    assert read_safetensors_metadata(plain.output)["ss_loraplus_lr_ratio"] == "None"


@pytest.mark.parametrize("ratio", [0, -2.0, float("inf"), True, "16"])
def test_loraplus_ratio_is_checked(ratio, tmp_path):
    with pytest.raises(ValueError, match="loraplus_lr_ratio must be a positive number"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", loraplus_lr_ratio=ratio))


def test_stratified_timestep_sampling_spreads_each_batch_over_the_range(tiny_sd1_dir, colour_dataset, tmp_path):
    model = load_diffusion_model(tiny_sd1_dir)
    seen = []
    hook = model.unet.register_forward_pre_hook(lambda _m, args: seen.append(sorted(args[1].tolist())))
    try:
        result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "s.safetensors", max_steps=3,
                                       min_timestep=100, max_timestep=400, timestep_sampling="stratified"),
                               model=model)
    finally:
        hook.remove()
    # Batches of 3 over [100, 400): one timestep in each 100-wide slice.
    assert len(seen) == 3 and all([t // 100 for t in batch] == [1, 2, 3] for batch in seen)
    assert read_safetensors_metadata(result.output)["ss_timestep_sampling"] == "stratified"


def test_unknown_timestep_sampling_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="stratified"):
        train_sd_lora(_config(tmp_path / "no-model", tmp_path, tmp_path / "out.safetensors", timestep_sampling="logit"))


def _masked_copy(dataset, target, value: int):
    """The colour dataset with a uniform `-masklabel.png` (grey level `value`) beside every image."""
    import shutil

    from PIL import Image

    shutil.copytree(dataset, target)
    for image in target.glob("*/*.png"):
        Image.new("L", (32, 32), value).save(image.with_name(f"{image.stem}-masklabel.png"))
    return target


def test_masked_loss_with_white_masks_is_the_unmasked_run_and_black_masks_learn_nothing(tiny_sd1_dir, colour_dataset,
                                                                                        tmp_path):
    from safetensors.torch import load_file

    settings = dict(max_steps=3, batch_size=2)
    model = load_diffusion_model(tiny_sd1_dir)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "plain.safetensors", **settings),
                          model=model)
    white = train_sd_lora(_config(tiny_sd1_dir, _masked_copy(colour_dataset, tmp_path / "white", 255),
                                  tmp_path / "white.safetensors", masked_loss=True, **settings), model=model)
    assert white.losses == plain.losses
    a, b = load_file(white.output), load_file(plain.output)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert read_safetensors_metadata(white.output)["ss_masked_loss"] == "True"
    assert read_safetensors_metadata(plain.output)["ss_masked_loss"] == "False"

    black = train_sd_lora(_config(tiny_sd1_dir, _masked_copy(colour_dataset, tmp_path / "black", 0),
                                  tmp_path / "black.safetensors", masked_loss=True, **settings), model=model)
    assert black.losses == [0.0, 0.0, 0.0]
    ups = [t for k, t in load_file(black.output).items() if k.endswith("lora_up.weight")]
    assert ups and all(not t.any() for t in ups)  # zero-initialised up weights never received a gradient


def test_masked_loss_weighs_the_background_by_the_unmasked_weight(tiny_sd1_dir, colour_dataset, tmp_path):
    # Black masks with a floor of 0.25 weigh every cell 0.25: the first step's loss is a quarter of the
    # unmasked run's (same noise, same weights before the first update); normalised, it is the unmasked loss.
    model = load_diffusion_model(tiny_sd1_dir)
    black = _masked_copy(colour_dataset, tmp_path / "black", 0)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "p.safetensors", max_steps=1), model=model)
    floor = train_sd_lora(_config(tiny_sd1_dir, black, tmp_path / "f.safetensors", max_steps=1, masked_loss=True,
                                  masked_loss_unmasked_weight=0.25), model=model)
    normalized = train_sd_lora(_config(tiny_sd1_dir, black, tmp_path / "n.safetensors", max_steps=1, masked_loss=True,
                                       masked_loss_unmasked_weight=0.25, masked_loss_normalize=True), model=model)
    assert floor.losses[0] == pytest.approx(plain.losses[0] / 4, rel=1e-6)
    assert normalized.losses[0] == pytest.approx(plain.losses[0], rel=1e-6)


def test_masks_are_refused_or_reported_before_loading(colour_dataset, tmp_path):
    from mixkit.data.loss_masks import LossMaskError
    from mixkit.training.dataset_scan import scan_dataset

    with pytest.raises(LossMaskError, match="masked_loss is on but none of the 3 training images has a mask"):
        train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / "o.safetensors", masked_loss=True))
    masked = _masked_copy(colour_dataset, tmp_path / "masked", 255)
    report = scan_dataset(_config(tmp_path / "no-model", masked, tmp_path / "o.safetensors"))
    assert len(report.records) == 3  # the masks are not training images
    assert any("3 images have a '-masklabel' mask beside them, unused" in w for w in report.warnings)
    for settings, message in [(dict(masked_loss="yes"), "masked_loss must be true or false"),
                              (dict(masked_loss=True, masked_loss_unmasked_weight=1.5),
                               "masked_loss_unmasked_weight must be a number in \\[0, 1\\]"),
                              (dict(masked_loss_normalize=True), "act on masked training only")]:
        with pytest.raises((ValueError, TypeError), match=message):
            train_sd_lora(_config(tmp_path / "no-model", masked, tmp_path / "o.safetensors", **settings))


def test_the_output_folder_is_made_or_refused_before_training(tiny_sd1_dir, colour_dataset, tmp_path):
    # A missing folder used to be found when the finished run wrote its file, losing the run.
    result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "new" / "deeper" / "l.safetensors",
                                   max_steps=1))
    assert result.output.is_file()
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="is a folder; name the LoRA file"):
        train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / "taken"))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(ValueError, match="cannot be created"):
        train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / "a-file" / "l.safetensors"))
    # kohya writes .safetensors names; a suffix-less file is listed by no LoRA folder, a .ckpt name makes tools unpickle.
    for name in ("noext", "x.ckpt", "x.pt"):
        with pytest.raises(ValueError, match=r"must end in \.safetensors.*try '.*\.safetensors'"):
            train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / name))


def test_a_caption_dropout_rate_of_one_trains_as_on_empty_captions(tiny_sd1_dir, colour_dataset, tmp_path):
    import shutil

    from safetensors.torch import load_file

    shutil.copytree(colour_dataset, tmp_path / "empty")
    for caption in (tmp_path / "empty").glob("*/*.txt"):
        caption.write_text("", encoding="utf-8")
    model = load_diffusion_model(tiny_sd1_dir)
    dropped = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "d.safetensors", max_steps=2,
                                    caption_dropout_rate=1.0), model=model)
    empty = train_sd_lora(_config(tiny_sd1_dir, tmp_path / "empty", tmp_path / "e.safetensors", max_steps=2),
                          model=model)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "p.safetensors", max_steps=2), model=model)
    assert dropped.losses == empty.losses != plain.losses
    a, b = load_file(dropped.output), load_file(empty.output)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert read_safetensors_metadata(dropped.output)["ss_caption_dropout_rate"] == "1.0"


@pytest.mark.parametrize("settings, message", [(dict(keep_tokens=-1), "keep_tokens must be an integer >= 0"),
                                               (dict(caption_dropout_rate=2), "caption_dropout_rate must be"),
                                               (dict(loss_type="l1"), "Unknown loss type 'l1'"),
                                               (dict(huber_schedule="cosine"), "Unknown huber schedule"),
                                               (dict(huber_c=0), "huber_c must be a number in \\(0, 1\\]"),
                                               (dict(ip_noise_gamma=-0.1), "ip_noise_gamma must be a number in \\[0, inf\\)"),
                                               (dict(max_grad_norm=float("nan")), "max_grad_norm must be"),
                                               (dict(multires_noise_iterations=-1), "multires_noise_iterations must"),
                                               (dict(multires_noise_discount=0), "multires_noise_discount must"),
                                               (dict(rank_dropout=1.0), "rank_dropout must be a number in")])
def test_caption_and_loss_settings_are_checked_before_loading(colour_dataset, tmp_path, settings, message):
    with pytest.raises(ValueError, match=message):
        train_sd_lora(_config(tmp_path / "no-model", colour_dataset, tmp_path / "o.safetensors", **settings))


def test_loss_and_noise_options_and_clipping_reach_the_step(tiny_sd1_dir, colour_dataset, tmp_path, monkeypatch):
    import accelerate

    norms = []
    clip = accelerate.Accelerator.clip_grad_norm_
    monkeypatch.setattr(accelerate.Accelerator, "clip_grad_norm_",
                        lambda self, parameters, max_norm, **kw: norms.append(max_norm) or clip(self, parameters,
                                                                                               max_norm, **kw))
    model = load_diffusion_model(tiny_sd1_dir)
    runs = {}
    for name, settings in [("plain", {}), ("huber", dict(loss_type="huber", huber_schedule="constant")),
                           ("ip", dict(ip_noise_gamma=0.1)), ("unclipped", dict(max_grad_norm=0.0)),
                           ("multires", dict(multires_noise_iterations=6)), ("debiased", dict(debiased_estimation_loss=True)),
                           ("clip", dict(max_grad_norm=0.5))]:
        norms.clear()
        runs[name] = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / f"{name}.safetensors", max_steps=2,
                                           **settings), model=model)
        runs[name].norms = list(norms)
    assert runs["plain"].norms == [1.0, 1.0] and runs["clip"].norms == [0.5, 0.5] and runs["unclipped"].norms == []
    # pseudo-Huber with c = 0.1 is below the squared error wherever |d| is not tiny
    assert runs["huber"].losses[0] < runs["plain"].losses[0]
    assert runs["ip"].losses[0] != runs["plain"].losses[0]
    assert runs["multires"].losses[0] != runs["plain"].losses[0] != runs["debiased"].losses[0]
    assert read_safetensors_metadata(runs["multires"].output)["ss_multires_noise_iterations"] == "6"
    assert read_safetensors_metadata(runs["debiased"].output)["ss_debiased_estimation"] == "True"  # kohya's key
    dropouts = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "drop.safetensors", max_steps=2,
                                     network_dropout=0.1, rank_dropout=0.25, module_dropout=0.05), model=model)
    assert dropouts.losses[1] != runs["plain"].losses[1]
    metadata = read_safetensors_metadata(dropouts.output)
    assert metadata["ss_network_dropout"] == "0.1"
    assert json.loads(metadata["ss_network_args"]) == {"rank_dropout": "0.25", "module_dropout": "0.05"}
    metadata = read_safetensors_metadata(runs["huber"].output)
    assert (metadata["ss_loss_type"], metadata["ss_huber_c"], metadata["ss_huber_schedule"]) == ("huber", "0.1",
                                                                                                 "constant")
    assert read_safetensors_metadata(runs["ip"].output)["ss_ip_noise_gamma"] == "0.1"


def test_flip_aug_mirrors_rows_by_the_seed_and_caches_mirrored_latents_apart(tiny_sd1_dir, tmp_path):
    from PIL import Image
    from safetensors.torch import load_file

    from mixkit.training.flip_augmentation import flip_draws, flip_rows

    # The draw: per (seed, micro-batch), about half the rows; the flip mirrors pixels and masks of those rows only.
    draws = [flip for index in range(200) for flip in flip_draws(3, index, 4)]
    assert draws == [flip for index in range(200) for flip in flip_draws(3, index, 4)] and 300 < sum(draws) < 500
    pixels, masks = torch.arange(12.0).view(2, 1, 2, 3), torch.arange(12.0).view(2, 1, 2, 3)
    flipped = flip_rows({"pixels": pixels, "masks": masks, "captions": ["a", "b"]}, [False, True])
    assert torch.equal(flipped["pixels"][0], pixels[0]) and torch.equal(flipped["pixels"][1], pixels[1].flip(-1))
    assert torch.equal(flipped["masks"][1], masks[1].flip(-1)) and flipped["captions"] == ["a", "b"]

    # Through the trainer, on images whose mirror differs: cached latents train what per-step encoding trains
    # (a cache keyed by image alone would hand a mirrored draw the unmirrored posterior), and a run flips.
    data = tmp_path / "halves" / "2_card"
    data.mkdir(parents=True)
    for name, (left, right) in {"rb": ((255, 0, 0), (0, 0, 255)), "gy": ((0, 200, 0), (250, 220, 0))}.items():
        image = Image.new("RGB", (32, 32), left)
        image.paste(Image.new("RGB", (16, 32), right), (16, 0))
        image.save(data / f"{name}.png")
        (data / f"{name}.txt").write_text("a two-coloured card", encoding="utf-8")
    model = load_diffusion_model(tiny_sd1_dir)
    settings = dict(max_steps=4, batch_size=2, flip_aug=True)
    per_step = train_sd_lora(_config(tiny_sd1_dir, data.parent, tmp_path / "a.safetensors", **settings), model=model)
    cached = train_sd_lora(_config(tiny_sd1_dir, data.parent, tmp_path / "b.safetensors", cache_latents=True,
                                   **settings), model=model)
    plain = train_sd_lora(_config(tiny_sd1_dir, data.parent, tmp_path / "c.safetensors", max_steps=4, batch_size=2),
                          model=model)
    assert cached.losses == pytest.approx(per_step.losses, rel=1e-4) and per_step.losses != plain.losses
    a, b = load_file(per_step.output), load_file(cached.output)
    assert_trained_alike(a, b)
    assert read_safetensors_metadata(per_step.output)["ss_flip_aug"] == "True"


def test_scale_weight_norms_keeps_every_adapters_change_within_the_bound(tiny_sd1_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    model = load_diffusion_model(tiny_sd1_dir)
    settings = dict(max_steps=3, learning_rate=5e-2, train_text_encoder=True)
    plain = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "p.safetensors", **settings), model=model)
    loose = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "l.safetensors", scale_weight_norms=1e6,
                                  **settings), model=model)
    bound = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "b.safetensors", scale_weight_norms=0.01,
                                  **settings), model=model)

    def norms(path):
        tensors = load_file(path)
        names = {k.rsplit(".", 2)[0] for k in tensors if k.endswith("lora_up.weight")}
        return [(tensors[f"{n}.lora_up.weight"].flatten(1).double() @ tensors[f"{n}.lora_down.weight"].flatten(1).double()
                 ).norm().item() * tensors[f"{n}.alpha"].item() / 4 for n in names]

    assert loose.losses == plain.losses  # a bound nothing reaches changes nothing
    assert max(norms(plain.output)) > 0.01 and max(norms(bound.output)) <= 0.01 * (1 + 1e-5)
    assert read_safetensors_metadata(bound.output)["ss_scale_weight_norms"] == "0.01"


def test_text_encoder_only_saves_and_merges_the_text_encoder_adapters_alone(tiny_sd1_dir, colour_dataset, tmp_path):
    """kohya's network_train_text_encoder_only: no UNet adapters are created, so the file holds lora_te_* modules
    only, and merged through the community loader it changes the text encoder and leaves the UNet bit for bit."""
    from safetensors.torch import load_file

    from mixkit.lora import LoraRequest, apply_loras

    config = _config(tiny_sd1_dir, colour_dataset, tmp_path / "te.safetensors", train_unet=False,
                     train_text_encoder=True, max_steps=2)
    result = train_sd_lora(config)
    tensors = load_file(result.output)
    assert tensors and all(key.startswith("lora_te_text_model_encoder_layers_") for key in tensors)
    assert any(tensors[k].abs().max() > 0 for k in tensors if k.endswith("lora_up.weight"))  # it trained
    metadata = read_safetensors_metadata(result.output)  # no UNet part, so no UNet rate (kohya's args.unet_lr)
    assert (metadata["ss_unet_lr"], metadata["ss_learning_rate"]) == ("None", "0.01")
    model = load_diffusion_model(tiny_sd1_dir)
    unet_before = {k: v.clone() for k, v in model.unet.state_dict().items()}
    encoder_before = {k: v.clone() for k, v in model.text_encoders[0].state_dict().items()}
    apply_loras(model.unet, model.text_encoders, [LoraRequest(str(result.output))], mode="merge")
    assert all(torch.equal(v, unet_before[k]) for k, v in model.unet.state_dict().items())
    assert any(not torch.equal(v, encoder_before[k]) for k, v in model.text_encoders[0].state_dict().items())


def test_sdxl_text_encoder_only_saves_both_encoders_adapters_alone(tiny_sdxl_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    config = _config(tiny_sdxl_dir, colour_dataset, tmp_path / "xl-te.safetensors", max_steps=1, batch_size=2,
                     train_unet=False, train_text_encoder=True)
    modules = {key.split(".")[0] for key in load_file(train_sd_lora(config).output)}
    assert {module[:9] for module in modules} == {"lora_te1_", "lora_te2_"}


@pytest.mark.parametrize("overrides, message", [
    (dict(train_unet=False), "train_unet=false and train_text_encoder=false leave no adapters"),
    (dict(train_unet=False, train_text_encoder=True, network="locon"), "network='locon' chooses UNet layers"),
])
def test_text_encoder_only_refuses_what_it_cannot_train(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        _config("m", tmp_path, tmp_path / "o.safetensors", **overrides).check()


def test_class_images_are_balanced_as_kohya_unless_taken_as_given(tiny_sd1_dir, colour_dataset, tmp_path):
    # 3 training images x 2 repeats = 6 samples an epoch, 3 class images x 1 repeat. kohya's rule repeats the class
    # images to 6 (12 samples, 4 batches of 3); balance_class_images=False keeps them as given (9 samples, 3 batches),
    # so the two folders' sizes set the concept's share of each batch.
    classes = _class_folder(tmp_path / "class", colour_dataset)

    def batches_per_epoch(name, **overrides):
        result = train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / f"{name}.safetensors",
                                       class_dataset=str(classes), max_steps=1, **overrides))
        return read_safetensors_metadata(result.output)["ss_num_batches_per_epoch"]

    assert batches_per_epoch("kohya") == "4"
    assert batches_per_epoch("given", balance_class_images=False) == "3"
    with pytest.raises((TypeError, ValueError), match="balance_class_images"):
        train_sd_lora(_config(tiny_sd1_dir, colour_dataset, tmp_path / "x.safetensors", class_dataset=str(classes),
                              balance_class_images="no"))
    assert not (tmp_path / "x.safetensors").exists()
