"""ClipInterrogator on the shipped mixkit-tiny-clip: the true shape and colour of a shapes-world render rank first.

The renders come from the world's own generator (mixkit.data.shapes_render), so the right term is known exactly."""

from __future__ import annotations

import re

import pytest

from mixkit.data.shapes_render import render_scene
from mixkit.data.shapes_vocab import Scene, ShapeSpec
from mixkit.interrogate import ClipInterrogator, InterrogateSettings, join_terms


@pytest.fixture(scope="module")
def tiny_clip():
    from mixkit.models.vlm import load_vlm

    return load_vlm("mixkit-tiny-clip")


@pytest.fixture(scope="module")
def star():
    return render_scene(Scene((ShapeSpec("star", "yellow", "small", "bottom right"),), "purple"), 64)


def counting_loader(model):
    loads = []

    def load(source):
        loads.append(source)
        return model
    return load, loads


def test_the_true_shape_and_colour_rank_first_in_the_built_in_lists(tiny_clip, star):
    interrogator = ClipInterrogator(loader=counting_loader(tiny_clip)[0])
    terms = interrogator.terms(star, InterrogateSettings(clip_skip_categories=("sizes",)))
    assert [term for term, _ in terms] == ["star", "yellow"]  # shapes, then colours (the categories' order)
    assert all(0.5 < score <= 1.0 for _, score in terms)


def test_a_folder_list_whose_one_true_line_ranks_first_with_top_n(tiny_clip, tmp_path):
    circle = render_scene(Scene((ShapeSpec("circle", "red", "large", "center"),), "blue"), 64)
    (tmp_path / "colour.txt").write_text("green\nred\nyellow\nwhite\n", encoding="utf-8")
    (tmp_path / "shape.top2.txt").write_text("square\ntriangle\ncircle\nstar\ncross\n", encoding="utf-8")
    interrogator = ClipInterrogator(categories_dir=tmp_path, loader=counting_loader(tiny_clip)[0])
    terms = interrogator.terms(circle, InterrogateSettings())
    assert [term for term, _ in terms][:2] == ["red", "circle"] and len(terms) == 3  # colour: 1, shape.top2: 2
    assert terms[1][1] >= terms[2][1]
    # dict_limit 2 keeps green/red and square/triangle: the circle is no longer a choice
    limited = interrogator.terms(circle, InterrogateSettings(clip_dict_limit=2))
    assert limited[0][0] == "red" and {term for term, _ in limited[1:]} == {"square", "triangle"}


def test_return_ranks_writes_each_term_with_its_probability():
    assert join_terms("a cat", [("red", 0.98765), ("by X", 0.5)], True) == "a cat, (red:0.988), (by X:0.500)"
    assert join_terms("a cat", [("red", 0.98765), ("by X", 0.5)], False) == "a cat, red, by X"
    assert join_terms("a cat", [], True) == "a cat"


def test_return_ranks_format_on_the_tiny_model(tiny_clip, star):
    terms = ClipInterrogator(loader=counting_loader(tiny_clip)[0]).terms(star, InterrogateSettings())
    answer = join_terms("a caption", terms, True)
    assert re.fullmatch(r"a caption, \(star:[01]\.\d{3}\), \(yellow:[01]\.\d{3}\), \(\w+:[01]\.\d{3}\)", answer)


def test_text_embeddings_are_reused_and_the_model_reloaded_only_when_not_kept(tiny_clip, star):
    load, loads = counting_loader(tiny_clip)
    interrogator = ClipInterrogator(loader=load)
    first = interrogator.terms(star, InterrogateSettings())
    assert interrogator.cache.misses == 3 and loads == ["mixkit-tiny-clip"]
    assert interrogator.terms(star, InterrogateSettings()) == first
    assert interrogator.cache.misses == 3 and len(loads) == 2  # lists cached; the model was dropped and reloaded
    kept = InterrogateSettings(keep_models_in_memory=True)
    interrogator.terms(star, kept)
    interrogator.terms(star, kept)
    assert len(loads) == 3 and interrogator.cache.misses == 3


def test_a_bad_skip_name_fails_before_the_model_loads(star):
    load, loads = counting_loader(None)
    with pytest.raises(ValueError, match=r"names \['artists'\]"):
        ClipInterrogator(loader=load).terms(star, InterrogateSettings(clip_skip_categories=("artists",)))
    assert loads == []


def test_a_model_that_is_no_clip_is_refused_naming_it(star):
    with pytest.raises(TypeError, match="'mixkit-tiny-blip2' is no CLIP"):
        ClipInterrogator("mixkit-tiny-blip2", loader=lambda source: object()).terms(star, InterrogateSettings())


