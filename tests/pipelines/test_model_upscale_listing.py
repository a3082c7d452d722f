"""A1111's `/sdapi/v1/upscalers` listing: the resamplers with A1111's default scale, a release file under its name and
its stem, one registry entry behind both."""

from pipelines.model_upscale import LOADED
from pipelines.model_upscale_listing import listed_upscaler_names, upscaler_listing
from pipelines.upscale import UPSCALERS, upscale_image
from tests.pipelines.test_model_upscale import random_image


def test_release_files_answer_to_their_stems_too_and_are_listed_as_a1111_lists_them(release_files, registered):
    scan = registered(release_files, tile_size=0)
    assert scan.names == ["4x-UltraSharp", "DAT x2", "SwinIR_4x", "R-ESRGAN General 4xV3"]  # one entry per file
    assert UPSCALERS.get("DAT_x2") is UPSCALERS.get("DAT x2")
    assert UPSCALERS.get("SwinIR_4x") is UPSCALERS.get("SwinIR 4x")
    assert UPSCALERS.get("realesr-general-x4v3") is UPSCALERS.get("R-ESRGAN General 4xV3")
    image = random_image(12, 10)
    assert upscale_image(image, 2, upscaler="DAT_x2").tobytes() == upscale_image(image, 2, upscaler="DAT x2").tobytes()
    # A1111's SwinIR and DAT folders list every file by stem, DAT's release entries by name as well (SwinIR's
    # download entry "SwinIR 4x" only while no file is there); its Real-ESRGAN folder only the release names
    listed = listed_upscaler_names()
    assert listed[0] == "None" and listed[-5:] == ["4x-UltraSharp", "DAT x2", "DAT_x2", "SwinIR_4x",
                                                   "R-ESRGAN General 4xV3"]
    LOADED.clear()


def test_the_resamplers_and_none_are_listed_with_a1111s_default_scale_4():
    for name in ("None", "Lanczos", "Nearest", "Bicubic"):
        assert upscaler_listing(name) == {"name": name, "model_name": None, "model_path": None, "model_url": None,
                                          "scale": 4}


def test_dat_enabled_models_leaves_a_disabled_release_name_out_and_its_stem_in(release_files, registered):
    from pipelines.model_upscale_listing import check_dat_enabled_models

    registered(release_files, tile_size=0)
    every = listed_upscaler_names()
    assert listed_upscaler_names(dat_enabled=["DAT x3", "DAT x4"]) == [name for name in every if name != "DAT x2"]
    assert "DAT_x2" in listed_upscaler_names(dat_enabled=[])
    assert check_dat_enabled_models(("DAT x4", "DAT x2")) == ["DAT x2", "DAT x4"]  # A1111's order
    for bad in ("DAT x4", ["DAT x5"], [4], None):
        try:
            check_dat_enabled_models(bad)
        except ValueError as error:
            assert "must be a list of DAT release names from ['DAT x2', 'DAT x3', 'DAT x4']" in str(error)
        else:
            raise AssertionError(f"{bad!r} was accepted")
    LOADED.clear()


def test_scunet_release_files_are_listed_by_a1111s_names_and_their_stems(tmp_path, registered):
    from mixkit.testing.tiny_upscalers import TINY_SCUNET, save_upscaler, tiny_upscaler

    save_upscaler(tiny_upscaler(TINY_SCUNET, seed=1), tmp_path / "scunet_color_real_gan.pth", "scunet")
    save_upscaler(tiny_upscaler(TINY_SCUNET, seed=2), tmp_path / "ScuNET.pth", "scunet")  # A1111's own download
    scan = registered(tmp_path, tile_size=0)
    assert scan.names == ["ScuNET", "ScuNET GAN"]  # the release file holds "ScuNET GAN"; ScuNET.pth keeps its stem
    assert UPSCALERS.get("scunet_color_real_gan") is UPSCALERS.get("ScuNET GAN")
    # A1111's ScuNET folder lists every file by stem; the release name is listed too, as DAT's
    assert listed_upscaler_names()[-3:] == ["ScuNET", "ScuNET GAN", "scunet_color_real_gan"]
    assert upscaler_listing("ScuNET GAN") == {"name": "ScuNET GAN", "model_name": "ScuNET", "model_url": None,
                                              "model_path": str(tmp_path / "scunet_color_real_gan.pth"), "scale": 1}
    LOADED.clear()
