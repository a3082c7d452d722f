"""A1111's Interrogate DeepBooru for the commands that append or write its tags (`mixkit img2img --loopback
--loopback-interrogate deepbooru`, `mixkit extras --caption deepbooru`), from `--deepdanbooru-models-path`.

The command line has no Settings page, so the tags are formatted under A1111's default DeepBooru settings
(threshold 0.5, sorted by name, spaces for underscores, brackets escaped, no ranks) unless the command takes them as
flags (`mixkit interrogate --model deepbooru`)."""

from __future__ import annotations

from typing import Callable


def deepbooru_tagger(folder: str, device: str | None, settings=None) -> Callable[[object], str]:
    """`image -> tags` from the tagger in `folder`, formatted under `settings` (a `DeepbooruSettings`; None: A1111's
    defaults). The file is found now, so a wrong folder fails before any model loads or file is written
    (FileNotFoundError naming the folder and A1111's download); the network loads at the first image and stays
    loaded for the rest of the command (A1111 keeps it on the CPU between uses)."""
    from mixkit.interrogate import DeepbooruSettings, find_deepbooru_file, shared_deepbooru_model
    from pipelines.deepbooru import interrogate_deepbooru

    find_deepbooru_file(folder)
    tagger, settings = shared_deepbooru_model(folder, device=device or "cpu"), settings or DeepbooruSettings()

    def tags(image) -> str:
        return interrogate_deepbooru(image, settings, model=tagger, keep_in_memory=True)
    return tags
