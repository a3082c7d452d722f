"""The captioning and zero-shot tasks: generation options, image batches, values checked before loading.

appflow hunt findings 5 and 7. References: LAVIS `Blip2OPT.generate(use_nucleus_sampling, num_beams,
max_length, min_length, top_p, repetition_penalty, num_captions)` and transformers' `generate(**kwargs)`
take these options; transformers' image-to-text pipeline and LAVIS caption a batch of images in one call.
Each app result is compared with mixkit's VLM adapter called by hand on the same weights.
"""

from __future__ import annotations

import pytest
import torch

from appflow import Appflow, ModelCache
from appflow.tasks.vision_language import generate_keywords

TOKENS = dict(max_new_tokens=6)


@pytest.fixture(scope="module")
def shipped():
    """The app's default captioner, mixkit-tiny-blip2: trained on shape renders, so options visibly change captions."""
    return Appflow("image2text_generation", max_new_tokens=16)


@pytest.fixture
def circle():
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (64, 64), (40, 60, 220))
    ImageDraw.Draw(image).ellipse((16, 16, 48, 48), fill=(220, 30, 30))
    return image


@pytest.mark.parametrize("options", [dict(num_beams=3), dict(num_beams=3, length_penalty=0.5),
                                     dict(repetition_penalty=1.5), dict(min_length=5)])
def test_generation_options_reach_the_model_as_given(captioner, vlm, photo, options):
    by_hand = dict(options)
    if "min_length" in by_hand:  # LAVIS' min_length counts new tokens only: transformers' min_new_tokens
        by_hand["min_new_tokens"] = by_hand.pop("min_length")
    assert captioner(image=photo, **options)["text"] == vlm.caption([photo], **by_hand, **TOKENS)[0]


def test_repetition_penalty_changes_the_text(captioner, photo):
    assert captioner(image=photo, repetition_penalty=1.5)["text"] != captioner(image=photo)["text"]


def test_min_length_counts_new_tokens_as_lavis_does(shipped, circle):
    plain = shipped(image=circle)["text"]
    longer = shipped(image=circle, min_length=14)["text"]
    assert longer.startswith(plain) and len(longer.split()) >= 14 > len(plain.split())
    assert generate_keywords({"min_length": 6, "num_return_sequences": 1, "seed": 3}) == {"min_new_tokens": 6}


def test_numpy_numbers_are_taken_as_the_python_numbers_they_stand_for(shipped, circle):
    """As the other apps' options and the README promise (np.int64(3) used to be refused as 'not an integer')."""
    import numpy as np

    numpy_options = dict(num_beams=np.int64(3), num_return_sequences=np.int32(2), top_p=np.float32(0.5),
                         repetition_penalty=np.float64(1.2), min_length=np.int64(2))
    python_options = {name: value.item() for name, value in numpy_options.items()}
    assert shipped(image=circle, **numpy_options)["texts"] == shipped(image=circle, **python_options)["texts"]
    built = Appflow("image2text_generation", max_new_tokens=np.int64(16), **numpy_options)
    assert built(image=circle)["texts"] == shipped(image=circle, **python_options)["texts"]
    keywords = generate_keywords({**built.tasks["caption"].settings, "seed": np.int64(3)})
    assert type(keywords["num_beams"]) is int and type(keywords["top_p"]) is float  # plain, for transformers


def test_a_list_of_images_is_captioned_as_one_batch(shipped, circle, second):
    result = shipped(image=[circle, second])
    assert result["texts"] == [shipped(image=circle)["text"], shipped(image=second)["text"]]  # batch = singles
    assert result["text"] == result["texts"][0]


def test_a_list_of_images_with_one_question(captioner, vlm, photo, second):
    answered = captioner(image=[photo, second], question="what is it?")
    assert answered["texts"] == vlm.answer([photo, second], ["what is it?"] * 2, **TOKENS)


def test_several_captions_per_image_come_image_by_image_best_first(shipped, circle, second):
    result = shipped(image=[circle, second], num_beams=3, num_return_sequences=2)
    assert len(result["texts"]) == 4 and result["texts"][0] != result["texts"][1]
    assert result["texts"][0::2] == shipped(image=[circle, second], num_beams=3)["texts"]  # the best of each image
    assert result["text"] == result["texts"][0]


