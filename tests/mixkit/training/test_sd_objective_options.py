"""Options both SD trainers share reach the parts that use them."""

from __future__ import annotations

import pytest

from mixkit.training.sd_lora_config import SDLoraTrainingConfig


def test_the_bucketing_options_reach_the_dataset_settings():
    from mixkit.data import BucketSettings
    from mixkit.training.sd_finetune_config import SDFinetuneConfig

    for config_class, output in ((SDLoraTrainingConfig, "o.safetensors"), (SDFinetuneConfig, "o")):
        config = config_class(model="m", dataset="d", output=output, bucketing=True, bucket_step=32,
                              min_bucket_reso=128, max_bucket_reso=768, bucket_no_upscale=True)
        config.check()
        assert config.bucket_settings() == BucketSettings(True, step=32, min_side=128, max_side=768, no_upscale=True)
        with pytest.raises(ValueError, match="bucket_no_upscale sizes the buckets; it needs bucketing: true"):
            config_class(model="m", dataset="d", output=output, bucket_no_upscale=True).check()


@pytest.mark.parametrize("settings, message", [
    (dict(noise_offset_random_strength=True), "change the noise offset; set noise_offset"),
    (dict(adaptive_noise_scale=0.01), "change the noise offset; set noise_offset"),
    (dict(noise_offset=0.1, adaptive_noise_scale=float("nan")), "adaptive_noise_scale must be a number"),
    (dict(ip_noise_gamma_random_strength=True), "scales ip_noise_gamma; set ip_noise_gamma"),
])
def test_the_noise_variants_need_what_they_vary(settings, message):
    with pytest.raises(ValueError, match=message):
        SDLoraTrainingConfig(model="m", dataset="d", output="o.safetensors", **settings).check()


def test_the_noise_variants_reach_the_trainer_and_repeat_exactly(tiny_sd1_dir, colour_dataset, tmp_path):
    from mixkit.training.sd_lora_trainer import train_sd_lora

    def run(name, **settings):
        config = SDLoraTrainingConfig(model=str(tiny_sd1_dir), dataset=str(colour_dataset),
                                      output=str(tmp_path / f"{name}.safetensors"), resolution=32, batch_size=2,
                                      max_steps=3, learning_rate=1e-2, rank=2, alpha=2.0, seed=1, noise_offset=0.1,
                                      ip_noise_gamma=0.1, **settings)
        return train_sd_lora(config).losses

    varied = dict(noise_offset_random_strength=True, adaptive_noise_scale=0.01, ip_noise_gamma_random_strength=True)
    first, again, plain = run("a", **varied), run("b", **varied), run("c")
    assert first == again and first != plain
