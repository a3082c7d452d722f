"""The model cache: one load per (kind, source, dtype, device), shared between flows, released on request."""

from __future__ import annotations

import torch

from appflow import Appflow, ModelCache
from appflow.cache import normalize_source

SD_FAST = dict(steps=2, seed=7)


def test_two_apps_with_the_same_sd_model_load_it_once(tiny_sd1_dir, photo):
    cache = ModelCache()
    text2image = Appflow("text2image_generation", models=[tiny_sd1_dir], width=32, height=32, cache=cache, **SD_FAST)
    image2image = Appflow("image2image_text_guided_generation", models=[str(tiny_sd1_dir) + "/."], cache=cache,
                          **SD_FAST)
    text2image(prompt="a cat")
    assert cache.loads == 1
    image2image(image=photo, prompt="a cat")
    assert cache.loads == 1 and len(cache) == 1
    assert cache.get(*_sd_key_args(text2image)) is cache.get(*_sd_key_args(image2image))
    assert cache.loads == 1


def _sd_key_args(flow):
    from appflow.model_kinds import MODEL_KINDS

    return MODEL_KINDS.get("stable-diffusion"), flow.models["generator"], flow.device, flow.dtype


def test_dtype_and_device_are_part_of_the_key_and_release_frees_entries(tmp_path):
    from appflow.model_kinds import ModelKind

    loads = []
    kind = ModelKind("test-cache-kind", "a fake model", (), lambda source, device, dtype: loads.append(dtype) or object())
    cache = ModelCache()
    (tmp_path / "a").mkdir()
    first = cache.get(kind, tmp_path / "a", "cpu", torch.float32)
    assert cache.get(kind, str(tmp_path / "a") + "/.", "cpu", torch.float32) is first
    assert cache.get(kind, tmp_path / "a", "cpu", torch.float64) is not first
    assert cache.get(kind, tmp_path / "a", "meta", torch.float32) is not first
    cache.get(kind, "org/other", "cpu", torch.float32)
    assert loads == [torch.float32, torch.float64, torch.float32, torch.float32] and cache.loads == 4
    assert cache.release(tmp_path / "a") == 3 and len(cache) == 1
    assert cache.get(kind, tmp_path / "a", "cpu", torch.float32) is not first  # reloaded after release
    assert cache.release() == 2 and len(cache) == 0


def test_flow_release_drops_its_models_from_the_shared_cache(tiny_dino_dir, tiny_sam_dir, photo):
    cache = ModelCache()
    flow = Appflow("openset_det_sam", models=[tiny_dino_dir, tiny_sam_dir], cache=cache, box_threshold=0.0,
                   text_threshold=0.0)
    flow(image=photo, prompt="dog")
    assert cache.loads == 2 and len(cache) == 2
    assert flow.release() == 2 and len(cache) == 0
    flow(image=photo, prompt="dog")
    assert cache.loads == 4


def test_local_paths_are_normalised_hub_ids_are_not(tmp_path):
    assert normalize_source(str(tmp_path) + "/.") == str(tmp_path.resolve())
    assert normalize_source("org/model") == "org/model"


def test_a_shipped_name_and_its_folder_share_one_cache_entry():
    from mixkit.tiny.shipped import shipped_model_path

    folder = shipped_model_path("mixkit-tiny-sd")
    assert normalize_source("mixkit-tiny-sd") == normalize_source(folder) == str(folder.resolve())
    assert normalize_source("mixkit-tiny-nope") == "mixkit-tiny-nope"  # not shipped: left as given


def test_a_local_folder_named_like_a_shipped_model_keeps_its_own_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mixkit-tiny-sd").mkdir()
    assert normalize_source("mixkit-tiny-sd") == str((tmp_path / "mixkit-tiny-sd").resolve())


def test_a_load_leaves_the_global_random_generators_as_they_were(tmp_path):
    import random

    import numpy as np

    from appflow.model_kinds import ModelKind

    def load_drawing_at_random(source, device, dtype):
        return torch.randn(4), np.random.rand(), random.random()

    kind = ModelKind("test-random-kind", "draws while loading", (), load_drawing_at_random)
    (tmp_path / "m").mkdir()

    def draws_after(load: bool):
        torch.manual_seed(3), np.random.seed(3), random.seed(3)
        if load:
            ModelCache().get(kind, tmp_path / "m", "cpu", torch.float32)
        return torch.rand(2).tolist(), np.random.rand(), random.random()

    assert draws_after(load=True) == draws_after(load=False)



def test_a_cached_model_is_served_while_another_one_is_still_loading(tmp_path):
    """One lock held across every load made each thread wait for any other thread's load, even for a model already in
    the cache (a 30 s SD load blocked a threaded server's captioning). Two threads asking for one key still load once."""
    import threading

    from appflow.model_kinds import ModelKind

    started, release, loads = threading.Event(), threading.Event(), []

    def load(source, device, dtype):
        loads.append(source)
        if source.endswith("slow"):
            started.set()
            release.wait()
        return object()

    kind = ModelKind("test-slow-kind", "a model that loads slowly", (), load)
    cache = ModelCache()
    for name in ("fast", "slow"):
        (tmp_path / name).mkdir()
    fast = cache.get(kind, tmp_path / "fast", "cpu", torch.float32)
    slow = [threading.Thread(target=cache.get, args=(kind, tmp_path / "slow", "cpu", torch.float32)) for _ in range(2)]
    slow[0].start()
    assert started.wait(60)
    slow[1].start()  # asks for the key being loaded: waits for that load, does not load again
    served = []
    reader = threading.Thread(target=lambda: served.append(cache.get(kind, tmp_path / "fast", "cpu", torch.float32)))
    reader.start()
    reader.join(30)  # a deadlock guard only: before, this waited for the slow load, which waits for `release`
    served_during_load = list(served)
    release.set()
    for thread in slow + [reader]:
        thread.join(60)
    assert served_during_load == [fast]
    assert loads == [str(tmp_path / "fast"), str(tmp_path / "slow")] and cache.loads == 2


def test_load_models_loads_each_named_model_once_before_the_first_call(tiny_blip2_dir):
    from PIL import Image

    cache = ModelCache()
    flow = Appflow("image2text_generation", models=[tiny_blip2_dir], cache=cache, max_new_tokens=2)
    assert cache.loads == 0  # building a flow reads configs only
    flow.load_models()
    assert cache.loads == 1 and len(cache) == 1
    flow.load_models()
    flow(image=Image.new("RGB", (32, 32), (200, 10, 30)))
    assert cache.loads == 1  # the call found it loaded
