"""The IP-Adapter call arguments (`ip_adapter`, `ip_adapter_image`, `ip_adapter_scale`) checked and normalised once.

Shapes follow diffusers' pipelines: one list entry per adapter, each one image or a list of images (their tokens
are concatenated, as diffusers' `MultiIPAdapterImageProjection` does). With a single adapter a flat list of images
is that adapter's images too (diffusers would read it as one image per adapter and refuse it). Each adapter takes
its images from `ip_adapter_image` or precomputed embeddings from `ip_adapter_image_embeds`, never both.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace
from typing import Any

from pipelines.ip_adapter_entries import entries_per_adapter, is_pil_image
from pipelines.ip_adapter_files import IPAdapterSource

# A1111's ControlNet weight slider spans [0, 2]; diffusers sets no bound, but past 2 the image tokens swamp the
# prompt and the picture degrades to the reference's colours.
IP_ADAPTER_SCALE_RANGE = (0.0, 2.0)
MAX_IP_ADAPTERS = 4  # each adds a key/value projection per cross-attention layer
FULL_WINDOW = (0.0, 1.0)  # an adapter acting at every step
MAX_IMAGES_PER_ADAPTER = 16  # each adds its tokens (4 per image; 16 for plus) to every cross-attention


@dataclass(frozen=True)
class IPAdapterCall:
    """The checked IP-Adapter part of one call: sources, each adapter's images (or embeddings), scale, window and
    masks."""

    sources: tuple[IPAdapterSource, ...]
    images: tuple[tuple | None, ...]  # per adapter: PIL images in RGB, or None when it has embeddings
    scales: tuple[float, ...]
    # per adapter: (start, end) fractions of the steps it acts in, sd-webui-controlnet's guidance_start/end
    windows: tuple[tuple[float, float], ...] = ()
    embeds: tuple = ()  # per adapter: a [2, images, ...] tensor (negative half first), or None when it has images
    masks: tuple = ()  # per adapter: one "L" PIL mask per image, or None (the whole picture)

    @property
    def image_counts(self) -> tuple[int, ...]:
        """How many reference images each adapter has (its embeddings' second dimension when precomputed)."""
        return tuple(len(images) if images is not None else int(embeds.shape[1])
                     for images, embeds in zip(self.images, self.embeds or (None,) * len(self.images)))

    @property
    def encodes_images(self) -> tuple[bool, ...]:
        """Per adapter: whether its images go through its image encoder this call (no precomputed embeddings)."""
        return tuple(images is not None for images in self.images)

    @property
    def windowed(self) -> bool:
        """Whether some adapter acts on part of the steps only (the scales then change during sampling)."""
        return any(window != FULL_WINDOW for window in self.windows)


def check_ip_adapter_inputs(ip_adapter: Any, ip_adapter_image: Any, ip_adapter_scale: Any,
                            ip_adapter_guidance: Any = None, *, ip_adapter_image_embeds: Any = None,
                            ip_adapter_mask: Any = None) -> IPAdapterCall | None:
    """The call's adapters, images or embeddings, scales, guidance windows and masks, or None without `ip_adapter`;
    raises naming the bad value.

    Only shapes and values are checked here (no file is read), so a bad call fails before any model work; what
    depends on the adapter's weights (embedding widths) or the output size (mask aspect) is checked by the pipeline
    once those are known."""
    if ip_adapter is None or (isinstance(ip_adapter, (list, tuple)) and not ip_adapter):
        for name, value in (("ip_adapter_image", ip_adapter_image), ("ip_adapter_guidance", ip_adapter_guidance),
                            ("ip_adapter_image_embeds", ip_adapter_image_embeds),
                            ("ip_adapter_mask", ip_adapter_mask)):
            if value is not None:
                raise ValueError(f"{name} was given without ip_adapter; pass the IP-Adapter weights too "
                                 f"(ip_adapter=..., --ip-adapter PATH) or drop {name}.")
        return None
    items = list(ip_adapter) if isinstance(ip_adapter, (list, tuple)) else [ip_adapter]
    if len(items) > MAX_IP_ADAPTERS:
        raise ValueError(f"{len(items)} IP-Adapters were given; at most {MAX_IP_ADAPTERS} run in one call.")
    sources = tuple(IPAdapterSource.of(item) for item in items)
    from pipelines.ip_adapter_embeds import check_ip_adapter_image_embeds
    from pipelines.ip_adapter_masks import check_ip_adapter_masks

    embeds = check_ip_adapter_image_embeds(ip_adapter_image_embeds, len(sources))
    images = _images_per_adapter(ip_adapter_image, len(sources), embeds)
    scales = check_ip_adapter_scales(ip_adapter_scale, len(sources))
    call = IPAdapterCall(sources, images, scales, check_ip_adapter_guidance(ip_adapter_guidance, len(sources)),
                         embeds)
    return replace(call, masks=check_ip_adapter_masks(ip_adapter_mask, call.image_counts))


def _images_per_adapter(value: Any, adapters: int, embeds: tuple) -> tuple[tuple | None, ...]:
    """Each adapter's RGB images, None for the adapters fed by embeddings; an adapter with both or neither is an
    error."""
    if value is None:
        missing = [index for index, embed in enumerate(embeds) if embed is None]
        if len(missing) == adapters:
            raise ValueError("ip_adapter was given without ip_adapter_image; an IP-Adapter needs the image prompt "
                             "(ip_adapter_image=PIL image, --ip-adapter-image FILE) or its precomputed "
                             "ip_adapter_image_embeds.")
        if missing:
            raise ValueError(f"IP-Adapter {missing[0]} has neither an ip_adapter_image entry nor an "
                             "ip_adapter_image_embeds entry; give it one of them.")
        return (None,) * adapters
    entries = entries_per_adapter(value, adapters)
    if entries is None:
        raise TypeError(f"ip_adapter_image must be a PIL image or a list of them (one entry per adapter), got "
                        f"{_describe(value)}.")
    if len(entries) != adapters:
        raise ValueError(f"ip_adapter_image has {len(entries)} entries for {adapters} IP-Adapters; give one entry "
                         "per adapter, each an image or a list of images (None for an adapter given "
                         "ip_adapter_image_embeds).")
    per_adapter = []
    for index, entry in enumerate(entries):
        if entry is not None and embeds[index] is not None:
            raise ValueError(f"IP-Adapter {index} has both an ip_adapter_image entry and an ip_adapter_image_embeds "
                             "entry; give it one of them (None in the other list).")
        if entry is None and embeds[index] is None:
            raise ValueError(f"IP-Adapter {index} has neither an ip_adapter_image entry nor an "
                             "ip_adapter_image_embeds entry; give it one of them.")
        if entry is None:  # fed by its embeddings
            per_adapter.append(None)
            continue
        group = list(entry) if isinstance(entry, (list, tuple)) else [entry]
        if not group or not all(is_pil_image(image) for image in group):
            raise TypeError(f"ip_adapter_image entry {index} must be a PIL image or a non-empty list of PIL images, "
                            f"got {_describe(entry)}.")
        if len(group) > MAX_IMAGES_PER_ADAPTER:
            raise ValueError(f"ip_adapter_image entry {index} has {len(group)} images; at most "
                             f"{MAX_IMAGES_PER_ADAPTER} per adapter.")
        per_adapter.append(tuple(image.convert("RGB") for image in group))
    return tuple(per_adapter)


def check_ip_adapter_scales(value: Any, adapters: int) -> tuple[float, ...]:
    """One scale per adapter from one number or a list of `adapters` numbers, each in IP_ADAPTER_SCALE_RANGE."""
    scales = list(value) if isinstance(value, (list, tuple)) else [value] * adapters
    if len(scales) != adapters:
        raise ValueError(f"ip_adapter_scale has {len(scales)} values for {adapters} IP-Adapters; give one number "
                         "for all or one per adapter.")
    low, high = IP_ADAPTER_SCALE_RANGE
    for scale in scales:
        if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(scale) \
                or not low <= scale <= high:
            raise ValueError(f"ip_adapter_scale must be a number in [{low:g}, {high:g}] (A1111's ControlNet weight "
                             f"range; 0 turns the adapter off), got {scale!r}.")
    return tuple(float(scale) for scale in scales)


def check_ip_adapter_guidance(value: Any, adapters: int) -> tuple[tuple[float, float], ...]:
    """One (start, end) window per adapter from None (every step), one (start, end) pair for all, or a list of
    `adapters` pairs; start and end are fractions of the steps in [0, 1] with start <= end."""
    if value is None:
        return (FULL_WINDOW,) * adapters
    is_pair = isinstance(value, (list, tuple)) and len(value) == 2 and all(_is_number(v) for v in value)
    windows = [value] * adapters if is_pair else list(value) if isinstance(value, (list, tuple)) else None
    if windows is None or len(windows) != adapters:
        raise ValueError(f"ip_adapter_guidance must be one (start, end) pair for every adapter or a list of "
                         f"{adapters} pairs, got {_describe(value)}.")
    checked = []
    for window in windows:
        if not (isinstance(window, (list, tuple)) and len(window) == 2 and all(_is_number(v) for v in window)
                and 0.0 <= window[0] <= window[1] <= 1.0):
            raise ValueError(f"ip_adapter_guidance window {_describe(window)} must be (start, end) with "
                             "0 <= start <= end <= 1: the fractions of the steps the adapter acts in.")
        checked.append((float(window[0]), float(window[1])))
    return tuple(checked)


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:120]
