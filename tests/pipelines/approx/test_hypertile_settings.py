"""HyperTile's settings: A1111's option names, defaults and bounds, infotext keys, and their round trips."""

import pytest

from pipelines.approx.hypertile_settings import HYPERTILE_OPTION_DEFAULTS, HyperTile, as_hypertile


def test_option_names_and_defaults_are_a1111s():
    assert HYPERTILE_OPTION_DEFAULTS == {
        "hypertile_enable_unet": False, "hypertile_enable_unet_secondpass": False, "hypertile_max_depth_unet": 3,
        "hypertile_max_tile_unet": 256, "hypertile_swap_size_unet": 3, "hypertile_enable_vae": False,
        "hypertile_max_depth_vae": 3, "hypertile_max_tile_vae": 128, "hypertile_swap_size_vae": 3}


def test_options_round_trip_and_nothing_switched_on_is_none():
    settings = HyperTile(unet=False, unet_hires=True, unet_max_depth=1, unet_swap_size=5, vae=True, vae_max_tile=256)
    assert HyperTile.from_options(settings.options()) == settings
    assert HyperTile.from_options(HYPERTILE_OPTION_DEFAULTS) is None
    assert HyperTile.from_options({"hypertile_enable_unet": True}) == HyperTile()


@pytest.mark.parametrize("settings", [HyperTile(), HyperTile(unet_max_depth=0, unet_max_tile=512, unet_swap_size=1),
                                      HyperTile(unet=False, vae=True, vae_max_depth=2, vae_swap_size=64),
                                      HyperTile(unet=False, unet_hires=True, unet_max_tile=64, vae=True)])
def test_infotext_round_trip(settings):
    """A hires-fix image's infotext (the second-pass switch is written there only)."""
    values = {key: str(value) for key, value in settings.infotext_values(hires=True).items() if value is not None}
    assert HyperTile.from_infotext(values) == settings


def test_infotext_writes_only_switches_that_are_on_and_sizes_that_differ():
    assert HyperTile().infotext_values() == {"Hypertile U-Net": True, "Hypertile U-Net max depth": None,
                                             "Hypertile U-Net max tile size": None,
                                             "Hypertile U-Net swap size": None, "Hypertile VAE max depth": None,
                                             "Hypertile VAE max tile size": None, "Hypertile VAE swap size": None}
    second = HyperTile(unet=False, unet_hires=True, unet_swap_size=4)
    assert {k: v for k, v in second.infotext_values(hires=True).items() if v is not None} == {
        "Hypertile U-Net second pass": True, "Hypertile U-Net swap size": 4}
    assert not any(second.infotext_values(hires=False).values())
    assert HyperTile.from_infotext({"Steps": "20"}) is None


@pytest.mark.parametrize("values, message", [({"Hypertile U-Net": "yes"}, "not True or False"),
                                             ({"Hypertile U-Net": "True", "Hypertile U-Net swap size": "x"},
                                              "not an integer"),
                                             ({"Hypertile VAE": "True", "Hypertile VAE max depth": "9"},
                                              r"vae_max_depth must be an integer in \[0, 3\]")])
def test_a_malformed_infotext_value_is_refused(values, message):
    with pytest.raises(ValueError, match=message):
        HyperTile.from_infotext(values)


@pytest.mark.parametrize("field, value", [("unet_max_depth", 4), ("unet_max_tile", 513), ("unet_max_tile", -1),
                                          ("unet_swap_size", 0), ("vae_swap_size", 65), ("vae_max_tile", 1.5),
                                          ("unet_max_depth", True)])
def test_bounds_are_a1111s_sliders(field, value):
    with pytest.raises(ValueError, match=f"HyperTile.{field} must be an integer"):
        HyperTile(**{field: value})


def test_switches_must_be_bools_and_params_take_a_dict():
    with pytest.raises(TypeError, match="HyperTile.vae must be True or False"):
        HyperTile(vae=1)
    assert as_hypertile({"unet_max_tile": 128}) == HyperTile(unet_max_tile=128)
    with pytest.raises(TypeError, match=r"unknown field\(s\) \['tile'\]"):
        as_hypertile({"tile": 128})
    with pytest.raises(TypeError, match="hypertile must be None"):
        as_hypertile(True)


def test_the_hires_switch_applies_to_the_second_pass_only():
    settings = HyperTile(unet=False, unet_hires=True)
    assert (settings.unet_in(False), settings.unet_in(True)) == (False, True)
    assert HyperTile().unet_in(True)
