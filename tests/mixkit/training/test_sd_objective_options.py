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
