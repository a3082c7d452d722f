"""sd-webui-controlnet's IP-Adapter units (`module: "ip-adapter_clip_sd15"`, `model: "ip-adapter_sd15 [hash]"`) ->
the IP-Adapter fields of `pipelines.ip_adapter`.

The extension runs an image prompt as a ControlNet unit: `model` names an `ip-adapter*` file in its models/ControlNet
folder (here `--controlnet-dir`), `weight` is the adapter's scale, `image` the reference picture (a list of
`{"image": ...}` objects gives several, as the extension's `accepts_multiple_inputs`), and `guidance_start/end` the
part of the steps it acts in. The CLIP image encoder is looked for beside the weights, as the Python API does
(h94's layout): `image_encoder_clip_h/` (ViT-H: the modules ip-adapter_clip_sd15, ip-adapter_clip_h,
ip-adapter_clip_sdxl_plus_vith) or `image_encoder_clip_g/` (ViT-bigG: ip-adapter_clip_sdxl, ip-adapter_clip_g) when
the folder holds adapters for both, else `image_encoder/`. Everything is checked here, before a job is queued,
the weights file too (`.safetensors` from its header, a pickled `.bin` read once through the safe reader and kept in
the folder's `IPAdapterStore` for the job); `check_ip_adapter_families` then compares the adapters with the job's
checkpoint from the shapes read. The web UI's units and `mixkit --controlnet-json` come through here as well.

A unit's `effective_region_mask` restricts where its image prompt acts: the extension multiplies the adapter's
attention output by the mask's first channel (white = acts), resized to each layer; diffusers' IP-Adapter masks
(`ip_adapter_mask`) do the same for an adapter with one reference image, so the unit's mask becomes its adapter's
mask. A unit with several pictures is refused with a mask: the extension averages their embeddings and masks the
result, while a masked diffusers adapter attends to each picture separately, which would give another image.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The extension's IP-Adapter modules -> the image encoder each reads (None: whichever the folder has).
IP_ADAPTER_MODULES = {"ip-adapter_clip_sd15": "clip_h", "ip-adapter_clip_h": "clip_h",
                      "ip-adapter_clip_sdxl_plus_vith": "clip_h", "ip-adapter_clip_sdxl": "clip_g",
                      "ip-adapter_clip_g": "clip_g", "ip-adapter-auto": None}
# Its face modules need insightface embeddings and layers mixkit does not have: refused by name.
FACE_MODULES = ("ip-adapter_face_id", "ip-adapter_face_id_plus", "ip-adapter_pulid")
ENCODER_FOLDER = "image_encoder"  # diffusers' and h94's name
# Unit fields that change an IP-Adapter unit in the extension but are not honoured here: refused unless default.
UNHONOURED = {"mask": "a mask"}


@dataclass
class IPAdapterUnitSpec:
    """One IP-Adapter unit, checked: the weights file and encoder folder found, images decoded (none in img2img:
    the init image, as the extension uses it)."""

    label: str
    model_name: str
    weights: Path
    encoder: Path
    images: list = field(default_factory=list)
    region_mask: Any = None  # "L" PIL image from effective_region_mask (white: the image prompt acts), or None
    weight: float = 1.0
    guidance_start: float = 0.0
    guidance_end: float = 1.0


def is_ip_adapter_module(module: Any) -> bool:
    """Whether a unit's `module` is one of the extension's IP-Adapter modules (face ones included, to refuse them)."""
    name = str(module).lower()
    return name in IP_ADAPTER_MODULES or name in FACE_MODULES


def encoder_folder_names(module: str) -> list[str]:
    """The encoder folder names looked for beside the weights, in order, for the unit's module."""
    encoder = IP_ADAPTER_MODULES[module]
    return [f"{ENCODER_FOLDER}_{encoder}", ENCODER_FOLDER] if encoder else [ENCODER_FOLDER]


def is_encoder_folder(path: Path) -> bool:
    """An image-encoder folder of the ControlNet folder: not a ControlNet, never listed as one."""
    return path.name == ENCODER_FOLDER or path.name.startswith(f"{ENCODER_FOLDER}_")


