"""`mixkit interrogate`'s model flags: A1111's Settings > Interrogate options as flags, read into the settings the
web UI builds from its options (`webui.interrogate_options`), and the interrogator they set up.

Each flag is an A1111 option key without its `interrogate_` prefix (`interrogate_clip_num_beams` is
`--clip-num-beams`, `deepbooru_sort_alpha` is `--deepbooru-sort-alpha` / `--no-deepbooru-sort-alpha`), unset flags
take A1111's defaults, and a bad value is refused with the flag's name. A flag of the interrogator not chosen is
refused rather than ignored. Everything here is checked before an image is read or a model's weights load; the
interrogator (`interrogator_of`) then loads every weight before the first image, so a damaged or foreign model file
is one error naming its flag, with nothing written yet.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

from webui.cli.model_loads import loaded_now

# --model value -> the interrogator: A1111's button names ("clip", "deepbooru"), and the HTTP API's "deepdanbooru"
MODELS = {"clip": "clip", "deepbooru": "deepbooru", "deepdanbooru": "deepbooru"}
DEFAULT_CAPTION_MODEL = "mixkit-tiny-blip2"  # the web UI's caption app's default: shipped, offline
# A1111 option key -> flag, for each interrogator; `interrogate_return_ranks` is shared by both, as in A1111
CLIP_OPTION_FLAGS = {"interrogate_clip_num_beams": "--clip-num-beams",
                     "interrogate_clip_min_length": "--clip-min-length",
                     "interrogate_clip_max_length": "--clip-max-length",
                     "interrogate_clip_dict_limit": "--clip-dict-limit",
                     "interrogate_clip_skip_categories": "--clip-skip-categories"}
DEEPBOORU_OPTION_FLAGS = {"interrogate_deepbooru_score_threshold": "--deepbooru-score-threshold",
                          "deepbooru_sort_alpha": "--deepbooru-sort-alpha",
                          "deepbooru_use_spaces": "--deepbooru-use-spaces", "deepbooru_escape": "--deepbooru-escape",
                          "deepbooru_filter_tags": "--deepbooru-filter-tags"}
RANKS_FLAG = ("interrogate_return_ranks", "--return-ranks")
CLIP_MODEL_FLAGS = ("--caption-model", "--interrogate-clip-model", "--interrogate-categories-dir")
DEEPBOORU_MODEL_FLAGS = ("--deepdanbooru-models-path",)


def dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def add_interrogator_flags(parser: argparse.ArgumentParser) -> None:
    from mixkit.interrogate import DEFAULT_DICT_LIMIT, DeepbooruSettings, InterrogateSettings

    clip, tags = InterrogateSettings(), DeepbooruSettings()
    g = parser.add_argument_group("Interrogate CLIP (--model clip): a caption, then CLIP's best terms of each word "
                                  "list; Settings > Interrogate's options")
    g.add_argument("--caption-model", default=None, metavar="MODEL",
                   help=f"the captioner (a mixkit VLM name, folder or hub id; default {DEFAULT_CAPTION_MODEL}, "
                        "shipped; Salesforce/blip2-opt-2.7b for photos)")
    g.add_argument("--interrogate-clip-model", default=None, metavar="CLIP",
                   help="the CLIP that ranks the word lists (default mixkit-tiny-clip; A1111's is "
                        "openai/clip-vit-large-patch14)")
    g.add_argument("--interrogate-categories-dir", default=None, metavar="DIR",
                   help="an A1111 interrogate/ folder of *.txt word lists (default: the built-in lists)")
    g.add_argument("--clip-num-beams", type=int, default=None, metavar="N",
                   help=f"caption beam search width, 1-16 (default {clip.clip_num_beams})")
    g.add_argument("--clip-min-length", type=int, default=None, metavar="N",
                   help=f"caption minimum length in new tokens, 1-128 (default {clip.clip_min_length})")
    g.add_argument("--clip-max-length", type=int, default=None, metavar="N",
                   help=f"caption maximum length in new tokens, 1-256 (default {clip.clip_max_length})")
    g.add_argument("--clip-dict-limit", type=int, default=None, metavar="N",
                   help=f"read only the first N lines of each word list, 0: all (default {DEFAULT_DICT_LIMIT})")
    g.add_argument("--clip-skip-categories", default=None, metavar="NAMES",
                   help="comma-separated word lists not to rank (e.g. 'artists,flavors')")
    g = parser.add_argument_group("Interrogate DeepBooru (--model deepbooru): the image's Danbooru tags; "
                                  "Settings > Interrogate's deepbooru options")
    g.add_argument("--deepdanbooru-models-path", default=None, metavar="FOLDER",
                   help="the folder holding DeepDanbooru's model-resnet_custom_v3.pt (A1111's "
                        "models/torch_deepdanbooru); needed by --model deepbooru")
    g.add_argument("--deepbooru-score-threshold", type=float, default=None, metavar="X",
                   help=f"keep tags scoring at least X, 0-1 (default {tags.score_threshold})")
    g.add_argument("--deepbooru-sort-alpha", action=argparse.BooleanOptionalAction, default=None,
                   help="sort the tags by name; --no-deepbooru-sort-alpha: by falling score (default: by name)")
    g.add_argument("--deepbooru-use-spaces", action=argparse.BooleanOptionalAction, default=None,
                   help="write long_hair as 'long hair' (default: on)")
    g.add_argument("--deepbooru-escape", action=argparse.BooleanOptionalAction, default=None,
                   help="escape ( ) and \\ with a backslash, so a prompt does not read them as emphasis (default: on)")
    g.add_argument("--deepbooru-filter-tags", default=None, metavar="TAGS",
                   help="comma-separated tags to leave out (e.g. '1girl, solo')")
    parser.add_argument("--return-ranks", action="store_true", default=None,
                        help="append each term's or tag's score, as A1111's 'Include ranks of model tags': "
                             "(term:0.951)")


def chosen_model(args: argparse.Namespace) -> str:
    """"clip" or "deepbooru" from --model (ValueError listing A1111's names)."""
    model = MODELS.get(str(args.model).strip().lower())
    if model is None:
        raise ValueError(f"--model {args.model!r} is not an interrogator; use clip (A1111's Interrogate CLIP) or "
                         "deepbooru (Interrogate DeepBooru; deepdanbooru, the API's name, works too)")
    return model


def check_flags_of(args: argparse.Namespace, model: str) -> None:
    """Refuse the flags of the interrogator not chosen, naming them (they would change nothing)."""
    if model == "clip":
        other, needs = [*DEEPBOORU_OPTION_FLAGS.values(), *DEEPBOORU_MODEL_FLAGS], "--model deepbooru"
    else:
        other, needs = [*CLIP_OPTION_FLAGS.values(), *CLIP_MODEL_FLAGS], "--model clip"
    given = [flag for flag in other if getattr(args, dest(flag)) is not None]
    if given:
        raise ValueError(f"{', '.join(given)} only matter{'s' if len(given) == 1 else ''} with {needs}; leave "
                         f"{'it' if len(given) == 1 else 'them'} out or add {needs}")


def _option_values(args: argparse.Namespace, option_flags: dict[str, str]) -> dict:
    """A1111 option key -> value for the flags given (the others keep A1111's defaults)."""
    values = {key: getattr(args, dest(flag)) for key, flag in {**option_flags, RANKS_FLAG[0]: RANKS_FLAG[1]}.items()}
    skip = values.get("interrogate_clip_skip_categories")
    if skip is not None:
        values["interrogate_clip_skip_categories"] = [name.strip() for name in skip.split(",") if name.strip()]
    return {key: value for key, value in values.items() if value is not None}


def in_flag_terms(message: str, option_flags: dict[str, str]) -> str:
    """A settings check's message with A1111's option keys replaced by the flags that set them."""
    for key, flag in sorted({**option_flags, RANKS_FLAG[0]: RANKS_FLAG[1]}.items(), key=lambda item: -len(item[0])):
        message = message.replace(key, flag)
    return message


def clip_settings(args: argparse.Namespace):
    """The `InterrogateSettings` the flags give (the CLIP is kept loaded for the whole command)."""
    from webui.interrogate_options import interrogate_settings

    values = {**_option_values(args, CLIP_OPTION_FLAGS), "interrogate_keep_models_in_memory": True}
    try:
        return interrogate_settings(values)
    except ValueError as error:
        raise ValueError(in_flag_terms(str(error), CLIP_OPTION_FLAGS)) from None


def deepbooru_settings(args: argparse.Namespace):
    """The `DeepbooruSettings` the flags give."""
    from webui.interrogate_options import deepbooru_settings as settings_of

    try:
        return settings_of(_option_values(args, DEEPBOORU_OPTION_FLAGS))
    except ValueError as error:
        raise ValueError(in_flag_terms(str(error), DEEPBOORU_OPTION_FLAGS)) from None


@dataclass(frozen=True)
class CheckedFlags:
    """What the flags ask for, checked: the interrogator ("clip" or "deepbooru") and its settings."""

    model: str
    settings: Any  # InterrogateSettings or DeepbooruSettings


def check_interrogate_flags(args: argparse.Namespace) -> CheckedFlags:
    """Every flag checked before an image is read or a model loads (ValueError / FileNotFoundError naming the flag):
    the interrogator, the flags of the other one, the settings, the device, and the models' names and folders (the
    word lists are read, the tagger file is found; no weights)."""
    from webui.cli.generate_checks import check_device

    model = chosen_model(args)
    check_flags_of(args, model)
    check_device(args.device)
    if model == "clip":
        settings = clip_settings(args)
        _clip_ranker(args, settings)
        if not _caption_model(args).strip():
            raise ValueError("--caption-model must name a captioner (a mixkit VLM name, folder or hub id), got an "
                             "empty name")
    else:
        settings = deepbooru_settings(args)
        _deepbooru_file(args)
    return CheckedFlags(model, settings)


@dataclass(frozen=True)
class Answer:
    """One image's answer: the text A1111 gives, and its comma parts (DeepBooru's tags; CLIP's caption, then each
    ranked term), which `--existing append` adds to a caption file one by one."""

    text: str
    parts: tuple[str, ...]


def interrogator_of(args: argparse.Namespace, checked: CheckedFlags) -> Callable[[object], Answer]:
    """`image -> Answer` of the checked interrogator, its weights loaded now (ModelLoadError naming the flag), so a
    model that cannot load is reported before the first image and before any caption file is written; they stay
    loaded for the rest of the command."""
    if checked.model == "clip":
        return _clip_interrogator(args, checked.settings)
    from webui.cli.deepbooru_tagger import deepbooru_tagger

    tags = deepbooru_tagger(args.deepdanbooru_models_path, args.device, checked.settings)
    tags.load()

    def interrogate(image) -> Answer:
        text = tags(image)
        return Answer(text, tuple(part for part in text.split(", ") if part))
    return interrogate


def _caption_model(args: argparse.Namespace) -> str:
    return args.caption_model if args.caption_model is not None else DEFAULT_CAPTION_MODEL


def _clip_ranker(args: argparse.Namespace, settings):
    """The `ClipInterrogator` of the flags (no weights yet), its word lists read and skip names checked."""
    from mixkit.interrogate import ClipInterrogator
    from mixkit.interrogate.interrogator import DEFAULT_CLIP

    try:
        ranker = ClipInterrogator(args.interrogate_clip_model or DEFAULT_CLIP, args.interrogate_categories_dir,
                                  device=args.device or "cpu")
    except ValueError as error:
        flag = "--interrogate-categories-dir" if "categories" in str(error) else "--interrogate-clip-model"
        raise ValueError(f"{flag}: {error}") from None
    try:
        ranker.categories(settings)
    except ValueError as error:
        message = in_flag_terms(str(error), CLIP_OPTION_FLAGS)
        about_the_lists = message == str(error)  # no option named: an empty or unreadable list of the folder
        raise ValueError(f"--interrogate-categories-dir: {message}" if about_the_lists else message) from None
    return ranker


def _clip_interrogator(args: argparse.Namespace, settings) -> Callable[[object], str]:
    """Interrogate CLIP as the server answers it (`webui.interrogation.interrogate_now`): the caption app's caption
    with the Settings' beams and lengths, then the ranked terms."""
    from appflow import Appflow
    from mixkit.interrogate import join_terms
    from webui.interrogation import CAPTION_APP

    ranker = _clip_ranker(args, settings)
    try:  # the captioner's name is checked against its role here (configs only)
        captioner = Appflow(app=CAPTION_APP, models={"captioner": _caption_model(args)}, device=args.device or "cpu")
    except (ValueError, FileNotFoundError) as error:  # not a captioner; no such folder or hub id
        raise ValueError(f"--caption-model {_caption_model(args)!r}: {error}") from None
    loaded_now("--caption-model", _caption_model(args), captioner.load_models)
    loaded_now("--interrogate-clip-model", ranker.clip_source, ranker.load)

    def interrogate(image) -> Answer:
        caption = captioner(image=image, **settings.caption_options())["text"]
        terms = ranker.terms(image, settings)
        # each term formatted as join_terms writes it, so the parts are the text's own pieces
        parts = [caption, *(join_terms("", [term], settings.return_ranks)[len(", "):] for term in terms)]
        return Answer(join_terms(caption, terms, settings.return_ranks), tuple(part for part in parts if part))
    return interrogate


def _deepbooru_file(args: argparse.Namespace) -> None:
    """The tagger file of --deepdanbooru-models-path found (FileNotFoundError naming the folder and the download)."""
    from mixkit.interrogate import find_deepbooru_file
    from mixkit.interrogate.deepbooru import A1111_FILE_NAME, A1111_FOLDER

    if args.deepdanbooru_models_path is None:
        raise ValueError(f"--model deepbooru needs the DeepDanbooru tagger: add --deepdanbooru-models-path FOLDER, "
                         f"the folder holding {A1111_FILE_NAME} (A1111's {A1111_FOLDER})")
    find_deepbooru_file(args.deepdanbooru_models_path)
