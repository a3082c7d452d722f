"""`UnitModelCache`: at most `size` models, the least recently used evicted first, never one the running job has
used before it ends; a checked size; family filtering for checkpoint switches."""

from __future__ import annotations

import pytest

from pipelines.unit_model_cache import DEFAULT_CACHE_SIZE, MAX_CACHE_SIZE, UnitModelCache, check_cache_size


def filled(cache: UnitModelCache, *keys: str) -> UnitModelCache:
    for key in keys:
        cache.put(key, f"model {key}")
    return cache


def test_the_default_is_the_extensions_two_and_the_least_recently_used_goes_first():
    cache = filled(UnitModelCache(), "a", "b")
    assert cache.size == DEFAULT_CACHE_SIZE == 2
    assert cache.get("a") == "model a"  # a is now more recent than b
    cache.put("c", "model c")
    assert cache.keys() == ["a", "c"] and cache.get("b") is None


def test_a_miss_changes_nothing_and_put_returns_the_model():
    cache = filled(UnitModelCache(2), "a", "b")
    assert cache.get("x") is None and cache.keys() == ["a", "b"]
    model = object()
    assert cache.put("c", model) is model and cache.get("c") is model


def test_size_zero_keeps_nothing_between_jobs_but_a_job_keeps_what_it_uses_until_it_ends():
    cache = UnitModelCache(0)
    assert cache.put("a", "model a") == "model a" and len(cache) == 0
    with cache.in_job():
        cache.put("a", "model a")
        assert cache.get("a") == "model a"  # the job's second unit of the same model: no second load
    assert len(cache) == 0


def test_models_the_running_job_used_are_never_evicted_and_the_cache_is_trimmed_after_it():
    cache = filled(UnitModelCache(2), "old")
    with cache.in_job():
        assert cache.get("old") == "model old"  # used by this job: pinned
        cache.put("a", "model a")
        cache.put("b", "model b")  # three in use: none evicted during the job
        assert cache.keys() == ["old", "a", "b"]
    assert cache.keys() == ["a", "b"]  # after it: the least recently used of them goes


def test_a_job_run_again_reads_one_model_not_all_when_it_uses_more_than_the_size():
    cache, loads = UnitModelCache(2), []

    def job(*keys):
        with cache.in_job():
            for key in keys:
                if cache.get(key) is None:
                    loads.append(key)
                    cache.put(key, f"model {key}")

    job("controlnet", "adapter", "encoder")
    assert loads == ["controlnet", "adapter", "encoder"] and cache.keys() == ["adapter", "encoder"]
    job("controlnet", "adapter", "encoder")  # evicting at each load would read all three again
    assert loads == ["controlnet", "adapter", "encoder", "controlnet"]


def test_a_size_lowered_during_a_job_evicts_what_it_has_not_used():
    cache = filled(UnitModelCache(3), "idle", "used")
    with cache.in_job():
        cache.get("used")
        cache.put("new", "model new")
        assert cache.resize(1) == 1 and cache.keys() == ["used", "new"]  # "idle" is not the job's
    assert cache.keys() == ["new"]


def test_resize_evicts_the_least_recently_used_now_and_keeps_the_running_jobs_models():
    cache = filled(UnitModelCache(5), "a", "b", "c", "d")
    assert cache.resize(2) == 2 and cache.keys() == ["c", "d"]
    with cache.in_job():
        cache.get("c")
        cache.get("d")
        assert cache.resize(0) == 0 and cache.keys() == ["c", "d"]  # both in use
    assert len(cache) == 0 and cache.size == 0


def test_unbounded_keeps_everything():
    cache = filled(UnitModelCache(size=None), *"abcdefghijkl")
    assert len(cache) == 12 and cache.size is None


def test_keep_family_drops_other_families_and_keeps_models_of_no_family():
    cache = UnitModelCache(10)
    cache.put("sd15 controlnet", 1, family_width=768)
    cache.put("sdxl controlnet", 2, family_width=2048)
    cache.put("sdxl adapter", 3, family_width=2048)
    cache.put("clip encoder", 4)
    assert cache.keep_family(2048) == 1
    assert cache.keys() == ["sdxl controlnet", "sdxl adapter", "clip encoder"]
    assert cache.keep_family(768) == 2 and cache.keys() == ["clip encoder"]


def test_forget_and_clear_count_what_they_drop_even_when_pinned():
    cache = filled(UnitModelCache(10), "a1", "a2", "b")
    with cache.in_job():
        cache.get("a1")
        assert cache.forget(lambda key: key.startswith("a")) == 2
        assert cache.keys() == ["b"]
    assert cache.clear() == 1 and len(cache) == 0


@pytest.mark.parametrize("value", [0, 2, MAX_CACHE_SIZE, 3.0])
def test_sizes_taken(value):
    assert check_cache_size(value) == int(value) and type(check_cache_size(value)) is int


@pytest.mark.parametrize("value", [-1, MAX_CACHE_SIZE + 1, 2.5, True, "2", None, float("nan")])
def test_sizes_refused_with_the_range(value):
    with pytest.raises(ValueError, match=rf"control_net_model_cache_size must be a whole number in \[0, "
                                         rf"{MAX_CACHE_SIZE}\].*got {value!r}"):
        check_cache_size(value)
    if value is not None:  # None is the constructor's "unbounded"
        with pytest.raises(ValueError):
            UnitModelCache(value)
