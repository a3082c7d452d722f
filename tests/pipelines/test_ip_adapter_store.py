"""`IPAdapterStore`: adapter files and image encoders read once per file version, shapes read from a safetensors
header without its tensors, and one store shared by pipelines (`IPAdapterMixin.use_ip_adapter_store`)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from PIL import Image

from mixkit.testing.tiny_ip_adapter import PROJECTION_DIM, save_tiny_ip_adapter
from pipelines.ip_adapter_store import AdapterShape, IPAdapterStore


@pytest.fixture()
def counted(monkeypatch):
    """Paths read by the loaders the store calls."""
    from pipelines import ip_adapter_files

    calls = {"weights": [], "encoders": []}
    read, load = ip_adapter_files.read_ip_adapter_weights, ip_adapter_files.load_image_encoder

    def counted_read(file):
        calls["weights"].append(file.name)
        return read(file)

    def counted_load(folder, device, dtype):
        calls["encoders"].append((folder.name, dtype))
        return load(folder, device, dtype)

    monkeypatch.setattr(ip_adapter_files, "read_ip_adapter_weights", counted_read)
    monkeypatch.setattr(ip_adapter_files, "load_image_encoder", counted_load)
    return calls


def touched(file, seconds: int = 1) -> None:
    """A replacement within one clock tick still gets another modification time."""
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + seconds * 10**9))


def test_a_safetensors_shape_comes_from_its_header_and_equals_the_read_one(sd1_pipe, tmp_path, counted):
    unet = sd1_pipe.model.unet
    file = save_tiny_ip_adapter(tmp_path, unet, encoder=False)
    pickled = save_tiny_ip_adapter(tmp_path, unet, suffix=".bin", encoder=False)
    store = IPAdapterStore()
    expected = AdapterShape(unet.config.cross_attention_dim, PROJECTION_DIM, "plain")
    assert store.shape(file, file.stem) == expected and counted["weights"] == []  # the header only
    assert store.shape(pickled, pickled.stem) == expected and counted["weights"] == ["ip-adapter_tiny.bin"]
    state, kind = store.weights(pickled, pickled.stem)  # read by the shape check: not again
    assert kind == "plain" and counted["weights"] == ["ip-adapter_tiny.bin"]
    assert torch.equal(state["image_proj"]["proj.weight"], store.weights(file, file.stem)[0]["image_proj"]["proj.weight"])


def test_a_plus_adapter_header_gives_its_hidden_width(tmp_path):
    from safetensors.torch import save_file

    file = tmp_path / "ip-adapter-plus_tiny.safetensors"
    save_file({"image_proj.latents": torch.zeros(1, 16, 24), "image_proj.proj_in.weight": torch.zeros(24, 40),
               "image_proj.proj_out.weight": torch.zeros(32, 24), "ip_adapter.1.to_k_ip.weight": torch.zeros(8, 32)},
              file)
    assert IPAdapterStore().shape(file, file.stem) == AdapterShape(32, 40, "plus")


def test_a_replaced_file_is_read_again_and_its_old_version_dropped(sd1_pipe, tmp_path, counted):
    unet = sd1_pipe.model.unet
    file = save_tiny_ip_adapter(tmp_path, unet, suffix=".bin", encoder=False)
    store = IPAdapterStore()
    first, _ = store.weights(file, file.stem)
    assert store.weights(file, file.stem)[0] is first and len(store) == 1
    save_tiny_ip_adapter(tmp_path, unet, suffix=".bin", encoder=False, seed=5)
    touched(file)
    second, _ = store.weights(file, file.stem)
    assert counted["weights"] == ["ip-adapter_tiny.bin"] * 2 and len(store) == 1
    assert not torch.equal(first["image_proj"]["proj.weight"], second["image_proj"]["proj.weight"])


def test_encoders_by_folder_version_and_dtype_and_release(sd1_pipe, tmp_path, counted):
    file = save_tiny_ip_adapter(tmp_path, sd1_pipe.model.unet)
    folder = file.parent / "image_encoder"
    store = IPAdapterStore()
    encoder = store.encoder(folder, "cpu", torch.float32)
    assert store.encoder(folder, "cpu", torch.float32) is encoder
    assert store.encoder(folder, "cpu", torch.float16)[0].dtype == torch.float16
    touched(folder / "config.json")  # the folder changed: both old encoders are stale
    store.encoder(folder, "cpu", torch.float32)
    assert counted["encoders"] == [("image_encoder", torch.float32), ("image_encoder", torch.float16),
                                   ("image_encoder", torch.float32)]
    assert len(store) == 1
    store.weights(file, file.stem)
    assert store.release() == 2 and len(store) == 0
    store.encoder(folder, "cpu", torch.float32)
    assert len(counted["encoders"]) == 4


def test_pipelines_sharing_a_store_read_the_adapter_once_and_give_the_same_image(sd1_pipe, tmp_path, counted):
    from pipelines.ip_adapter import IPAdapterTextToImage

    file = save_tiny_ip_adapter(tmp_path, sd1_pipe.model.unet)
    reference = Image.fromarray((np.random.RandomState(0).rand(40, 40, 3) * 255).astype("uint8"))
    call = dict(prompt="a cat", width=64, height=64, steps=2, seed=1, ip_adapter=str(file),
                ip_adapter_image=reference, ip_adapter_scale=0.7)
    store = IPAdapterStore()
    images = []
    for _ in range(2):  # as a server builds a pipeline per job
        pipe = IPAdapterTextToImage.from_pipeline(sd1_pipe)
        pipe.use_ip_adapter_store(store)
        images.append(np.asarray(pipe(**call).images[0]))
    own = np.asarray(IPAdapterTextToImage.from_pipeline(sd1_pipe)(**call).images[0])  # its own store: read again
    assert np.array_equal(images[0], images[1]) and np.array_equal(images[0], own)
    assert counted["weights"] == ["ip-adapter_tiny.safetensors"] * 2 and len(counted["encoders"]) == 2


def test_a_store_in_a_shared_bounded_cache_keeps_the_most_recently_used_and_its_shapes(sd1_pipe, tmp_path, counted):
    from pipelines.unit_model_cache import UnitModelCache

    unet = sd1_pipe.model.unet
    files = [save_tiny_ip_adapter(tmp_path, unet, name=f"ip-adapter_{index}", suffix=".bin", encoder=False)
             for index in range(3)]
    cache = UnitModelCache(2)
    cache.put(("controlnet", "canny"), "a ControlNet", family_width=32)  # a server's ControlNet in the same cache
    store = IPAdapterStore(cache)
    for file in files:
        store.weights(file, file.stem)
    assert len(cache) == 2 and len(store) == 2 and ("controlnet", "canny") not in cache  # the least recently used
    assert [key[1][0] for key in cache.keys()] == [str(files[1].resolve()), str(files[2].resolve())]
    store.weights(files[1], files[1].stem)  # kept: not read again, now the most recently used
    store.weights(files[0], files[0].stem)  # evicted: read again, evicting ip-adapter_2
    assert counted["weights"] == ["ip-adapter_0.bin", "ip-adapter_1.bin", "ip-adapter_2.bin", "ip-adapter_0.bin"]
    assert store.shape(files[2], files[2].stem).cross_dim == unet.config.cross_attention_dim  # a shape stays known
    assert len(counted["weights"]) == 4  # ... without reading the evicted file again
    assert store.release() == 2 and len(cache) == 0
