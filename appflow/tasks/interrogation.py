"""CLIP interrogation as an AppFlow task: a caption followed by the best terms of word lists (A1111's Interrogate
CLIP), so the `clip_interrogation` app gives what `POST /sdapi/v1/interrogate` gives, from Python or a chain."""

from __future__ import annotations

from typing import Any

from appflow.task import Port, Task, register_task


@register_task
class ClipInterrogationTask(Task):
    """`caption, term, term`: the terms are each word list's best lines for the image, ranked by CLIP."""

    name = "clip_interrogation"
    description = "CLIP-ranked terms from word lists appended to a caption (A1111's Interrogate CLIP)"
    inputs = {"image": Port("image"), "caption": Port("text", optional=True)}
    outputs = {"text": "text", "terms": "label_scores"}  # terms: term -> probability, in the order appended
    main_output = "text"
    models = {"clip": "vlm-contrastive"}
    default_models = {"clip": "mixkit-tiny-clip"}  # shipped, offline; openai/clip-vit-large-patch14 is A1111's
    # A1111's Settings > Interrogate names (without `interrogate_`), and the folder of word lists (None: built-in)
    options = {"categories_dir": None, "return_ranks": False, "clip_dict_limit": 1500, "clip_skip_categories": ()}

    @classmethod
    def settings_from(cls, options: dict[str, Any]):
        from mixkit.interrogate import InterrogateSettings

        skip = options["clip_skip_categories"]
        return InterrogateSettings(return_ranks=options["return_ranks"], clip_dict_limit=options["clip_dict_limit"],
                                   clip_skip_categories=tuple(skip) if isinstance(skip, list) else skip,
                                   keep_models_in_memory=True)  # AppFlow's model cache owns the CLIP

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        from mixkit.interrogate import ClipInterrogator

        try:
            settings = cls.settings_from(options)
            ClipInterrogator(categories_dir=options["categories_dir"]).categories(settings)  # folder, lists, skips
        except (TypeError, ValueError) as error:
            raise ValueError(f"Task 'clip_interrogation': {error}") from None

    def run(self, models, options, *, image, caption: str | None = None) -> dict[str, Any]:
        from mixkit.interrogate import ClipInterrogator, join_terms

        settings = self.settings_from(options)
        if getattr(self, "_interrogator", None) is None or self._interrogator_folder != options["categories_dir"]:
            # one per task and folder: its text-embedding cache lives as long as the flow
            self._interrogator = ClipInterrogator(categories_dir=options["categories_dir"],
                                                  loader=lambda source: models.get("clip"))
            self._interrogator_folder = options["categories_dir"]
        terms = self._interrogator.terms(image, settings)
        return {"text": join_terms(caption or "", terms, settings.return_ranks).removeprefix(", "),
                "terms": dict(terms)}
