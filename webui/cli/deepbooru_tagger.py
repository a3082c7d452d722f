"""A1111's Interrogate DeepBooru for the commands that append or write its tags (`mixkit interrogate --model
deepbooru`, `mixkit img2img --loopback --loopback-interrogate deepbooru`, `mixkit extras --caption deepbooru`), from
`--deepdanbooru-models-path`.

The command line has no Settings page, so the tags are formatted under A1111's default DeepBooru settings
(threshold 0.5, sorted by name, spaces for underscores, brackets escaped, no ranks) unless the command takes them as
flags (`mixkit interrogate --model deepbooru`). The tagger file is found when the flags are checked; its network is
loaded by the command once every check has passed (`DeepbooruTagger.load`), before the first image, so a damaged
file is one error naming the flag with nothing written yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLAG = "--deepdanbooru-models-path"


@dataclass(frozen=True)
class DeepbooruTagger:
    """`image -> tags` from one tagger file, formatted under `settings` (a `DeepbooruSettings`); the network stays
    loaded for the rest of the command (A1111 keeps it on the CPU between uses)."""

    file: Path
    model: Any  # the process's shared DeepbooruModel of the file's folder
    settings: Any

    def load(self, nothing_done: str = "no image was interrogated") -> None:
        """Load the network now (`webui.cli.model_loads.ModelLoadError` naming --deepdanbooru-models-path and the file
        when it cannot be), instead of at the first image."""
        from webui.cli.model_loads import loaded_now

        loaded_now(FLAG, self.file, self.model.load, nothing_done)

    def __call__(self, image) -> str:
        from pipelines.deepbooru import interrogate_deepbooru

        return interrogate_deepbooru(image, self.settings, model=self.model, keep_in_memory=True)


def deepbooru_tagger(folder: str, device: str | None, settings=None) -> DeepbooruTagger:
    """The tagger in `folder` under `settings` (None: A1111's defaults), its file found now, so a wrong folder fails
    before any model loads or file is written (FileNotFoundError naming the folder and A1111's download); the
    network loads at `load()`, or at the first image without it."""
    from mixkit.interrogate import DeepbooruSettings, find_deepbooru_file, shared_deepbooru_model

    file = find_deepbooru_file(folder)
    return DeepbooruTagger(file, shared_deepbooru_model(folder, device=device or "cpu"),
                           settings or DeepbooruSettings())
