"""A server with A1111's upscaler model folders: the files listed as A1111 lists them, usable in Extras and hires fix
over HTTP, tiled as the ESRGAN_tile options say; the registry is clean again after the server stops."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from mixkit.models.upscalers.rrdbnet import RRDBNetConfig
from mixkit.testing.tiny_upscalers import (TINY_DAT, TINY_HAT, TINY_RRDB, TINY_SCUNET, TINY_SRVGG, TINY_SWINIR,
                                           save_upscaler, tiny_upscaler)
from pipelines.model_upscale import ModelUpscaler
from pipelines.upscale import UPSCALERS, upscale_image
from webui.base64_images import encode_png_base64

from .png_payloads import decode_png

X2 = RRDBNetConfig(in_channels=12, features=8, growth=4, blocks=1)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("upscalers")
    for folder in ("ESRGAN", "RealESRGAN", "SwinIR", "DAT", "ScuNET"):
        (root / folder).mkdir()
    save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), root / "ESRGAN" / "4x-UltraSharp.pth", "esrgan")
    save_upscaler(tiny_upscaler(X2, seed=2), root / "RealESRGAN" / "RealESRGAN_x2plus.pth", "basicsr", wrapper="params_ema")
    save_upscaler(tiny_upscaler(TINY_SRVGG, seed=3), root / "RealESRGAN" / "realesr-general-x4v3.safetensors", "srvgg")
    (root / "RealESRGAN" / "README.pth").write_bytes(b"not a model")
    # A1111's SwinIR download is SwinIR_4x.pth, listed by that stem once downloaded; here a tiny x2 network
    save_upscaler(tiny_upscaler(TINY_SWINIR, seed=4), root / "SwinIR" / "SwinIR_4x.pth", "swinir", wrapper="params_ema")
    save_upscaler(tiny_upscaler(TINY_DAT, seed=5), root / "DAT" / "DAT_x2.pth", "dat", wrapper="params")
    # A1111 1.8+ runs HAT files from its ESRGAN folder
    save_upscaler(tiny_upscaler(TINY_HAT, seed=6), root / "ESRGAN" / "4xNomos8kHAT-L.pth", "hat")
    save_upscaler(tiny_upscaler(TINY_SCUNET, seed=7), root / "ScuNET" / "scunet_color_real_gan.pth", "scunet")
    return root


@pytest.fixture(scope="module")
def server(tiny_sd1_dir, folders, serving):
    from webui.config import ServerConfig

    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(folders / "outputs"), ui=False,
                          esrgan_models_path=str(folders / "ESRGAN"), realesrgan_models_path=str(folders / "RealESRGAN"),
                          swinir_models_path=str(folders / "SwinIR"), dat_models_path=str(folders / "DAT"),
                          scunet_models_path=str(folders / "ScuNET"))
    with serving(config) as running:
        yield running


def picture(width=40, height=24, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def test_upscalers_lists_each_file_with_a1111s_fields(client, folders):
    listed = {item["name"]: item for item in client.get("/sdapi/v1/upscalers").json()}
    assert [name for name in listed][:4] == ["None", "Lanczos", "Nearest", "Bicubic"]
    # A1111's UpscalerData scale default: its None and resampler entries report 4, not null
    assert listed["Lanczos"] == {"name": "Lanczos", "model_name": None, "model_path": None, "model_url": None,
                                 "scale": 4}
    assert listed["None"]["scale"] == 4 and listed["Nearest"]["scale"] == 4
    assert listed["4x-UltraSharp"] == {"name": "4x-UltraSharp", "model_name": "ESRGAN", "model_url": None, "scale": 4,
                                       "model_path": str(folders / "ESRGAN" / "4x-UltraSharp.pth")}
    # Real-ESRGAN's release files under A1111's names
    assert (listed["R-ESRGAN 2x+"]["scale"], listed["R-ESRGAN General 4xV3"]["model_name"]) == (2, "SRVGG")
    assert "README" not in listed  # not a model: refused (logged), not offered
    # A1111 lists its SwinIR download by stem once the file is there: "SwinIR 4x" (the name of the download entry
    # listed only while no file exists) is not listed beside it, though a request naming it still runs the file
    assert listed["SwinIR_4x"] == {"name": "SwinIR_4x", "model_name": "SwinIR", "model_url": None, "scale": 2,
                                   "model_path": str(folders / "SwinIR" / "SwinIR_4x.pth")}
    assert "SwinIR 4x" not in listed
    assert listed["DAT x2"] == {"name": "DAT x2", "model_name": "DAT", "model_url": None, "scale": 2,
                                "model_path": str(folders / "DAT" / "DAT_x2.pth")}
    # A1111 lists its DAT folder's files by stem, and its enabled DAT release entries by name: the same file twice
    names = list(listed)
    assert names[names.index("DAT x2") + 1] == "DAT_x2"
    assert listed["DAT_x2"] == {**listed["DAT x2"], "name": "DAT_x2"}
    assert "RealESRGAN_x2plus" not in listed  # A1111's Real-ESRGAN folder lists release files by their names only
    assert listed["4xNomos8kHAT-L"] == {"name": "4xNomos8kHAT-L", "model_name": "HAT", "model_url": None, "scale": 2,
                                        "model_path": str(folders / "ESRGAN" / "4xNomos8kHAT-L.pth")}
    # ScuNET's release file under A1111's name, and by stem as A1111's ScuNET folder lists it; a same-size denoiser
    assert listed["ScuNET GAN"] == {"name": "ScuNET GAN", "model_name": "ScuNET", "model_url": None, "scale": 1,
                                    "model_path": str(folders / "ScuNET" / "scunet_color_real_gan.pth")}
    assert listed["scunet_color_real_gan"] == {**listed["ScuNET GAN"], "name": "scunet_color_real_gan"}
    assert client.get("/sdapi/v1/realesrgan-models").json() == [
        {"name": "R-ESRGAN 2x+", "path": str(folders / "RealESRGAN" / "RealESRGAN_x2plus.pth"), "scale": 2},
        {"name": "R-ESRGAN General 4xV3", "path": str(folders / "RealESRGAN" / "realesr-general-x4v3.safetensors"),
         "scale": 4}]
    assert [m["name"] for m in client.get("/sdapi/v1/latent-upscale-modes").json()][0] == "Latent"
    flags = client.get("/sdapi/v1/cmd-flags").json()
    assert flags["esrgan_models_path"] == str(folders / "ESRGAN")
    assert flags["swinir_models_path"] == str(folders / "SwinIR") and flags["dat_models_path"] == str(folders / "DAT")
    assert flags["scunet_models_path"] == str(folders / "ScuNET")


@pytest.mark.parametrize("name, scale", [("4x-UltraSharp", 2), ("R-ESRGAN 2x+", 2), ("R-ESRGAN General 4xV3", 4),
                                         ("SwinIR 4x", 2), ("DAT x2", 2), ("DAT_x2", 2), ("SwinIR_4x", 2),
                                         ("RealESRGAN_x2plus", 2), ("4xNomos8kHAT-L", 2), ("ScuNET GAN", 2),
                                         ("scunet_color_real_gan", 1)])
def test_extras_upscale_with_a_model_file(client, name, scale):
    source = picture()
    response = client.post("/sdapi/v1/extra-single-image",
                           json={"image": encode_png_base64(source), "upscaler_1": name, "upscaling_resize": scale})
    assert response.status_code == 200, response.text
    result = decode_png(response.json()["image"]).convert("RGB")
    assert result.size == (40 * scale, 24 * scale)
    assert result.tobytes() == upscale_image(source, scale, upscaler=name).tobytes()
    batch = client.post("/sdapi/v1/extra-batch-images", json={
        "imageList": [{"data": encode_png_base64(source), "name": "a.png"}], "upscaler_1": name,
        "upscaling_resize": scale})
    assert decode_png(batch.json()["images"][0]).convert("RGB").tobytes() == result.tobytes()


def test_hires_fix_over_http_with_a_model_upscaler(client):
    response = client.post("/sdapi/v1/txt2img", json={
        "prompt": "a castle", "steps": 2, "width": 32, "height": 32, "seed": 3, "enable_hr": True, "hr_scale": 2,
        "hr_upscaler": "4x-UltraSharp", "hr_second_pass_steps": 1, "denoising_strength": 0.5})
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["images"][0]).size == (64, 64)
    assert "Hires upscaler: 4x-UltraSharp" in response.json()["info"]


@pytest.mark.parametrize("name", ["DAT_x2", "SwinIR_4x"])
def test_hires_fix_takes_a1111s_other_name_for_a_release_file(client, name):
    # an infotext of A1111 names the file as A1111 listed it ("Hires upscaler: DAT_x2"); it runs that file here
    response = client.post("/sdapi/v1/txt2img", json={
        "prompt": "a castle", "steps": 2, "width": 32, "height": 32, "seed": 3, "enable_hr": True, "hr_scale": 2,
        "hr_upscaler": name, "hr_second_pass_steps": 1, "denoising_strength": 0.5})
    assert response.status_code == 200, response.text
    assert f"Hires upscaler: {name}" in response.json()["info"]


@pytest.mark.parametrize("name", ["4xNomos8kHAT-L", "ScuNET GAN", "scunet_color_real_gan"])
def test_hires_fix_runs_hat_and_scunet_files(client, name):
    # ScuNET is a same-size denoiser: hires fix runs it once, then resizes to the hires size, as A1111
    response = client.post("/sdapi/v1/txt2img", json={
        "prompt": "a castle", "steps": 2, "width": 32, "height": 32, "seed": 3, "enable_hr": True, "hr_scale": 2,
        "hr_upscaler": name, "hr_second_pass_steps": 1, "denoising_strength": 0.5})
    assert response.status_code == 200, response.text
    assert decode_png(response.json()["images"][0]).size == (64, 64)
    assert f"Hires upscaler: {name}" in response.json()["info"]


def test_dat_enabled_models_chooses_the_dat_release_names_listed(client):
    assert client.get("/sdapi/v1/options").json()["dat_enabled_models"] == ["DAT x2", "DAT x3", "DAT x4"]
    assert client.post("/sdapi/v1/options", json={"dat_enabled_models": ["DAT x4"]}).status_code == 200
    try:
        names = [item["name"] for item in client.get("/sdapi/v1/upscalers").json()]
        assert "DAT x2" not in names and "DAT_x2" in names  # A1111's DAT folder still lists the file by stem
        refused = client.post("/sdapi/v1/options", json={"dat_enabled_models": ["DAT x8"]})
        assert refused.status_code == 422 and "dat_enabled_models must be a list of DAT release names" in refused.text
    finally:
        client.post("/sdapi/v1/options", json={"dat_enabled_models": ["DAT x2", "DAT x3", "DAT x4"]})
    assert "DAT x2" in [item["name"] for item in client.get("/sdapi/v1/upscalers").json()]


def test_swin_and_dat_tile_options_retile_only_their_networks(client):
    options = client.get("/sdapi/v1/options").json()
    assert [options[key] for key in ("SWIN_tile", "SWIN_tile_overlap", "DAT_tile", "DAT_tile_overlap")] == [192, 8, 192, 8]
    assert options["SWIN_torch_compile"] is False
    before = {name: (e.tile_size, e.tile_overlap) for name, e in UPSCALERS.items() if isinstance(e, ModelUpscaler)}
    assert client.post("/sdapi/v1/options", json={"SWIN_tile": 64, "SWIN_tile_overlap": 4, "DAT_tile": 0,
                                                  "SWIN_torch_compile": True}).status_code == 200
    after = {name: (e.tile_size, e.tile_overlap) for name, e in UPSCALERS.items() if isinstance(e, ModelUpscaler)}
    assert after == {**before, "SwinIR_4x": (64, 4), "DAT x2": (0, 8)}
    assert UPSCALERS.get("SwinIR 4x").compile and not UPSCALERS.get("4x-UltraSharp").compile
    refused = client.post("/sdapi/v1/options", json={"DAT_tile": 16})
    assert refused.status_code == 422 and "tile_overlap must be an integer in [0, 7] for tile_size 16" in refused.text
    refused = client.post("/sdapi/v1/options", json={"SWIN_torch_compile": "yes"})
    assert refused.status_code == 422 and "SWIN_torch_compile must be true or false, got 'yes'" in refused.text
    client.post("/sdapi/v1/options", json={"SWIN_tile": 192, "SWIN_tile_overlap": 8, "DAT_tile": 192,
                                           "SWIN_torch_compile": False})


def test_scunet_tile_options_retile_only_the_scunet_upscalers(client):
    options = client.get("/sdapi/v1/options").json()
    assert (options["SCUNET_tile"], options["SCUNET_tile_overlap"]) == (256, 8)  # A1111's defaults
    assert (UPSCALERS.get("ScuNET GAN").tile_size, UPSCALERS.get("ScuNET GAN").tile_overlap) == (256, 8)
    before = {name: (e.tile_size, e.tile_overlap) for name, e in UPSCALERS.items() if isinstance(e, ModelUpscaler)}
    try:
        assert client.post("/sdapi/v1/options", json={"SCUNET_tile": 64, "SCUNET_tile_overlap": 16}).status_code == 200
        after = {name: (e.tile_size, e.tile_overlap) for name, e in UPSCALERS.items() if isinstance(e, ModelUpscaler)}
        assert after == {**before, "ScuNET GAN": (64, 16)}
        refused = client.post("/sdapi/v1/options", json={"SCUNET_tile_overlap": 40})
        assert refused.status_code == 422 and "tile_overlap must be an integer in [0, 31] for tile_size 64" in refused.text
    finally:
        client.post("/sdapi/v1/options", json={"SCUNET_tile": 256, "SCUNET_tile_overlap": 8})


def test_refresh_upscalers_picks_up_new_files_and_drops_removed_ones(tiny_sd1_dir, tmp_path, serving):
    import httpx

    from webui.config import ServerConfig

    # (the module's server holds "DAT x2": another release name here)
    folder = tmp_path / "DAT"
    folder.mkdir()
    save_upscaler(tiny_upscaler(TINY_DAT, seed=5), folder / "DAT_x3.pth", "dat")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False,
                          dat_models_path=str(folder))
    with serving(config, load_model=False) as running, httpx.Client(base_url=running.url, timeout=120) as http:
        save_upscaler(tiny_upscaler(TINY_RRDB, seed=1), folder / "4x_foolhardy_Remacri.pth", "esrgan")
        (folder / "DAT_x3.pth").unlink()
        (folder / "half-copied.pth").write_bytes(b"PK\x03\x04")
        response = http.post("/sdapi/v1/refresh-upscalers")
        assert response.status_code == 200, response.text
        assert response.json()["upscalers"] == ["4x_foolhardy_Remacri"]
        # the reasons are error messages: paths inside the folder are named relative to it, as in every error body
        assert list(response.json()["refused"]) == ["half-copied.pth"]
        reason = response.json()["refused"]["half-copied.pth"]
        assert "'half-copied.pth' looks like a torch-zip checkpoint but cannot be read" in reason
        names = [item["name"] for item in http.get("/sdapi/v1/upscalers").json()]
        assert "4x_foolhardy_Remacri" in names and "DAT x3" not in names and "DAT_x3" not in names
        gone = http.post("/sdapi/v1/extra-single-image", json={"image": encode_png_base64(picture()),
                                                                "upscaler_1": "DAT x3", "upscaling_resize": 2})
        assert gone.status_code == 422 and "Unknown upscaler 'DAT x3'" in gone.text
        (folder / "half-copied.pth").unlink(), (folder / "4x_foolhardy_Remacri.pth").unlink(), folder.rmdir()
        missing = http.post("/sdapi/v1/refresh-upscalers")
        assert missing.status_code == 409
        assert missing.json()["detail"] == ("Upscaler models folder '<dat_models_path>' does not exist; create it or fix "
                                            "the path.")
        assert "4x_foolhardy_Remacri" in UPSCALERS  # a failed refresh changes nothing
    assert "4x_foolhardy_Remacri" not in UPSCALERS


def test_esrgan_tile_options_retile_the_esrgan_and_real_esrgan_upscalers(client):
    options = client.get("/sdapi/v1/options").json()
    assert (options["ESRGAN_tile"], options["ESRGAN_tile_overlap"]) == (192, 8)
    assert client.post("/sdapi/v1/options", json={"ESRGAN_tile": 64, "ESRGAN_tile_overlap": 16}).status_code == 200
    assert {name: (e.tile_size, e.tile_overlap) for name, e in UPSCALERS.items() if isinstance(e, ModelUpscaler)
            and e.architecture in ("ESRGAN", "SRVGG", "HAT")} == {name: (64, 16) for name in (
                "4x-UltraSharp", "4xNomos8kHAT-L", "R-ESRGAN 2x+", "R-ESRGAN General 4xV3")}
    assert (UPSCALERS.get("SwinIR 4x").tile_size, UPSCALERS.get("DAT x2").tile_size) == (192, 192)  # their own options
    refused = client.post("/sdapi/v1/options", json={"ESRGAN_tile_overlap": 40})
    assert refused.status_code == 422 and "tile_overlap must be an integer in [0, 31] for tile_size 64" in refused.text
    assert client.get("/sdapi/v1/options").json()["ESRGAN_tile_overlap"] == 16
    client.post("/sdapi/v1/options", json={"ESRGAN_tile": 192, "ESRGAN_tile_overlap": 8})


def test_the_registry_is_clean_after_the_server_stops(tiny_sd1_dir, tmp_path, serving):
    from webui.config import ServerConfig

    before = UPSCALERS.names()
    save_upscaler(tiny_upscaler(TINY_RRDB), tmp_path / "4x_foolhardy_Remacri.pth", "esrgan")
    config = ServerConfig(models=[str(tiny_sd1_dir)], output_dir=str(tmp_path / "out"), ui=False,
                          esrgan_models_path=str(tmp_path))
    with serving(config, load_model=False):
        assert "4x_foolhardy_Remacri" in UPSCALERS
    assert UPSCALERS.names() == before


def test_a_missing_folder_is_refused_at_start(tiny_sd1_dir, tmp_path):
    from webui.config import ServerConfig, check_server_config

    with pytest.raises(ValueError, match="--esrgan-models-path .*nowhere.* is not a folder"):
        check_server_config(ServerConfig(models=[str(tiny_sd1_dir)], esrgan_models_path=str(tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="--swinir-models-path .*nowhere.* is not a folder"):
        check_server_config(ServerConfig(models=[str(tiny_sd1_dir)], swinir_models_path=str(tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="--dat-models-path .*nowhere.* is not a folder"):
        check_server_config(ServerConfig(models=[str(tiny_sd1_dir)], dat_models_path=str(tmp_path / "nowhere")))
    with pytest.raises(ValueError, match="--scunet-models-path .*nowhere.* is not a folder"):
        check_server_config(ServerConfig(models=[str(tiny_sd1_dir)], scunet_models_path=str(tmp_path / "nowhere")))


def test_extras_refuses_a_model_pass_over_the_budget_before_queueing(client):
    # x2 of 1100x1100 is 2200x2200, but the x4 network makes 4400x4400 on the way: over 4096x4096
    source = Image.new("RGB", (1100, 1100), (30, 60, 90))
    response = client.post("/sdapi/v1/extra-single-image", json={
        "image": encode_png_base64(source), "upscaler_1": "4x-UltraSharp", "upscaling_resize": 2})
    assert response.status_code == 422, response.text
    assert "'4x-UltraSharp' (x4) would make a 4400x4400 image on the way to 2200x2200" in response.text
