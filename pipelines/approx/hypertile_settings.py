"""`HyperTile(...)`: A1111's nine Hypertile settings as one checked value, with its option names and infotext keys.

A1111 keeps them in Settings > Hypertile (`hypertile_enable_unet` ... `hypertile_swap_size_vae`) and writes
"Hypertile U-Net: True" / "Hypertile VAE: True" (and each size or depth only when it is not its default) into the
infotext, so a paste restores them. The same names and defaults here; bounds are A1111's sliders', except that a swap
size of 0 (which A1111's slider offers but its tile choice then fails on) is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

MAX_DEPTH = 3
MAX_TILE = 512
MAX_SWAP = 64

# Txt2ImgParams.hypertile field -> (A1111 option, infotext key)
_NAMES = {
    "unet": ("hypertile_enable_unet", "Hypertile U-Net"),
    "unet_hires": ("hypertile_enable_unet_secondpass", "Hypertile U-Net second pass"),
    "unet_max_depth": ("hypertile_max_depth_unet", "Hypertile U-Net max depth"),
    "unet_max_tile": ("hypertile_max_tile_unet", "Hypertile U-Net max tile size"),
    "unet_swap_size": ("hypertile_swap_size_unet", "Hypertile U-Net swap size"),
    "vae": ("hypertile_enable_vae", "Hypertile VAE"),
    "vae_max_depth": ("hypertile_max_depth_vae", "Hypertile VAE max depth"),
    "vae_max_tile": ("hypertile_max_tile_vae", "Hypertile VAE max tile size"),
    "vae_swap_size": ("hypertile_swap_size_vae", "Hypertile VAE swap size"),
}
UNET_SIZE_FIELDS = ("unet_max_depth", "unet_max_tile", "unet_swap_size")
VAE_SIZE_FIELDS = ("vae_max_depth", "vae_max_tile", "vae_swap_size")


@dataclass(frozen=True)
class HyperTile:
    """Tiled self-attention (approximate; `pipelines.approx.hypertile`). Defaults: A1111's, with the U-Net on.

    - `unet`: tile the U-Net's self-attention (every pass, the hires fix's second pass too);
      `unet_hires`: tile it in the hires fix's second pass only (when `unet` is off).
    - `*_max_depth` (0-3): the deepest attention level tiled (0: only the largest one);
      `*_max_tile` (0-512 px): cap on the tile size (tiles are at least 128 px);
      `*_swap_size` (1-64): how many of the largest tile counts are drawn from at random per attention call.
    - `vae`: tile the VAE decoder's mid-block attention (small change; `vae_max_depth` has no level below it).
    """

    unet: bool = True
    unet_hires: bool = False
    unet_max_depth: int = 3
    unet_max_tile: int = 256
    unet_swap_size: int = 3
    vae: bool = False
    vae_max_depth: int = 3
    vae_max_tile: int = 128
    vae_swap_size: int = 3

    def __post_init__(self) -> None:
        for name in ("unet", "unet_hires", "vae"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"HyperTile.{name} must be True or False, got {getattr(self, name)!r}")
        for name, low, high in (("max_depth", 0, MAX_DEPTH), ("max_tile", 0, MAX_TILE), ("swap_size", 1, MAX_SWAP)):
            for part in ("unet", "vae"):
                value = getattr(self, f"{part}_{name}")
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                    raise ValueError(f"HyperTile.{part}_{name} must be an integer in [{low}, {high}] (A1111's "
                                     f"{_NAMES[f'{part}_{name}'][0]}), got {value!r}")

    @property
    def enabled(self) -> bool:
        return self.unet or self.unet_hires or self.vae

    def unet_in(self, hires_second_pass: bool) -> bool:
        """Whether the U-Net is tiled in a first pass (or plain generation) or in a hires fix's second pass."""
        return self.unet or (hires_second_pass and self.unet_hires)

    def describe(self, hires_second_pass: bool = False) -> str:
        """The approximation line for reports and the CLI's warning."""
        parts = []
        if self.unet_in(hires_second_pass):
            parts.append(f"U-Net (max depth {self.unet_max_depth}, max tile {self.unet_max_tile} px, "
                         f"swap size {self.unet_swap_size})")
        if self.vae:
            parts.append(f"VAE (max tile {self.vae_max_tile} px, swap size {self.vae_swap_size})")
        return "HyperTile tiled self-attention: " + ", ".join(parts)

    # -- A1111's Settings and infotext --------------------------------------------------------------
    def options(self) -> dict[str, Any]:
        """A1111's option names and values."""
        return {_NAMES[item.name][0]: getattr(self, item.name) for item in fields(self)}

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> "HyperTile | None":
        """From A1111 option values (missing ones at their defaults); None when nothing is switched on."""
        chosen = {name: values[option] for name, (option, _) in _NAMES.items() if option in values}
        settings = cls(**{"unet": False, **chosen})
        return settings if settings.enabled else None

    def infotext_values(self, hires: bool = False) -> dict[str, Any]:
        """A1111's infotext keys: "Hypertile U-Net: True" with its sizes that differ from their defaults, the same for
        the VAE; `hires`: this is a hires-fix image, whose second pass alone may tile ("Hypertile U-Net second
        pass")."""
        default = HyperTile()
        values: dict[str, Any] = {}
        second_only = hires and self.unet_hires and not self.unet
        if self.unet:
            values[_NAMES["unet"][1]] = True
        if second_only:
            values[_NAMES["unet_hires"][1]] = True
        for names, on in ((UNET_SIZE_FIELDS, self.unet or second_only), (VAE_SIZE_FIELDS, self.vae)):
            if names is VAE_SIZE_FIELDS and self.vae:
                values[_NAMES["vae"][1]] = True
            for name in names:
                changed = on and getattr(self, name) != getattr(default, name)
                values[_NAMES[name][1]] = getattr(self, name) if changed else None
        return values

    @classmethod
    def from_infotext(cls, params: Mapping[str, Any]) -> "HyperTile | None":
        """From infotext values (`parse_infotext`); None when none of its switches is recorded. A malformed value
        raises ValueError naming the key."""
        chosen: dict[str, Any] = {}
        for name, (_, key) in _NAMES.items():
            if key not in params:
                continue
            text = str(params[key]).strip()
            if name in ("unet", "unet_hires", "vae"):
                if text not in ("True", "False"):
                    raise ValueError(f"infotext {key}: {text!r} is not True or False")
                chosen[name] = text == "True"
            else:
                try:
                    chosen[name] = int(text)
                except ValueError:
                    raise ValueError(f"infotext {key}: {text!r} is not an integer") from None
        if not any(chosen.get(name) for name in ("unet", "unet_hires", "vae")):
            return None
        return cls(**{"unet": False, **chosen})


