"""Vision-language tasks on mixkit's VLM adapters: captioning / VQA, and zero-shot classification."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any

from appflow.option_specs import OptionSpec
from appflow.task import Port, Task, register_task

CAPTION_GENERATION_OPTIONS = {
    # name -> default; None: the checkpoint's own generation config decides (passed to `generate` only when set)
    "max_new_tokens": 20, "min_length": None, "num_beams": 1, "do_sample": False, "top_p": None, "temperature": None,
    "repetition_penalty": None, "length_penalty": None, "num_return_sequences": 1, "seed": -1, "top_k": None,
}
"""LAVIS' `generate(use_nucleus_sampling, num_beams, max_length, min_length, top_p, repetition_penalty,
num_captions)` and transformers' `generate` options. Greedy (num_beams=1, do_sample=False) by default, so a
batch of images gives what one call per image gives."""

CAPTION_OPTION_SPECS = {
    "max_new_tokens": OptionSpec("int", 1, 1024, 1, label="Caption length (new tokens)"),
    "min_length": OptionSpec("int", 0, 1024, 1, auto=True, label="Fewest new tokens"),
    "num_beams": OptionSpec("int", 1, 64, 1, label="Beams"),
    "do_sample": OptionSpec("bool", label="Sample (nucleus) instead of greedy/beam search"),
    "top_p": OptionSpec("float", 0, 1, 0.01, auto=True, low_open=True, label="Top p"),
    "temperature": OptionSpec("float", 0, None, 0.05, auto=True, low_open=True, label="Temperature"),
    "repetition_penalty": OptionSpec("float", 0, None, 0.05, auto=True, low_open=True, label="Repetition penalty"),
    "length_penalty": OptionSpec("float", None, None, 0.1, auto=True, label="Length penalty"),
    "num_return_sequences": OptionSpec("int", 1, 64, 1, label="Captions per image"),
    "seed": OptionSpec("seed", -1, None, 1, label="Seed (-1: not seeded)"),
    "top_k": OptionSpec("int", 0, None, 1, auto=True, label="Top k (0: off)"),
}
"""The captioning options' types and bounds; `check_caption_generation` checks with these bounds."""

CAPTION_OPTION_ALIASES = {
    # LAVIS' names (lavis/models/blip2_models/blip2_opt.py `generate`). Its BLIP-2 generates from embeddings only,
    # so transformers counts neither its max_length nor its min_length over the prompt: both are new tokens.
    "max_length": "max_new_tokens",
    "use_nucleus_sampling": "do_sample",
    "num_captions": "num_return_sequences",
}
"""Other spellings of the captioning options -> the option; one option under two spellings is an error."""

DECODE_STRATEGIES = {"greedy_search": False, "sampling": True, "beam_search": False}
"""PaddleNLP's `decode_strategy` (PaddleMIX's MiniGPT-4 `generate_kwargs`) -> `do_sample`; beam search also needs
num_beams > 1, which PaddleNLP takes from the same dict."""


def options_from_generate_kwargs(given: dict[str, Any]) -> dict[str, Any]:
    """The captioning options PaddleMIX's `generate_kwargs` dict stands for: its `decode_strategy` as `do_sample`
    (and, for beam search, a check that num_beams > 1); every other key is an option or an option's alias as is."""
    options = dict(given)
    if "decode_strategy" not in options:
        return options
    strategy = options.pop("decode_strategy")
    if strategy not in DECODE_STRATEGIES:
        raise ValueError(f"Task 'image_caption': generate_kwargs decode_strategy must be one of "
                         f"{sorted(DECODE_STRATEGIES)} (PaddleNLP's), got {strategy!r}.")
    sampling = [name for name in ("do_sample", "use_nucleus_sampling") if name in options]
    if sampling:
        raise TypeError(f"Task 'image_caption': generate_kwargs gives decode_strategy={strategy!r} and "
                        f"{sampling[0]}={options[sampling[0]]!r}, which both choose sampling or not; pass only one.")
    beams = options.get("num_beams", 1)
    if strategy == "beam_search" and not (_is_int(beams) and beams > 1):
        raise ValueError(f"Task 'image_caption': generate_kwargs decode_strategy='beam_search' needs num_beams > 1 "
                         f"in the same dict, got num_beams={beams!r}.")
    if strategy == "greedy_search" and beams != 1:
        raise ValueError(f"Task 'image_caption': generate_kwargs decode_strategy='greedy_search' keeps one candidate, "
                         f"but num_beams={beams!r}; use decode_strategy='beam_search' or drop num_beams.")
    options["do_sample"] = DECODE_STRATEGIES[strategy]
    return options


def _is_int(value: Any) -> bool:
    """An integer, numpy's included (np.int64 is no int subclass), as the other apps' options take them."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A finite real number, numpy's included (NaN and infinities pass no range check, so they are refused here)."""
    from appflow.task import is_finite_number

    return is_finite_number(value)


def check_caption_generation(options: dict[str, Any]) -> None:
    """Raise ValueError naming the option for a generation value `generate` would refuse or misread."""
    def refuse(name: str, wanted: str) -> None:
        raise ValueError(f"Task 'image_caption': {name} must be {wanted}, got {options[name]!r}.")

    specs = CAPTION_OPTION_SPECS
    tokens = options["max_new_tokens"]
    low, high = specs["max_new_tokens"].low, specs["max_new_tokens"].high
    if not _is_int(tokens) or not low <= tokens <= high:
        refuse("max_new_tokens", f"an integer in [{low}, {high}]")
    least = options["min_length"]
    if least is not None and (not _is_int(least) or not specs["min_length"].low <= least <= tokens):
        refuse("min_length", f"None or an integer in [{specs['min_length'].low}, max_new_tokens={tokens}] (the fewest "
                             "new tokens)")
    for name in ("num_beams", "num_return_sequences"):
        low, high = specs[name].low, specs[name].high
        if not _is_int(options[name]) or not low <= options[name] <= high:
            refuse(name, f"an integer in [{low}, {high}]")
    if not isinstance(options["do_sample"], bool):
        refuse("do_sample", "True or False")
    top_p = specs["top_p"]
    if options["top_p"] is not None and (not _is_number(options["top_p"])
                                         or not top_p.low < options["top_p"] <= top_p.high):
        refuse("top_p", f"None or a number in ({top_p.low}, {top_p.high}]")
    for name in ("temperature", "repetition_penalty"):
        if options[name] is not None and (not _is_number(options[name]) or options[name] <= specs[name].low):
            refuse(name, f"None or a number above {specs[name].low}")
    if options["length_penalty"] is not None and not _is_number(options["length_penalty"]):
        refuse("length_penalty", "None or a number")
    if options["top_k"] is not None and (not _is_int(options["top_k"]) or options["top_k"] < specs["top_k"].low):
        refuse("top_k", f"None or an integer >= {specs['top_k'].low} (the k most likely tokens sampled from; 0 turns "
                        "it off)")
    if not _is_int(options["seed"]) or options["seed"] < specs["seed"].low:
        refuse("seed", "-1 (not seeded) or a non-negative integer")
    if options["num_return_sequences"] > 1:
        from mixkit.models.vlm.generative import check_return_sequences

        try:
            check_return_sequences({name: _plain(value) for name, value in options.items()})
        except ValueError as error:
            raise ValueError(f"Task 'image_caption': {error}.") from None


def generate_keywords(options: dict[str, Any]) -> dict[str, Any]:
    """The adapter's `generate` keywords: the set options, `min_length` as new tokens (LAVIS' meaning: its
    BLIP-2 generates from embeddings, so its min_length never counts the prompt)."""
    keywords = {name: _plain(value) for name, value in options.items()
                if name in CAPTION_GENERATION_OPTIONS and name != "seed" and value is not None}
    if "min_length" in keywords:
        keywords["min_new_tokens"] = keywords.pop("min_length")
    if keywords.get("num_return_sequences") == 1:
        del keywords["num_return_sequences"]
    return keywords


def _plain(value: Any) -> Any:
    """A numpy number as the Python number it stands for (transformers' generation config validates and serialises
    plain ints and floats); other values unchanged."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


SAMPLING_LOCK = threading.Lock()
"""Held for the whole of every sampled `generate`, process-wide. transformers samples from torch's global
generator (its `generate` takes no `torch.Generator`), so a seeded call gives its text only if no other thread
draws from that generator meanwhile, and two threads' fork/seed/restore steps must not interleave (measured:
11 of 12 seeded calls from two threads sharing one app gave other texts, and the caller's stream was lost).
Greedy and beam search draw nothing and run unlocked; sampled calls run one at a time."""


@contextmanager
def sampling_generator(seed: int, sampling: bool, device: Any):
    """Around one `generate`: sampled calls hold `SAMPLING_LOCK`; a seed (>= 0) forks torch's generators and seeds
    them, so the text follows the seed and the caller's streams are left as they were."""
    if not sampling:
        yield
        return
    import torch

    with SAMPLING_LOCK:
        if seed < 0:
            yield
            return
        device = torch.device(device)
        if device.type == "cpu":
            # Only the CPU generator: torch.manual_seed would also reseed every GPU, which devices=[] does not restore.
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(seed)
                yield
            return
        count = torch.get_device_module(device.type).device_count()
        with torch.random.fork_rng(devices=list(range(count)), device_type=device.type):
            torch.manual_seed(seed)  # every device of the model's type, all restored by the fork
            yield


def question_image_pairs(image: Any, question: str | list[str]) -> tuple[list, list[str]]:
    """(images, questions) of equal length: lists pair item by item, a single image or question is repeated."""
    images = list(image) if isinstance(image, (list, tuple)) else [image]
    questions = list(question) if isinstance(question, (list, tuple)) else [question]
    if len(images) == 1 < len(questions):
        images = images * len(questions)
    if len(questions) == 1 < len(images):
        questions = questions * len(images)
    if len(images) != len(questions):
        raise ValueError(f"Task 'image_caption': {len(images)} images and {len(questions)} questions; pass one "
                         "question per image, one question for all the images, or one image for all the questions.")
    return images, questions


@register_task
class ImageCaptionTask(Task):
    """A caption (optionally continuing `prompt`), or with `question` an answer (VQA), for one image or a batch."""

    name = "image_caption"
    description = "BLIP-2 / InstructBLIP / LLaVA caption or VQA"
    # A batch of questions pairs with the batch of images, one question each (LAVIS `predict_answers`, mixkit's
    # `answer(images, questions)`); one question is asked of every image, and one image gets every question.
    inputs = {"image": Port("image", batch=True), "prompt": Port("text", optional=True),
              "question": Port("text", optional=True, batch=True)}
    outputs = {"text": "text", "texts": "texts"}  # text: the first row's best text; texts: all, row by row
    main_output = "text"
    models = {"captioner": "vlm-generative"}
    default_models = {"captioner": "mixkit-tiny-blip2"}  # shipped, offline; Salesforce/blip2-opt-2.7b for real photos
    options = dict(CAPTION_GENERATION_OPTIONS)
    option_specs = CAPTION_OPTION_SPECS
    option_aliases = CAPTION_OPTION_ALIASES
    options_dict = "generate_kwargs"  # PaddleMIX's MiniGPT-4 task reads its generation settings from this dict

    @classmethod
    def options_from_dict(cls, given: dict[str, Any]) -> dict[str, Any]:
        return options_from_generate_kwargs(given)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        check_caption_generation(options)

    @classmethod
    def check_inputs(cls, inputs: dict[str, Any]) -> None:
        if inputs.get("prompt") is not None and inputs.get("question") is not None:
            raise ValueError("Task 'image_caption': pass either prompt (caption prefix) or question (VQA), not both.")
        if inputs.get("image") is not None and inputs.get("question") is not None:
            question_image_pairs(inputs["image"], inputs["question"])

    def run(self, models, options, *, image, prompt: str | None = None,
            question: str | list[str] | None = None) -> dict[str, Any]:
        self.check_inputs({"prompt": prompt, "question": question, "image": image})
        images = list(image) if isinstance(image, (list, tuple)) else [image]
        keywords = generate_keywords(options)
        vlm = models.get("captioner")
        with sampling_generator(int(options["seed"]), options["do_sample"], getattr(vlm, "device", "cpu")):
            if question is not None:
                produced = vlm.answer(*question_image_pairs(image, question), **keywords)
            else:
                produced = vlm.caption(images, prompt, **keywords)
        texts = [text for item in produced for text in (item if isinstance(item, list) else [item])]
        return {"text": texts[0], "texts": texts}


@register_task
class ZeroShotClassificationTask(Task):
    """Probabilities of `labels` for the image (CLIP: softmax; SigLIP: independent sigmoids)."""

    name = "zero_shot_classification"
    description = "CLIP / SigLIP zero-shot classification"
    # A list of images is scored in one call, as `classify(images, labels)` and transformers' zero-shot pipeline take.
    inputs = {"image": Port("image", batch=True), "labels": Port("texts")}
    outputs = {"scores": "label_scores", "scores_per_image": "label_scores_list"}  # scores: the first image's
    main_output = "scores"
    models = {"classifier": "vlm-contrastive"}
    default_models = {"classifier": "mixkit-tiny-clip"}  # shipped, offline; openai/clip-vit-base-patch32 for real photos
    options = {"templates": None}  # None: the model family's default prompt templates

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        templates = options["templates"]
        if templates is None:
            return
        if isinstance(templates, str) or not isinstance(templates, (list, tuple)) or not templates:
            raise ValueError(f"Task 'zero_shot_classification': templates must be None (the family's defaults) or a "
                             f"non-empty list of strings such as ['a photo of a {{}}.'], got {templates!r}.")
        from mixkit.models.vlm.templates import check_template

        for template in templates:
            try:
                check_template(template)
            except ValueError as error:
                raise ValueError(f"Task 'zero_shot_classification': {error}.") from None

    @classmethod
    def check_inputs(cls, inputs: dict[str, Any]) -> None:
        labels = inputs.get("labels")
        if labels is None:
            return
        if not labels:
            raise ValueError("Task 'zero_shot_classification': labels is an empty list; pass at least one label.")
        blank = [index for index, label in enumerate(labels) if isinstance(label, str) and not label.strip()]
        if blank:
            raise ValueError(f"Task 'zero_shot_classification': labels must be non-empty text, item {blank[0]} is "
                             f"{labels[blank[0]]!r}; each label names a class to score.")
        repeated = sorted({label for label in labels if list(labels).count(label) > 1})
        if repeated:
            raise ValueError(f"Task 'zero_shot_classification': labels must be distinct, {repeated} repeat; "
                             "each label gets one probability.")

    def run(self, models, options, *, image, labels: list[str]) -> dict[str, Any]:
        self.check_inputs({"labels": labels})
        images = list(image) if isinstance(image, (list, tuple)) else [image]
        classifier = models.get("classifier")
        if options["templates"] is None:  # the family's own (CLIP: the ImageNet ensemble, SigLIP: its one prompt)
            per_image = classifier.classify(images, list(labels))
        else:
            per_image = classifier.classify(images, list(labels), options["templates"])
        per_image = [{label: float(p) for label, p in scores.items()} for scores in per_image]
        return {"scores": per_image[0], "scores_per_image": per_image}
