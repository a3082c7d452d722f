"""The ControlNet units of `mixkit generate` / `mixkit img2img`: checked before the model load, built after it.

The `--controlnet` / `--cn-*` flags (webui.cli.controlnet_flags) give each unit's fields as sd-webui-controlnet's
API unit keys; here the pictures are read from their files and every unit goes through the API's own checks
(`webui.api_controlnet.unit_spec`: module, model, weight, guidance window, control mode, resize mode, processor
resolution, thresholds, mask size), so a unit is refused, or gives the same image, as it does over HTTP. Models are
named as the server names them (a name in `--controlnet-dir`, with or without the extension's " [hash]") or given
as a path. An `--infotext` with `ControlNet N` keys recreates its units: unit N takes the fields the command line's
unit N leaves out from the infotext's, and an infotext unit past the command line's is recreated whole. No infotext
holds a control picture, so such a unit needs one from `--controlnet MODEL:IMAGE` in `generate`; in `img2img` it
takes the init image, as the extension does.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The `ControlNet N` infotext fields (pipelines.controlnet.parse_unit keys) a recreated unit takes: the extension's
# API unit keys. Others (`Hr Option`, `Save Detected Map`, fields of newer extension versions) are named as unused.
INFOTEXT_UNIT_KEYS = ("module", "model", "weight", "resize_mode", "processor_res", "threshold_a", "threshold_b",
                      "guidance_start", "guidance_end", "pixel_perfect", "control_mode")


class ControlNetCatalog:
    """The ControlNets a command's units name: a name in `--controlnet-dir` (resolved as the server resolves it,
    `webui.controlnet_models.ControlNetModels`) or a ControlNet file / diffusers folder. It answers
    `webui.api_controlnet.unit_spec` and `build_units` as the server's catalog does; a path's infotext name is its
    file stem or folder name."""

    def __init__(self, folder: str | None) -> None:
        from pipelines.ip_adapter_store import IPAdapterStore
        from webui.controlnet_models import ControlNetModels

        # one command keeps every model it reads (cache_size=None): its units all run in its one job
        self.folder = None if folder is None else ControlNetModels(folder, cache_size=None)
        self.paths: dict[str, Path] = {}
        self._loaded: dict[str, object] = {}
        # IP-Adapter units' weights: what the unit check reads (a `.bin` is read whole) the generation reuses
        # (`webui.cli.ip_adapter_units.use_unit_store`), so the command reads each file once
        self.ip_adapters = self.folder.ip_adapters if self.folder is not None else IPAdapterStore()

    def resolve(self, name: object) -> str:
        from webui.controlnet_models import SUFFIXES

        text = str(name).strip()
        path = Path(text).expanduser()
        if path.exists():
            if path.is_dir() and not (path / "config.json").is_file():
                raise ValueError(f"ControlNet {text!r} is a folder without config.json; give a diffusers ControlNet "
                                 "folder or a ControlNet file")
            if path.is_file() and path.suffix.lower() not in SUFFIXES:
                raise ValueError(f"ControlNet {text!r} is not a ControlNet file ({', '.join(SUFFIXES)}); to give its "
                                 "control picture write --controlnet MODEL:IMAGE")
            key = path.stem if path.is_file() else path.resolve().name
            return self._remember(key, path.resolve())
        if self.folder is None:
            raise FileNotFoundError(f"ControlNet model {text!r} is no file or folder, and there is no --controlnet-dir "
                                    "to look it up by name; pass the model's path, or --controlnet-dir DIR")
        try:
            key = self.folder.resolve(text)
        except ValueError as error:
            raise ValueError(f"{error} (models in --controlnet-dir {self.folder.folder})") from None
        return self._remember(key, self.folder.sources()[key])

    def sources(self) -> dict[str, Path]:
        """The models resolved so far, by key (where `webui.api_ip_adapter` looks a unit's weights file up)."""
        return dict(self.paths)

    def _remember(self, key: str, path: Path) -> str:
        known = self.paths.setdefault(key, path)
        if known != path:
            raise ValueError(f"two different ControlNets are both called {key!r} ({known} and {path}); the infotext "
                             "names a unit's model by that name, so rename one of them")
        return key

    def family(self, key: str):
        """The model family the ControlNet is made for, read without loading it; None when it cannot be told."""
        from pipelines.controlnet.family import read_family

        try:
            return read_family(self.paths[key])
        except (ValueError, OSError):  # a broken file: its load reports it with the loader's message
            return None

    def load(self, key: str, base_unet):
        """The loaded ControlNetModel, named `key` in the infotext (single files get their config from `base_unet`)."""
        from pipelines.controlnet import load_controlnet

        if key not in self._loaded:
            model = load_controlnet(self.paths[key], base_unet=base_unet)
            model.register_to_config(_name_or_path=key)
            self._loaded[key] = model
        return self._loaded[key]


def command_line_units(args: argparse.Namespace) -> list[dict]:
    """Every unit the command line gives, {"flag": label, "fields": API unit keys}: --controlnet-json's, then
    --controlnet's; IP-Adapter units (`webui.cli.ip_adapter_units`) among them."""
    given = list(getattr(args, "controlnet", None) or [])
    if getattr(args, "controlnet_json", None) is not None:  # the file's units first, then --controlnet's
        from webui.cli.controlnet_json import json_units

        given = json_units(args.controlnet_json) + given
    return given


def requested_units(args: argparse.Namespace, written: dict | None) -> list[tuple[str, dict]]:
    """(label, API unit fields) of every ControlNet unit: the command line's, each filled from the infotext's unit of
    the same number, then the infotext's units past them. IP-Adapter units are left to `webui.cli.ip_adapter_units`
    (the infotext does not number them among the ControlNets)."""
    from pipelines.controlnet import controlnet_units_from_infotext
    from webui.api_ip_adapter import is_ip_adapter_module

    given = [unit for unit in command_line_units(args) if not is_ip_adapter_module(unit["fields"].get("module"))]
    pasted = controlnet_units_from_infotext(written) if written else []
    unused = []
    units = []
    for index in range(max(len(given), len(pasted))):
        fields = {}
        if index < len(pasted):
            unused += [f"ControlNet {index} {key}: {value}" for key, value in pasted[index].items()
                       if key not in INFOTEXT_UNIT_KEYS and not (key == "hr_option" and value == "Both")]
            fields = {key: value for key, value in pasted[index].items() if key in INFOTEXT_UNIT_KEYS}
        if index < len(given):
            fields.update(given[index]["fields"])
            label = f"ControlNet {index} ({given[index]['flag']})"
        else:
            label = f"--infotext's ControlNet {index}"
        if "model" not in fields:
            raise ValueError(f"{label} names no model (no 'Model:' field); add one to the infotext, or give the unit "
                             "with --controlnet MODEL[:IMAGE]")
        units.append((label, fields))
    if unused:
        print("mixkit: warning: --infotext ControlNet fields not honoured: " + "; ".join(unused), file=sys.stderr)
    return units


def controlnet_specs(args: argparse.Namespace, written: dict | None, img2img: bool):
    """(UnitSpecs, catalog) of the command's units, every field and picture checked; ([], None) without units."""
    from pipelines.controlnet import ControlNetLimits
    from webui.api_controlnet import unit_spec
    from webui.cli.controlnet_flags import in_option_terms
    from webui.cli.controlnet_json import read_picture

    units = requested_units(args, written)
    if not units:
        if getattr(args, "controlnet_dir", None) is not None:
            from webui.cli.generate_checks import check_folder

            check_folder(args.controlnet_dir, "ControlNet folder", "--controlnet-dir", "the folder of your ControlNets")
        return [], None
    limit = ControlNetLimits().max_units
    if len(units) > limit:
        raise ValueError(f"{len(units)} ControlNet units (--controlnet-json, --controlnet and --infotext's ControlNet "
                         f"keys); at most {limit} run in one generation, remove some")
    catalog = ControlNetCatalog(args.controlnet_dir)
    specs = []
    for label, fields in units:
        fields = dict(fields)
        image = fields.pop("image", None)
        mask = fields.pop("mask", None)
        region = fields.pop("effective_region_mask", None)
        try:
            catalog.resolve(fields["model"])  # first: `--controlnet edges.png` is a missing model, not a missing picture
        except (ValueError, FileNotFoundError) as error:
            raise type(error)(f"{label}: {error}") from None
        if image is None and not img2img:
            how = "it has no control picture" + (" (an infotext holds none)" if label.startswith("--infotext") else "")
            raise ValueError(f"{label}: {how}; write --controlnet MODEL:IMAGE or add --cn-image IMAGE after it "
                             "(only img2img falls back to its init image)")
        if str(fields.get("hr_option", "Both")).lower() != "both":
            raise ValueError(f"{label}: hr_option {fields['hr_option']!r}: the units of `mixkit generate` guide both "
                             "hires-fix passes; leave hr_option out (or \"Both\")")
        try:
            image = None if image is None else read_picture(image, "image")
            mask = None if mask is None else read_picture(mask, "--cn-mask", mask=True)
            region = None if region is None else read_picture(region, "--cn-region-mask", mask=True)
        except (ValueError, FileNotFoundError) as error:
            raise type(error)(f"{label}: {error}") from None
        try:
            spec = unit_spec(label, fields, image, catalog, mask)
        except (ValueError, TypeError) as error:
            raise type(error)(in_option_terms(str(error))) from None
        spec.effective_region_mask = region
        specs.append(spec)
    return specs, catalog


def check_unit_families(specs: list, catalog: ControlNetCatalog, model_source: str) -> None:
    """Refuse, before the checkpoint loads, a unit whose ControlNet is made for another model family than the
    checkpoint, when both can be read without loading them (`read_family`; the pipeline's own check runs after the
    load for the rest)."""
    from mixkit.io.sources import shipped_tiny_model
    from pipelines.controlnet.family import check_same_family, read_family

    if not specs:
        return
    try:  # a hub id is read from the hub cache only; one not downloaded yet is left to the pipeline's check
        family = read_family(shipped_tiny_model(model_source) or str(model_source))
    except (ValueError, OSError):
        return
    if family is None:
        return
    for spec in specs:
        made_for = catalog.family(spec.model_name)
        if made_for is not None:
            check_same_family(spec.label, spec.model_name, made_for, family, str(model_source))


def built_units(specs: list, catalog: ControlNetCatalog, pipe) -> list:
    """The ControlNetUnits, their models loaded for the loaded checkpoint (after its load: single files take their
    config from its UNet)."""
    from webui.api_controlnet import build_units

    units = build_units(specs, catalog, pipe.model.unet)
    print(f"ControlNet: {', '.join(unit.display_name for unit in units)}", file=sys.stderr)
    return units