@pytest.mark.parametrize("field, value, message", [
    ("clip_num_beams", 0, r"num_beams must be a whole number in \[1, 16\]"),
    ("clip_max_length", 300, r"max_length must be a whole number in \[1, 256\]"),
    ("clip_dict_limit", -1, "dict_limit must be a whole number >= 0"),
    ("return_ranks", "yes", "return_ranks must be true or false"),
    ("clip_skip_categories", "artists", "must be a list of category names"),
])
def test_settings_are_checked_naming_the_option(field, value, message):
    with pytest.raises(ValueError, match=message):
        InterrogateSettings(**{field: value})
    with pytest.raises(ValueError, match="min_length \\(50\\) must not exceed"):
        InterrogateSettings(clip_min_length=50, clip_max_length=48)


def test_a_missing_categories_folder_is_refused_at_construction(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        ClipInterrogator(categories_dir=tmp_path / "nope")


def test_a_held_interrogator_loads_its_clip_once_for_the_whole_block(tiny_clip, star):
    """A Loopback job of 3 loops with interrogate_keep_models_in_memory off: one load, dropped when the job ends."""
    load, loads = counting_loader(tiny_clip)
    interrogator, settings = ClipInterrogator(loader=load), InterrogateSettings()
    with interrogator.held():
        first = [interrogator.terms(star, settings) for _ in range(3)]
        assert loads == ["mixkit-tiny-clip"] and interrogator._clip is tiny_clip
    assert interrogator._clip is None
    assert first[0] == first[1] == first[2]
    interrogator.terms(star, settings)  # outside the block the setting drops it after each use again
    assert loads == ["mixkit-tiny-clip"] * 2 and interrogator._clip is None


def test_a_held_interrogator_kept_by_its_last_use_stays_loaded_after_the_block(tiny_clip, star):
    load, loads = counting_loader(tiny_clip)
    interrogator = ClipInterrogator(loader=load)
    with interrogator.held():
        with interrogator.held():  # nested holds: only the outer block's end may drop it
            interrogator.terms(star, InterrogateSettings())
        assert interrogator._clip is tiny_clip
        interrogator.terms(star, InterrogateSettings(keep_models_in_memory=True))
    assert interrogator._clip is tiny_clip and loads == ["mixkit-tiny-clip"]
    interrogator.unload()
    assert interrogator._clip is None


def test_load_loads_the_clip_now_and_a_kept_use_reuses_it(tiny_clip, star):
    load, loads = counting_loader(tiny_clip)
    interrogator = ClipInterrogator(loader=load)
    interrogator.load()
    assert loads == ["mixkit-tiny-clip"]
    interrogator.terms(star, InterrogateSettings(keep_models_in_memory=True))
    assert loads == ["mixkit-tiny-clip"]


def test_load_refuses_a_model_that_is_no_clip_before_any_image():
    interrogator = ClipInterrogator("mixkit-tiny-blip2", loader=lambda source: object())
    with pytest.raises(TypeError, match="'mixkit-tiny-blip2' is no CLIP"):
        interrogator.load()
    assert interrogator._clip is None


def test_release_drops_a_kept_model_now_and_a_held_one_when_its_block_ends(tiny_clip, star):
    """Keep-in-memory turned off: the CLIP a kept use left loaded goes at once, not at its next use; inside a job's
    `held()` block it stays for the job's remaining uses and goes at the block's end, though the last use kept it."""
    load, loads = counting_loader(tiny_clip)
    interrogator, kept = ClipInterrogator(loader=load), InterrogateSettings(keep_models_in_memory=True)
    interrogator.terms(star, kept)
    assert interrogator._clip is tiny_clip
    interrogator.release()
    assert interrogator._clip is None and loads == ["mixkit-tiny-clip"]
    with interrogator.held():
        interrogator.terms(star, kept)
        interrogator.release()
        assert interrogator._clip is tiny_clip  # the job goes on with it, the setting now off
        interrogator.terms(star, InterrogateSettings())
        assert interrogator._clip is tiny_clip and loads == ["mixkit-tiny-clip"] * 2
    assert interrogator._clip is None
    with interrogator.held():
        interrogator.terms(star, kept)
        interrogator.release()  # after the job's last use, which kept it
    assert interrogator._clip is None and loads == ["mixkit-tiny-clip"] * 3


def test_release_waits_for_the_running_use_then_drops_the_model(tiny_clip, star):
    import threading

    started, go_on = threading.Event(), threading.Event()

    class SlowClip:
        """The tiny CLIP, its image embedding waiting for the test: a use that is running when release() is called."""

        def __getattr__(self, name):
            return getattr(tiny_clip, name)

        def embed_images(self, images):
            started.set()
            go_on.wait(30)
            return tiny_clip.embed_images(images)

    interrogator = ClipInterrogator(loader=lambda source: SlowClip())
    use = threading.Thread(target=interrogator.terms, args=(star, InterrogateSettings(keep_models_in_memory=True)))
    use.start()
    assert started.wait(30)
    release = threading.Thread(target=interrogator.release)
    release.start()
    release.join(0.3)
    assert release.is_alive() and interrogator._clip is not None  # not dropped under the running use
    go_on.set()
    use.join(30)
    release.join(30)
    assert not release.is_alive() and interrogator._clip is None