def ip_adapter_unit_spec(label: str, unit: dict, models, *, decode=None, images: list | None = None
                         ) -> IPAdapterUnitSpec:
    """One enabled IP-Adapter unit (canonical keys) checked field by field; `decode(field, data)` reads an image of
    the unit's `image` field (base64 under the request's caps; a file on the command line), or `images` are the
    unit's pictures already read (the web UI's). ValueError naming the unit and field."""
    from pipelines.ip_adapter_infotext import ip_adapter_infotext
    from pipelines.ip_adapter_inputs import IP_ADAPTER_SCALE_RANGE
    from webui.api_controlnet import _given, _number

    module = str(unit.get("module")).lower()
    if module in FACE_MODULES:
        raise ValueError(f"{label}: module {unit.get('module')!r} is not available: FaceID / PuLID adapters need "
                         "insightface face embeddings, which mixkit does not compute; use ip-adapter_clip_sd15 / "
                         "ip-adapter_clip_sdxl with ip-adapter_* or ip-adapter-plus_* weights.")
    for key, what in UNHONOURED.items():
        if _given(unit.get(key)):
            raise ValueError(f"{label}: {what} on an IP-Adapter unit is not supported here (the image prompt acts on "
                             f"the whole picture); remove '{key}'.")
    control = unit.get("control_mode", 0)
    if control not in (0, "Balanced", "balanced") or unit.get("guess_mode"):
        raise ValueError(f"{label}: control_mode {control!r} on an IP-Adapter unit is not supported here (only "
                         "'Balanced': the other modes scale ControlNet residuals, which an IP-Adapter has none of); "
                         "send control_mode 0 and set the strength with weight.")
    name = models.resolve(unit.get("model"))
    weights = models.sources()[name]
    if weights.is_dir():
        raise ValueError(f"{label}: model {name!r} is a ControlNet folder, not IP-Adapter weights; an IP-Adapter "
                         f"module ({unit.get('module')!r}) needs an ip-adapter*.safetensors/.bin file.")
    ip_adapter_infotext([weights.stem], [1.0])  # a name the infotext cannot carry is refused now
    _check_adapter_file(label, weights, models)  # before the encoder: a ControlNet file is named as such
    encoder = _encoder_folder(label, module, weights)
    low, high = IP_ADAPTER_SCALE_RANGE
    weight = _number(f"{label} weight (the IP-Adapter's scale)", unit.get("weight", 1.0), low, high)
    start = _number(f"{label} guidance_start", unit.get("guidance_start", 0.0), 0.0, 1.0)
    end = _number(f"{label} guidance_end", unit.get("guidance_end", 1.0), 0.0, 1.0)
    if start > end:
        raise ValueError(f"{label}: guidance_start {start:g} is after guidance_end {end:g}; the adapter would never "
                         "act. Lower guidance_start or raise guidance_end.")
    pictures = list(images) if images is not None else _unit_images(label, unit, decode)
    region = _region_mask(label, unit.get("effective_region_mask"), decode)
    if region is not None and len(pictures) > 1:
        raise ValueError(f"{label}: effective_region_mask with {len(pictures)} pictures is not supported (a masked "
                         "IP-Adapter attends to each picture separately, which differs from the extension's average "
                         "of them); send one picture per masked unit, or several units with the same mask.")
    return IPAdapterUnitSpec(label, name, weights, encoder, pictures, region, weight, start, end)


def _region_mask(label: str, data: Any, decode):
    """The unit's effective_region_mask as an "L" image of its first channel, as the extension reads it (a colour
    mask's red); None when not given. The web UI hands a PIL image, requests base64."""
    from webui.api_controlnet import _given

    if not _given(data):
        return None
    if isinstance(data, str):
        if decode is None:
            raise ValueError(f"{label} effective_region_mask must be an image.")
        data = decode(f"{label} effective_region_mask", data)
    if not hasattr(data, "convert"):
        raise ValueError(f"{label} effective_region_mask must be a base64-encoded image (white: the image prompt "
                         f"acts there), got {type(data).__name__}.")
    import numpy as np
    from PIL import Image

    return Image.fromarray(np.ascontiguousarray(np.asarray(data.convert("RGB"))[..., 0]), mode="L")


