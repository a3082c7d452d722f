"""IP-Adapter units over the API keep their files in memory between jobs (`ControlNetModels.ip_adapters`, a
`pipelines.ip_adapter_store.IPAdapterStore`), read a replaced file again, free them at unload-checkpoint (with the
units' ControlNets), and refuse an unusable weights file (unsafe pickle, not an adapter, another family) with a 422
before anything is queued."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from mixkit.testing.tiny_ip_adapter import save_tiny_ip_adapter
from .test_api_ip_adapter_units import generate, ip_unit, picture


@pytest.fixture(scope="module")
def unet(tiny_sd1_dir):
    from mixkit.models.diffusion.loading import load_diffusion_model

    return load_diffusion_model(tiny_sd1_dir).unet


@pytest.fixture(scope="module")
def folder(tmp_path_factory, unet):
    folder = tmp_path_factory.mktemp("ip-cache") / "ControlNet"
    save_tiny_ip_adapter(folder, unet)  # ip-adapter_tiny.safetensors + image_encoder/
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_other", seed=5)
    from mixkit.testing.tiny_controlnet import build_tiny_controlnet

    build_tiny_controlnet(folder / "tiny_canny", seed=1)
    return folder


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, folder, serving):
    from webui.config import ServerConfig

    with serving(ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(folder.parent / "outputs"), ui=False,
                              controlnet_dir=str(folder))) as running:
        yield running


@pytest.fixture()
def reads(server, monkeypatch):
    """Counts of weights-file reads and encoder loads by path, through the loaders the store calls; the store starts
    empty, in a cache large enough for every model of these tests (its size limit: test_unit_model_cache_server)."""
    from pipelines import ip_adapter_files

    server.state.controlnets.release()
    server.state.options.apply(server.state.options.check_update({"control_net_model_cache_size": 10}))
    counts = {"weights": [], "encoders": []}
    read, load = ip_adapter_files.read_ip_adapter_weights, ip_adapter_files.load_image_encoder

    def counted_read(file):
        counts["weights"].append(file.name)
        return read(file)

    def counted_load(folder, device, dtype):
        counts["encoders"].append(folder.name)
        return load(folder, device, dtype)

    monkeypatch.setattr(ip_adapter_files, "read_ip_adapter_weights", counted_read)
    monkeypatch.setattr(ip_adapter_files, "load_image_encoder", counted_load)
    return counts


def store(server):
    return server.state.controlnets.ip_adapters


def test_two_jobs_with_the_same_unit_read_the_file_and_the_encoder_once(client, server, reads):
    first = picture(generate(client, [ip_unit(weight=0.8)]))
    second = picture(generate(client, [ip_unit(weight=0.8)]))
    assert np.array_equal(first, second)
    assert reads == {"weights": ["ip-adapter_tiny.safetensors"], "encoders": ["image_encoder"]}
    assert len(store(server)) == 2
    picture(generate(client, [ip_unit(weight=0.5), ip_unit(model="ip-adapter_other", weight=0.5)]))
    assert reads == {"weights": ["ip-adapter_tiny.safetensors", "ip-adapter_other.safetensors"],
                     "encoders": ["image_encoder"]}  # both adapters read the one encoder folder


def test_a_replaced_file_is_read_again_and_its_new_weights_steer(client, server, folder, unet, reads):
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_swap", seed=0)  # the weights of ip-adapter_tiny
    as_tiny = picture(generate(client, [ip_unit(weight=0.8)]))
    assert np.array_equal(picture(generate(client, [ip_unit(model="ip-adapter_swap", weight=0.8)])), as_tiny)
    as_other = picture(generate(client, [ip_unit(model="ip-adapter_other", weight=0.8)]))
    swap = save_tiny_ip_adapter(folder, unet, name="ip-adapter_swap", seed=5)  # now ip-adapter_other's weights
    stat = swap.stat()
    os.utime(swap, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a replacement within one clock tick
    assert np.array_equal(picture(generate(client, [ip_unit(model="ip-adapter_swap", weight=0.8)])), as_other)
    assert reads["weights"].count("ip-adapter_swap.safetensors") == 2
    assert len(store(server)) == 4  # tiny, swap (its old version dropped), other, the encoder


def test_unload_checkpoint_frees_the_adapters_and_the_next_job_reads_them_again(client, server, reads):
    picture(generate(client, [ip_unit()]))
    assert len(store(server)) == 2
    assert client.post("/sdapi/v1/unload-checkpoint").status_code == 200
    assert len(store(server)) == 0 and server.state.holder.unloaded
    picture(generate(client, [ip_unit()]))  # reloads the checkpoint, reads the unit's files again
    assert reads["weights"] == ["ip-adapter_tiny.safetensors"] * 2 and reads["encoders"] == ["image_encoder"] * 2


def test_unload_checkpoint_frees_the_controlnets_units_loaded_too(client, server, reads, monkeypatch):
    import pipelines.controlnet as controlnet

    from .test_api_ip_adapter_units import box

    loads = []
    load = controlnet.load_controlnet

    def counted(path, **kwargs):
        loads.append(path.name)
        return load(path, **kwargs)

    monkeypatch.setattr(controlnet, "load_controlnet", counted)
    canny = {"module": "canny", "model": "tiny_canny", "image": box(), "resize_mode": "Just Resize"}
    first = picture(generate(client, [canny, ip_unit()]))
    assert np.array_equal(picture(generate(client, [canny, ip_unit()])), first)
    assert loads == ["tiny_canny"]
    assert client.post("/sdapi/v1/unload-checkpoint").status_code == 200
    assert np.array_equal(picture(generate(client, [canny, ip_unit()])), first)  # the same models, read again
    assert loads == ["tiny_canny"] * 2 and reads["weights"] == ["ip-adapter_tiny.safetensors"] * 2


def test_a_bin_adapter_is_read_once_when_the_request_arrives_and_not_again_by_its_job(client, server, folder, unet,
                                                                                       reads):
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_pickled", suffix=".bin")
    as_safetensors = picture(generate(client, [ip_unit(weight=0.8)]))
    pickled = picture(generate(client, [ip_unit(model="ip-adapter_pickled", weight=0.8)]))
    assert np.array_equal(pickled, as_safetensors)  # the same weights, seed 0
    assert reads["weights"].count("ip-adapter_pickled.bin") == 1


class Payload:  # a pickled global torch's weights-only loader refuses
    pass


def write_unsafe(folder, unet):
    torch.save({"image_proj": {"x": Payload()}, "ip_adapter": {}}, folder / "ip-adapter_evil.bin")


def write_not_an_adapter(folder, unet):
    from safetensors.torch import save_file

    save_file({"input_blocks.0.weight": torch.zeros(2)}, folder / "ip-adapter_lora.safetensors")


def write_truncated(folder, unet):
    data = (folder / "ip-adapter_tiny.safetensors").read_bytes()
    (folder / "ip-adapter_cut.safetensors").write_bytes(data[: len(data) // 2])


def write_face_id(folder, unet):
    from safetensors.torch import save_file

    save_file({"image_proj.proj.0.weight": torch.zeros(8, 8), "image_proj.norm.weight": torch.ones(32),
               "ip_adapter.1.to_k_ip.weight": torch.zeros(32, 32)}, folder / "ip-adapter-faceid_sd15.safetensors")


def write_wide_bin(folder, unet):  # another family's width, pickled: only readable by reading the file
    save_tiny_ip_adapter(folder, unet, name="ip-adapter_widebin", suffix=".bin", cross_dim=48, encoder=False)


@pytest.mark.parametrize("write, model, fragments", [
    (write_unsafe, "ip-adapter_evil", ["controlnet unit 0: IP-Adapter file 'ip-adapter_evil.bin' cannot be used",
                                       "Payload"]),
    (write_not_an_adapter, "ip-adapter_lora", ["controlnet unit 0: IP-Adapter file 'ip-adapter_lora.safetensors' "
                                               "cannot be used", "not an IP-Adapter checkpoint"]),
    (write_truncated, "ip-adapter_cut", ["'ip-adapter_cut.safetensors' cannot be used", "truncated"]),
    (write_face_id, "ip-adapter-faceid_sd15", ["'ip-adapter-faceid_sd15.safetensors' cannot be used",
                                               "is a variant mixkit does not run"]),
    (write_wide_bin, "ip-adapter_widebin", ["controlnet unit 0: IP-Adapter 'ip-adapter_widebin' "
                                            "(ip-adapter_widebin.bin) is made for a model (cross-attention width 48), "
                                            "but checkpoint"]),
])
def test_an_unusable_weights_file_is_422_before_a_job_is_queued(client, server, folder, unet, monkeypatch, write,
                                                                model, fragments):
    write(folder, unet)
    queued = []
    monkeypatch.setattr(server.state.worker, "submit", lambda *args, **kwargs: queued.append(args))
    response = generate(client, [ip_unit(model=model)])
    assert response.status_code == 422, response.text
    assert all(fragment in response.text for fragment in fragments), response.text
    assert queued == []
