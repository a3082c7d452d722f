"""A1111's Settings > Interrogate options (`/sdapi/v1/options` keys) and the `InterrogateSettings` and
`DeepbooruSettings` they make.

The bounds are `mixkit.interrogate.InterrogateSettings`'; each key is checked alone here by building the settings
with that one value (the min/max length pair is checked together in `webui.options.combined_checks`).
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from mixkit.interrogate import DeepbooruSettings, InterrogateSettings

PREFIX = "interrogate_"
INTERROGATE_OPTION_DEFAULTS = {PREFIX + name: (list(value) if isinstance(value, tuple) else value)
                               for name, value in asdict(InterrogateSettings()).items()}
"""A1111's keys with mixkit's defaults (A1111's, except interrogate_clip_min_length: see InterrogateSettings)."""
INTERROGATE_OPTION_KEYS = tuple(INTERROGATE_OPTION_DEFAULTS)
LENGTH_KEYS = (PREFIX + "clip_min_length", PREFIX + "clip_max_length")


def interrogate_settings(values: dict[str, Any]) -> InterrogateSettings:
    """The settings the option values hold (missing keys at their defaults); ValueError naming a bad one."""
    given = {**INTERROGATE_OPTION_DEFAULTS, **{key: values[key] for key in INTERROGATE_OPTION_KEYS if key in values}}
    skip = given[PREFIX + "clip_skip_categories"]
    if isinstance(skip, list):  # JSON has no tuples
        given[PREFIX + "clip_skip_categories"] = tuple(skip)
    return InterrogateSettings(**{field.name: given[PREFIX + field.name] for field in fields(InterrogateSettings)})


def check_interrogate_option(key: str):
    """The `SETTABLE` check of one key: its value alone within its bounds (the length pair is checked together)."""
    def check(value: Any) -> Any:
        alone = {key: value}
        if key in LENGTH_KEYS:  # the other length at its widest, so only this value's own bounds apply
            alone.update({LENGTH_KEYS[0]: 1, LENGTH_KEYS[1]: 256, key: value})
        settings = interrogate_settings(alone)
        checked = getattr(settings, key[len(PREFIX):])
        return list(checked) if isinstance(checked, tuple) else checked
    return check


# A1111's DeepBooru keys (Settings > Interrogate) -> `mixkit.interrogate.DeepbooruSettings` fields; the ranks come
# from `interrogate_return_ranks`, shared with Interrogate CLIP as in A1111
DEEPBOORU_OPTION_FIELDS = {"interrogate_deepbooru_score_threshold": "score_threshold",
                           "deepbooru_sort_alpha": "sort_alpha", "deepbooru_use_spaces": "use_spaces",
                           "deepbooru_escape": "escape", "deepbooru_filter_tags": "filter_tags"}
DEEPBOORU_OPTION_DEFAULTS = {key: getattr(DeepbooruSettings(), name) for key, name in DEEPBOORU_OPTION_FIELDS.items()}


def deepbooru_settings(values: dict[str, Any]) -> DeepbooruSettings:
    """The DeepBooru settings the option values hold (missing keys at A1111's defaults); ValueError naming a bad one."""
    given = {**DEEPBOORU_OPTION_DEFAULTS, **{key: values[key] for key in DEEPBOORU_OPTION_FIELDS if key in values}}
    return DeepbooruSettings(**{name: given[key] for key, name in DEEPBOORU_OPTION_FIELDS.items()},
                             return_ranks=values.get(PREFIX + "return_ranks", False))


def check_deepbooru_option(key: str):
    """The `SETTABLE` check of one DeepBooru key: the settings built with that value alone."""
    def check(value: Any) -> Any:
        return getattr(deepbooru_settings({key: value}), DEEPBOORU_OPTION_FIELDS[key])
    return check
