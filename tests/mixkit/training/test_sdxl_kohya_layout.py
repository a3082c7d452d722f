"""SDXL LoRAs are written with kohya's SGM module names (what A1111/ComfyUI/Civitai files use), load in
mixkit with every key matched, and change diffusers' images the same way as mixkit's loader does."""

from __future__ import annotations

import pytest
import torch

from mixkit.training.kohya_export import sgm_lora_names
from mixkit.training.sd_lora_config import SDLoraTrainingConfig
from mixkit.training.sd_lora_trainer import train_sd_lora


def _sdxl_shaped_unet():
    """SDXL's block layout (3 levels, 2 layers per block, attention on levels 1-2) with tiny widths."""
    from diffusers import UNet2DConditionModel

    return UNet2DConditionModel(
        block_out_channels=(8, 16, 16), layers_per_block=2, sample_size=8, norm_num_groups=8, cross_attention_dim=16,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(2, 2, 2),
        transformer_layers_per_block=(1, 2, 2), use_linear_projection=True)


@pytest.mark.parametrize("diffusers_name, sgm_name", [
    # Names as they appear in kohya sdxl_train_network files for SDXL base.
    ("down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q", "input_blocks_4_1_transformer_blocks_0_attn1_to_q"),
    ("down_blocks_2_attentions_1_transformer_blocks_1_ff_net_2", "input_blocks_8_1_transformer_blocks_1_ff_net_2"),
    ("down_blocks_1_attentions_1_proj_in", "input_blocks_5_1_proj_in"),
    ("mid_block_attentions_0_transformer_blocks_0_attn2_to_k", "middle_block_1_transformer_blocks_0_attn2_to_k"),
    ("up_blocks_0_attentions_0_proj_out", "output_blocks_0_1_proj_out"),
    ("up_blocks_1_attentions_2_transformer_blocks_0_attn2_to_out_0", "output_blocks_5_1_transformer_blocks_0_attn2_to_out_0"),
    ("down_blocks_0_resnets_1_conv1", "input_blocks_2_0_in_layers_2"),
    ("down_blocks_0_downsamplers_0_conv", "input_blocks_3_0_op"),
    ("down_blocks_1_resnets_0_conv_shortcut", "input_blocks_4_0_skip_connection"),
    ("mid_block_resnets_1_time_emb_proj", "middle_block_2_emb_layers_1"),
    ("up_blocks_0_upsamplers_0_conv", "output_blocks_2_2_conv"),
    ("up_blocks_2_resnets_2_conv2", "output_blocks_8_0_out_layers_3"),
])
def test_sgm_names_follow_the_original_sdxl_unet(diffusers_name, sgm_name):
    names = sgm_lora_names(_sdxl_shaped_unet())
    assert names[f"lora_unet_{diffusers_name}"] == f"lora_unet_{sgm_name}"


def _config(model, dataset, output, **overrides) -> SDLoraTrainingConfig:
    settings = dict(model=str(model), dataset=str(dataset), output=str(output), resolution=32, batch_size=3,
                    max_steps=8, learning_rate=3e-2, rank=4, alpha=4.0, seed=1, train_text_encoder=True)
    return SDLoraTrainingConfig(**{**settings, **overrides})


@pytest.fixture(scope="module")
def sgm_lora(tiny_sdxl_dir, colour_dataset, tmp_path_factory):
    output = tmp_path_factory.mktemp("xl-sgm") / "colours_xl.safetensors"
    return train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, output)).output


def test_saved_names_are_sgm_for_the_unet_and_te1_te2_for_the_encoders(sgm_lora):
    from safetensors.torch import load_file

    names = {key.split(".")[0] for key in load_file(sgm_lora)}
    unet = {n for n in names if n.startswith("lora_unet_")}
    assert unet and all(n.split("_")[2] in ("input", "middle", "output") for n in unet), sorted(unet)[:5]
    # The tiny UNet has one layer per block, so level 1's first attention is input block 3 (SDXL: 4).
    assert "lora_unet_input_blocks_3_1_transformer_blocks_0_attn1_to_q" in names
    assert "lora_unet_middle_block_1_proj_in" in names
    assert "lora_te1_text_model_encoder_layers_0_self_attn_q_proj" in names
    assert "lora_te2_text_model_encoder_layers_0_mlp_fc1" in names
    assert len(names) == len(unet) + sum(n.startswith(("lora_te1_", "lora_te2_")) for n in names)


def test_every_key_matches_in_mixkit_and_diffusers_changes_the_image_alike(sgm_lora, tiny_sdxl_dir):
    from diffusers import StableDiffusionXLPipeline

    from mixkit.lora import LoraRequest, apply_loras, load_lora
    from mixkit.lora.matching import find_matches
    from mixkit.lora.model_index import ModelIndex

    pipe = StableDiffusionXLPipeline.from_pretrained(tiny_sdxl_dir)
    pipe.set_progress_bar_config(disable=True)
    encoders = [pipe.text_encoder, pipe.text_encoder_2]
    lora = load_lora(sgm_lora)
    matches = find_matches(lora, ModelIndex(pipe.unet, encoders))
    assert matches.problems == [] and len(matches.matched) == len(lora.modules) > 0

    def generate():
        return pipe("a red square", num_inference_steps=2, height=32, width=32, output_type="np",
                    generator=torch.Generator().manual_seed(0)).images

    base = generate()
    pipe.load_lora_weights(str(sgm_lora))
    with_diffusers = generate()
    pipe.unload_lora_weights()
    with apply_loras(pipe.unet, encoders, [LoraRequest(str(sgm_lora))], mode="merge"):
        with_mixkit = generate()
    change = abs(with_diffusers - base).max()
    assert change > 1e-2, "the trained LoRA should visibly change the image"
    assert abs(with_mixkit - with_diffusers).max() < 0.05 * change


def test_diffusers_layout_stays_available_and_locon_convs_get_sgm_names(tiny_sdxl_dir, colour_dataset, tmp_path):
    from safetensors.torch import load_file

    from mixkit.lora import load_lora
    from mixkit.lora.matching import find_matches
    from mixkit.lora.model_index import ModelIndex
    from mixkit.models.diffusion.loading import load_diffusion_model

    plain = train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, tmp_path / "d.safetensors", max_steps=1, batch_size=1,
                                  sdxl_key_layout="diffusers", train_text_encoder=False)).output
    assert "lora_unet_down_blocks_1_attentions_0_proj_in.lora_down.weight" in load_file(plain)
    locon = train_sd_lora(_config(tiny_sdxl_dir, colour_dataset, tmp_path / "c.safetensors", max_steps=1, batch_size=1,
                                  network="locon", conv_rank=2, train_text_encoder=False)).output
    tensors = load_file(locon)
    assert tensors["lora_unet_input_blocks_1_0_in_layers_2.lora_down.weight"].shape == (2, 32, 3, 3)
    assert "lora_unet_input_blocks_2_0_op.lora_up.weight" in tensors
    assert "lora_unet_output_blocks_1_2_conv.alpha" in tensors
    model = load_diffusion_model(tiny_sdxl_dir)
    for path in (plain, locon):
        lora = load_lora(path)
        matches = find_matches(lora, ModelIndex(model.unet, model.text_encoders))
        assert matches.problems == [] and len(matches.matched) == len(lora.modules)


def test_unknown_layout_is_refused_before_loading(tmp_path):
    with pytest.raises(ValueError, match="Unknown SDXL LoRA key layout 'ldm'.*'sgm', 'diffusers'"):
        train_sd_lora(_config(tmp_path / "none", tmp_path, tmp_path / "x.safetensors", sdxl_key_layout="ldm"))