def check_region_mask_sizes(specs: list[IPAdapterUnitSpec], width: int, height: int) -> None:
    """Refuse, before a job is queued, a unit's effective_region_mask whose shape is not the output's (the Python
    API refuses it too, after the model loaded; the extension would stretch it, moving the region drawn)."""
    from pipelines.ip_adapter_masks import check_mask_aspect

    for spec in specs:
        if spec.region_mask is None:
            continue
        try:
            check_mask_aspect(((spec.region_mask,),), width, height)
        except ValueError:
            mask = spec.region_mask
            raise ValueError(f"{spec.label}: effective_region_mask is {mask.width}x{mask.height}, whose aspect ratio "
                             f"is not the output's {width}x{height}; send it at {width}x{height} (or any size of "
                             "that shape).") from None


def ui_ip_adapter_unit_spec(label: str, models, fields: dict) -> IPAdapterUnitSpec:
    """An IPAdapterUnitSpec from one web-UI ControlNet unit's widget values (`webui.ui.controlnet_units.UNIT_FIELDS`)
    whose preprocessor is an IP-Adapter module, through the API's own check: the same unit gives the same image from
    the UI and from a request. The control image is the reference picture (none in img2img: the init image)."""
    if models is None:
        raise ValueError("This server has no ControlNet folder (start it with --controlnet-dir).")
    unit = {"module": fields["preprocessor"], "model": fields["model"], "weight": fields["weight"],
            "guidance_start": fields["start"], "guidance_end": fields["end"], "control_mode": fields["control_mode"],
            "mask": fields.get("mask"), "effective_region_mask": fields.get("effective_region_mask")}
    images = [] if fields.get("image") is None else [fields["image"]]
    return ip_adapter_unit_spec(label, unit, models, images=images)


def _check_adapter_file(label: str, weights: Path, models) -> None:
    """Refuse now, naming the unit and the file, weights that are no usable IP-Adapter: unreadable, a pickle that
    would run code, another kind of model, a FaceID variant. The shape read stays in the folder's store, so the
    family check and the job do not read the file again."""
    from pipelines.ip_adapter_store import IPAdapterStore

    store = getattr(models, "ip_adapters", None)
    if store is None:  # not `or`: an empty store is falsy (len 0), and what this check reads must stay in it
        store = IPAdapterStore()
    try:
        store.shape(weights, weights.stem)
    except (ValueError, OSError) as error:  # CheckpointFormatError, UnsafeCheckpointError: ValueErrors
        raise ValueError(f"{label}: IP-Adapter file {weights.name!r} cannot be used: {error}") from None


def _encoder_folder(label: str, module: str, weights: Path) -> Path:
    names = encoder_folder_names(module)
    for folder_name in names:
        folder = weights.parent / folder_name
        if (folder / "config.json").is_file():
            return folder
    raise ValueError(f"{label}: no CLIP image encoder for {weights.name!r}: put the encoder folder (h94/IP-Adapter's "
                     f"models/image_encoder for ViT-H, sdxl_models/image_encoder for ViT-bigG) beside it in the "
                     f"ControlNet folder as {' or '.join(repr(n + '/') for n in names)}.")


def _unit_images(label: str, unit: dict, decode) -> list:
    """The unit's reference pictures: one base64 image, or the extension's list of {"image": ...} objects."""
    from webui.api_controlnet import _given, unit_picture

    image = unit.get("image")
    if isinstance(image, list) and image and all(isinstance(item, dict) for item in image):
        from pipelines.ip_adapter_inputs import MAX_IMAGES_PER_ADAPTER

        if len(image) > MAX_IMAGES_PER_ADAPTER:
            raise ValueError(f"{label}: image holds {len(image)} pictures; an IP-Adapter unit takes at most "
                             f"{MAX_IMAGES_PER_ADAPTER}.")
        pictures = []
        for index, item in enumerate(image):
            unknown = sorted(set(item) - {"image", "mask"})
            if unknown or _given(item.get("mask")):
                raise ValueError(f"{label}: image[{index}] must be {{\"image\": base64}} (an IP-Adapter unit takes "
                                 f"no mask here), got keys {sorted(item)}.")
            pictures.append(_decoded_picture(label, f"image[{index}].image", item.get("image"), decode))
        return pictures
    picture, mask, mask_key = unit_picture(label, unit)
    if _given(mask):
        raise ValueError(f"{label}: {UNHONOURED['mask']} on an IP-Adapter unit is not supported here; remove "
                         f"'{mask_key}'.")
    return [_decoded_picture(label, "image", picture, decode)] if _given(picture) else []