def test_sampling_follows_the_seed_and_leaves_the_global_generator_alone(shipped, circle):
    sampled = dict(do_sample=True, temperature=2.0, top_p=0.95)
    shipped(image=circle)  # loads the model first: loading draws from the global generator (alone, this test failed)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    first = shipped(image=circle, seed=1, **sampled)["text"]
    assert torch.rand(1) == before  # the seeded draw forked torch's generator
    assert shipped(image=circle, seed=1, **sampled)["text"] == first
    assert len({shipped(image=circle, seed=seed, **sampled)["text"] for seed in range(4)}) > 1  # it samples


def test_two_threads_sampling_at_once_each_get_their_seeds_text(circle):
    """One app shared by two threads (a threaded web server): each seeded call gives the text it gives alone, and
    torch's global generator ends as it began. The calls are made to overlap mid-decoding, the interleaving that
    broke them: the first pauses before its third token until the second is decoding too, and the second then
    waits for the first to finish (each wait gives up after 2 s, as it must once the calls run one at a time)."""
    import threading
    from collections import Counter

    from appflow.model_kinds import MODEL_KINDS

    flow = Appflow("image2text_generation", cache=ModelCache(), max_new_tokens=8, do_sample=True, temperature=2.0)
    alone = {seed: flow(image=circle, seed=seed)["text"] for seed in (1, 2)}
    assert alone[1] != alone[2]
    vlm = flow.cache.get(MODEL_KINDS.get("vlm-generative"), flow.models["captioner"], flow.device, flow.dtype)
    first_paused, second_paused, first_done = threading.Event(), threading.Event(), threading.Event()
    steps: Counter = Counter()

    def overlap(module, args):
        name = threading.current_thread().name
        steps[name] += 1
        if steps[name] == 3 and name == "first":
            first_paused.set()
            second_paused.wait(2)
        elif steps[name] == 3 and name == "second":
            second_paused.set()
            first_done.wait(2)

    texts = {}

    def caption(seed, started=None, done=None):
        if started is not None:
            started.wait(2)
        texts[seed] = flow(image=circle, seed=seed)["text"]
        if done is not None:
            done.set()

    hook = vlm.model.language_model.register_forward_pre_hook(overlap)
    try:
        torch.manual_seed(123)
        before = torch.rand(1)
        torch.manual_seed(123)
        threads = [threading.Thread(target=caption, args=(1, None, first_done), name="first"),
                   threading.Thread(target=caption, args=(2, first_paused), name="second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        hook.remove()
    assert texts == alone
    assert torch.rand(1) == before


def test_paddlemix_generate_kwargs_are_the_options_they_name(shipped, circle):
    """PaddleMIX's MiniGPT-4 task takes its generation settings as `generate_kwargs=` (its defaults: max_length,
    num_beams, top_p, top_k, repetition_penalty, length_penalty, temperature, decode_strategy)."""
    paddlemix = dict(max_length=12, num_beams=1, top_p=1.0, top_k=0, repetition_penalty=1.0, length_penalty=0.0,
                     temperature=1.0, decode_strategy="greedy_search")
    flat = dict(max_new_tokens=12, top_p=1.0, top_k=0, repetition_penalty=1.0, length_penalty=0.0, temperature=1.0)
    question = "what is in the picture?"
    assert shipped(image=circle, minigpt4_text=question, generate_kwargs=paddlemix)["text"] == \
        shipped(image=circle, question=question, **flat)["text"]
    beams = dict(max_length=12, num_beams=3, decode_strategy="beam_search")
    assert shipped(image=circle, generate_kwargs=beams)["text"] == \
        shipped(image=circle, max_new_tokens=12, num_beams=3)["text"]
    sampled = dict(decode_strategy="sampling", temperature=2.0)
    assert shipped(image=circle, seed=3, generate_kwargs=sampled)["text"] == \
        shipped(image=circle, seed=3, do_sample=True, temperature=2.0)["text"]


@pytest.mark.parametrize("keywords, error, message", [
    (dict(generate_kwargs={"num_beams": 3}, num_beams=2), TypeError, r"\['num_beams'\] both in generate_kwargs and"),
    (dict(generate_kwargs={"max_length": 5}, max_new_tokens=5), TypeError, "'max_new_tokens' twice"),
    (dict(generate_kwargs={"eos_token_id": [835]}), TypeError, r"generate_kwargs holds \['eos_token_id'\], which"),
    (dict(generate_kwargs={"num_beams": 0}), ValueError, r"num_beams must be an integer in \[1, 64\]"),
    (dict(generate_kwargs={"decode_strategy": "sampling", "do_sample": False}), TypeError, "pass only one"),
    (dict(generate_kwargs={"decode_strategy": "beam_search"}), ValueError, "needs num_beams > 1"),
    (dict(generate_kwargs={"decode_strategy": "greedy_search", "num_beams": 4}), ValueError, "keeps one candidate"),
    (dict(generate_kwargs={"decode_strategy": "contrastive"}), ValueError, "decode_strategy must be one of"),
    (dict(generate_kwargs=[("num_beams", 3)]), TypeError, "generate_kwargs must be a dict of options"),
])
def test_bad_generate_kwargs_are_refused_before_loading(tiny_blip2_dir, photo, keywords, error, message):
    cache = ModelCache()
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache)
    with pytest.raises(error, match=f"App 'image2text_generation'.*{message}"):
        flow(image=photo, **keywords)
    with pytest.raises(error, match=message):  # at build too
        Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache, **keywords)
    assert cache.loads == 0


