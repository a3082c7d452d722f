"""Model switching: load-before-release only when memory allows; a failed load keeps a working model."""

from __future__ import annotations

import pytest

from webui.checkpoints import CheckpointCatalog
from webui.model_switch import ModelHolder, load_new_first, source_size_bytes


class FakePipeline:
    def __init__(self, source: str) -> None:
        self.source = source
        self.model = self


def make_holder(tmp_path, free_bytes: int, fail: set[str] = frozenset()):
    sources = []
    for name in ("a", "b", "broken"):
        folder = tmp_path / name
        (folder / "unet").mkdir(parents=True)
        (folder / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"\0" * 1000)
        sources.append(str(folder))
    events = []
    alive = set()

    def loader(source: str, preset: str):
        events.append(f"load {source.rsplit('/', 1)[-1]} (alive: {sorted(alive)})")
        if source.rsplit("/", 1)[-1] in fail:
            raise OSError("corrupt file")
        alive.add(source.rsplit("/", 1)[-1])
        return FakePipeline(source)

    holder = ModelHolder(CheckpointCatalog(sources), loader=loader, memory_probe=lambda device: free_bytes)
    return holder, events


def test_load_new_first_rule():
    assert load_new_first(1000, 1500)
    assert not load_new_first(1000, 1499)
    assert load_new_first(0, 0)  # unknown size (hub id): nothing to release for


def test_source_size_counts_weight_files(tmp_path):
    (tmp_path / "unet").mkdir()
    (tmp_path / "unet" / "w.safetensors").write_bytes(b"\0" * 10)
    (tmp_path / "model_index.json").write_text("{}")
    assert source_size_bytes(str(tmp_path)) == 10
    assert source_size_bytes("org/hub-id") == 0


def test_switch_loads_first_when_memory_allows(tmp_path):
    holder, events = make_holder(tmp_path, free_bytes=10**9)
    holder.switch("a")
    holder.switch("b")
    assert holder.entry.title == "b" and holder.txt2img().source.endswith("/b")
    assert events == ["load a (alive: [])", "load b (alive: ['a'])"]


def test_failed_switch_keeps_previous_model_when_loaded_first(tmp_path):
    holder, _ = make_holder(tmp_path, free_bytes=10**9, fail={"broken"})
    holder.switch("a")
    with pytest.raises(OSError, match="corrupt"):
        holder.switch("broken")
    assert holder.entry.title == "a" and holder.txt2img().source.endswith("/a")


def test_tight_memory_releases_first_and_reloads_previous_on_failure(tmp_path):
    holder, events = make_holder(tmp_path, free_bytes=100, fail={"broken"})
    holder.switch("a")
    holder.switch("b")
    assert holder.entry.title == "b"
    with pytest.raises(OSError):
        holder.switch("broken")
    assert holder.entry.title == "b" and holder.txt2img().source.endswith("/b")
    assert events[-2:] == ["load broken (alive: ['a', 'b'])", "load b (alive: ['a', 'b'])"]


def test_unknown_or_path_like_title_is_refused_before_loading(tmp_path):
    holder, events = make_holder(tmp_path, free_bytes=10**9)
    for title in ("../../etc/passwd", str(tmp_path / "a"), "nope"):
        with pytest.raises(ValueError, match="Unknown checkpoint"):
            holder.switch(title)
    assert events == [] and not holder.loaded


def test_catalog_scans_models_dir_and_refreshes(tmp_path):
    (tmp_path / "one.safetensors").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "folder" / "unet").mkdir(parents=True)
    (tmp_path / "folder" / "unet" / "config.json").write_text("{}")
    (tmp_path / "folder" / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"x")
    (tmp_path / "configs" / "unet").mkdir(parents=True)  # configs only: a refiner's config folder, no checkpoint
    (tmp_path / "configs" / "unet" / "config.json").write_text("{}")
    catalog = CheckpointCatalog([], tmp_path)
    # A1111's CheckpointInfo.name keeps the extension; a diffusers folder is listed by its folder name
    assert catalog.titles() == ["folder", "one.safetensors"]
    (tmp_path / "two.ckpt").write_bytes(b"x")
    catalog.refresh()
    assert catalog.titles() == ["folder", "one.safetensors", "two.ckpt"]
    assert catalog.find("one [abcdef1234]").model_name == "one"  # A1111 titles carry a hash suffix


def make_preset_holder(tmp_path, free_bytes: int, fail_presets: set[str] = frozenset()):
    holder, events = make_holder(tmp_path, free_bytes)

    def optimizer(pipe, preset):
        events.append(f"optimize {pipe.source.rsplit('/', 1)[-1]} {preset}")
        if preset in fail_presets:
            raise RuntimeError(f"{preset} is not supported here")
        pipe.preset = preset

    holder._optimizer = optimizer
    return holder, events


def test_preset_switch_reloads_the_same_checkpoint_and_applies_the_preset(tmp_path):
    holder, events = make_preset_holder(tmp_path, free_bytes=10**9)
    holder.switch("a")
    first = holder.txt2img()
    holder.switch("a")  # same checkpoint, same preset: nothing to do
    holder.switch("a", "fast")
    assert holder.preset == "fast" and holder.txt2img() is not first and holder.txt2img().preset == "fast"
    holder.switch("b")  # a later model switch keeps the preset
    assert holder.txt2img().preset == "fast"
    holder.switch("b", "exact")  # back to exact: a fresh load, no optimize() call
    assert holder.preset == "exact" and not hasattr(holder.txt2img(), "preset")
    assert events == ["load a (alive: [])", "load a (alive: ['a'])", "optimize a fast", "load b (alive: ['a'])",
                      "optimize b fast", "load b (alive: ['a', 'b'])"]


@pytest.mark.parametrize("free_bytes", [10**9, 100])  # new-before-old, and release-first when memory is tight
def test_failed_preset_keeps_the_old_model_and_preset(tmp_path, free_bytes):
    holder, events = make_preset_holder(tmp_path, free_bytes=free_bytes, fail_presets={"low-memory"})
    holder.switch("a", "fast")
    before = holder.txt2img()
    with pytest.raises(RuntimeError, match="low-memory is not supported"):
        holder.switch("a", "low-memory")
    assert holder.preset == "fast" and holder.entry.title == "a" and holder.txt2img().preset == "fast"
    if free_bytes == 10**9:
        assert holder.txt2img() is before
    else:  # released, failed, and reloaded with the previous preset
        assert events[-2:] == ["load a (alive: ['a'])", "optimize a fast"]


def test_unknown_preset_is_refused_before_loading(tmp_path):
    from mixkit.errors import UnknownNameError

    holder, events = make_preset_holder(tmp_path, free_bytes=10**9)
    with pytest.raises(UnknownNameError, match="exact.*fast.*low-memory"):
        holder.switch("a", "turbo")
    with pytest.raises(TypeError, match="preset"):
        holder.switch("a", 3)
    assert events == [] and holder.preset == "exact"


def test_loaded_model_is_one_look_that_an_unload_answers_with_none(tmp_path):
    # Request threads read the model while the worker may unload it; `loaded` then `txt2img()` raced into a 500.
    holder, _ = make_holder(tmp_path, free_bytes=10**9)
    assert holder.loaded_model() is None
    holder.switch("a")
    assert holder.loaded_model() is holder.txt2img().model
    holder.unload()
    assert holder.loaded_model() is None and holder.unloaded