def _decoded_picture(label: str, key: str, data: Any, decode):
    if not isinstance(data, str) or not data:
        raise ValueError(f"{label} {key} must be a base64-encoded image, got {type(data).__name__}.")
    return decode(f"{label} {key}", data)


def ip_adapter_fields(specs: list[IPAdapterUnitSpec], init_image=None) -> dict:
    """The params' IP-Adapter fields for the units (a unit without image takes `init_image`, img2img's first);
    ValueError for a unit without image when there is no init image (txt2img)."""
    from pipelines.ip_adapter_files import IPAdapterSource

    images = []
    for spec in specs:
        if not spec.images and init_image is None:
            raise ValueError(f"{spec.label}: an IP-Adapter unit needs 'image', the reference picture (only img2img "
                             "falls back to its init image).")
        images.append(list(spec.images) or [init_image])
    fields = {"ip_adapter": [IPAdapterSource(str(spec.weights), image_encoder_folder=str(spec.encoder.resolve()),
                                             unit=spec.label) for spec in specs],
              "ip_adapter_image": images, "ip_adapter_scale": [spec.weight for spec in specs],
              "ip_adapter_guidance": [(spec.guidance_start, spec.guidance_end) for spec in specs]}
    if any(spec.region_mask is not None for spec in specs):  # one mask for the unit's one picture
        fields["ip_adapter_mask"] = [None if spec.region_mask is None else [spec.region_mask] for spec in specs]
    return fields


def check_ip_adapter_families(sources: list, holder, entry=None, store=None) -> None:
    """Refuse, before a job is queued, an adapter made for another model family than the job's checkpoint, or whose
    image encoder gives embeddings of another width than it reads, naming the adapter, its file and both widths.

    The adapter's shape comes from `store` (`IPAdapterStore`: what the unit check read, so a good file is not read
    twice; None: a store of this call), the encoder's width from its config.json; nothing is loaded. A file that
    cannot be read is left to the pipeline's own check (`pipelines.ip_adapter_layers.check_adapter_fits`), which
    also runs before sampling."""
    import json

    from pipelines.ip_adapter_files import resolve_image_encoder
    from pipelines.ip_adapter_layers import FAMILY_OF_CROSS_DIM
    from pipelines.ip_adapter_store import IPAdapterStore
    from webui.controlnet_models import checkpoint_family

    store = IPAdapterStore() if store is None else store  # not `or`: an empty store is falsy (len 0)
    target = checkpoint_family(holder, entry)
    for source in sources:
        file = Path(source.source)
        if not file.is_file():  # a folder or hub id (the Python API's forms): the pipeline's check reads it
            continue
        try:
            shape = store.shape(file, source.name)
        except (OSError, ValueError):
            continue  # the load reports it
        # named by its unit, as the unit's other errors are ("controlnet unit 1: ..."); the Python API's by its file
        name = f"{source.name!r} ({file.name})"
        unit = f"{source.unit}: " if getattr(source, "unit", None) else ""
        if target is not None and target[0].cross_attention_dim != shape.cross_dim:
            family, title = target
            raise ValueError(f"{unit}IP-Adapter {name} is made for {FAMILY_OF_CROSS_DIM.get(shape.cross_dim, 'a model')} "
                             f"(cross-attention width {shape.cross_dim}), but checkpoint {title!r} is "
                             f"{family.label}; use an adapter for that family (h94/IP-Adapter: models/ for SD 1.5, "
                             "sdxl_models/ for SDXL).")
        try:  # found as the pipeline finds it (a relative name beside the weights first), nothing fetched
            config_file = resolve_image_encoder(source, file, local_files_only=True) / "config.json"
            config = json.loads(config_file.read_text())
        except (OSError, ValueError):
            continue  # the pipeline's load reports it
        config = config.get("vision_config", config)
        given = config.get("projection_dim" if shape.kind == "plain" else "hidden_size")
        if given is not None and given != shape.encoder_dim:
            raise ValueError(f"{unit}IP-Adapter {name} reads {shape.encoder_dim}-wide image embeddings but the encoder "
                             f"{str(config_file.parent)!r} gives {given}; put the encoder it was trained with "
                             "beside it (ViT-H as image_encoder_clip_h/, ViT-bigG as image_encoder_clip_g/) and pick "
                             "the matching module (ip-adapter_clip_h / ip-adapter_clip_g).")