@pytest.mark.parametrize("options, message", [
    (dict(num_return_sequences=3), r"num_return_sequences=3 needs num_beams >= 3"),
    (dict(top_p=0), r"top_p must be None or a number in \(0, 1\]"),
    (dict(temperature=-1.0), "temperature must be None or a number above 0"),
    (dict(num_beams=0), r"num_beams must be an integer in \[1, 64\]"),
    (dict(do_sample="yes"), "do_sample must be True or False"),
    (dict(min_length=30), r"min_length must be None or an integer in \[0, max_new_tokens=6\]"),
    (dict(seed=-5), "seed must be -1"),
])
def test_bad_generation_values_are_refused_before_loading(tiny_blip2_dir, photo, options, message):
    cache = ModelCache()
    with pytest.raises(ValueError, match=message):  # at build
        Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache, **TOKENS, **options)
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache, **TOKENS)
    with pytest.raises(ValueError, match=f"App 'image2text_generation', step 'caption': .*{message}"):  # per call
        flow(image=photo, **options)
    assert cache.loads == 0


def test_bad_inputs_are_refused_before_loading(tiny_blip2_dir, photo):
    cache = ModelCache()
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache)
    with pytest.raises(ValueError, match="step 'caption': .*either prompt .* or question"):
        flow(image=photo, prompt="a", question="b?")
    with pytest.raises(ValueError, match="input 'image' .* is an empty list"):
        flow(image=[])
    with pytest.raises(TypeError, match=r"input 'image' .*, item 1 expects image"):
        flow(image=[photo, 3])
    assert cache.loads == 0


# -- zero-shot classification ----------------------------------------------------------------------
def test_zero_shot_values_are_refused_before_the_model_loads(tiny_clip_dir, photo):
    cache = ModelCache()
    with pytest.raises(ValueError, match="step 'classify': .*exactly one '{}' placeholder"):
        Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=cache, templates=["no placeholder"])
    with pytest.raises(ValueError, match="templates must be None .* or a non-empty list"):
        Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=cache, templates="a {}")
    flow = Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=cache)
    with pytest.raises(ValueError, match="App 'zero_shot_classification', step 'classify': .*labels is an empty list"):
        flow(image=photo, labels=[])
    with pytest.raises(ValueError, match=r"step 'classify': .*labels must be distinct, \['a'\] repeat"):
        flow(image=photo, labels=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"step 'classify': .*labels must be non-empty text, item 1 is '  '"):
        flow(image=photo, labels=["a", "  ", "b"])  # "a photo of a ." scored as a class of its own
    with pytest.raises(ValueError, match="step 'classify': .*placeholder"):
        flow(image=photo, labels=["a"], templates=["none"])
    assert cache.loads == 0  # before: the CLIP weights loaded first, then the error came from inside classify


def test_zero_shot_templates_reach_the_model(tiny_clip_dir, photo, shared_cache):
    from mixkit.models.vlm import load_vlm

    scores = Appflow("zero_shot_classification", models=[tiny_clip_dir], cache=shared_cache,
                     templates=["a {}", "the {}"])(image=photo, labels=["cat", "dog"])["scores"]
    expected = load_vlm(tiny_clip_dir).classify([photo], ["cat", "dog"], ["a {}", "the {}"])[0]
    assert scores == pytest.approx(expected, abs=1e-6)