INFOTEXT_KEYS = {name: key for name, (_, key) in _NAMES.items()}  # HyperTile field -> infotext key
HYPERTILE_OPTION_DEFAULTS = HyperTile(unet=False).options()  # A1111's: everything off
OPTION_FIELDS = {option: name for name, (option, _) in _NAMES.items()}  # A1111 option -> HyperTile field
INFOTEXT_OPTIONS = {key: option for option, key in _NAMES.values()}  # infotext key -> A1111 option


def check_hypertile_option(option: str, value: Any) -> Any:
    """One Hypertile option's value checked with HyperTile's own bounds (a whole float, as a slider sends, becomes an
    int); ValueError/TypeError naming the option."""
    field_name = OPTION_FIELDS[option]
    if isinstance(value, float) and value.is_integer() and not isinstance(HyperTile().__dict__[field_name], bool):
        value = int(value)
    try:
        HyperTile(**{field_name: value})
    except (TypeError, ValueError) as error:
        raise ValueError(f"{option}: {error}") from None
    return value


def as_hypertile(value: Any) -> HyperTile | None:
    """`Txt2ImgParams.hypertile` checked: None, a HyperTile, or a dict of its field names (made into one)."""
    if value is None or isinstance(value, HyperTile):
        return value
    if isinstance(value, Mapping):
        known = {item.name for item in fields(HyperTile)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise TypeError(f"hypertile has unknown field(s) {unknown}; known: {sorted(known)}")
        return HyperTile(**value)
    raise TypeError(f"hypertile must be None, a HyperTile(...) or a dict of its fields, got {type(value).__name__}: "
                    f"{value!r}")
