"""The crafted DeepBooru tagger of the interrogation tests (API, CLI lines, CLI caption files): its score for each tag
is exactly sigmoid(its logit) on every image, so every answer is known to the character."""

from pathlib import Path

from mixkit.testing.tiny_deepbooru import crafted_deepbooru_state, save_deepbooru

TAGS = ["solo", "1girl", "rating:safe", "long_hair", "hat_(object)", "smile"]
LOGITS = [2.0, 3.0, 5.0, 0.5, -1.0, 0.2]  # scores 0.881, 0.953, 0.993, 0.622, 0.269, 0.550


def write_crafted_deepbooru(folder: Path) -> Path:
    """`folder` as A1111's models/torch_deepdanbooru, holding the crafted tagger; returns `folder`."""
    save_deepbooru(folder / "model-resnet_custom_v3.pt", crafted_deepbooru_state(LOGITS), TAGS)
    return folder
