"""What a user asks for: which LoRA, at which text-encoder and UNet strength."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

from mixkit.finite_numbers import is_finite_number
from mixkit.prompts.extra_networks import APPLIED_KINDS

# Prompt-tag kinds that name a LoRA: the kinds the prompt parser applies (the others are skipped there, as in A1111).
LORA_TAG_KINDS = APPLIED_KINDS


# Far beyond any use (strengths are used near -2..2), far below what overflows fp16 weights into NaN.
MAX_STRENGTH = 100.0


@dataclass(frozen=True)
class LoraRequest:
    """One LoRA to apply: a file path or a library name, with A1111's `<lora:name:te:unet>` strengths."""

    source: str | Path
    te_weight: float = 1.0
    unet_weight: float = 1.0
    name: str | None = None
    # A1111's `dyn` (DyLoRA): use only the first `dyn_dim` ranks of each plain LoRA module (`module_weights.rank_cut`).
    dyn_dim: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, (str, Path)) or not str(self.source).strip():
            raise TypeError(f"LoraRequest.source must be a non-empty path or name, got {self.source!r}")
        for field_name in ("te_weight", "unet_weight"):
            value = getattr(self, field_name)
            if not is_finite_number(value):
                raise ValueError(f"LoraRequest.{field_name} must be a finite number, got {value!r} (for {self.source})")
            if abs(value) > MAX_STRENGTH:
                raise ValueError(f"LoraRequest.{field_name}={value!r} for {self.source} is beyond ±{MAX_STRENGTH:g}: such "
                                 "a strength overflows the weights into a black image; LoRAs are used near -2..2")

        dyn = self.dyn_dim
        if dyn is not None and (isinstance(dyn, bool) or not isinstance(dyn, int) or dyn < 1):
            raise ValueError(f"LoraRequest.dyn_dim must be a positive integer (a rank) or None, got {dyn!r} "
                             f"(for {self.source})")

    @property
    def display_name(self) -> str:
        """The name for tags and `Lora hashes`: `name` if set, else the source as the user wrote it."""
        return self.name or written_name(self.source)

    @property
    def prompt_tag(self) -> str:
        """A1111's tag for this request (`<lora:name:0.8>`, `<lora:name:0.8:0.5>`), for an infotext prompt to carry
        LoRAs passed outside the prompt: pasted back, the tag applies the same file at the same strengths."""
        weights = f"{self.te_weight:g}" + (f":{self.unet_weight:g}" if self.unet_weight != self.te_weight else "")
        dyn = f":dyn={self.dyn_dim}" if self.dyn_dim is not None else ""
        return f"<lora:{self.display_name}:{weights}{dyn}>"

    @classmethod
    def parse(cls, spec: str) -> "LoraRequest":
        """Same as `parse_lora_cli_spec`: `NAME_OR_PATH[:STRENGTH[:UNET_STRENGTH]]`."""
        return parse_lora_cli_spec(spec)

    @classmethod
    def from_extra_network(cls, request) -> "LoraRequest":
        """From a prompt tag request (`kind`, `name`, `te_weight`, `unet_weight`), as the prompt parser yields."""
        kind = getattr(request, "kind", "lora")
        raw = getattr(request, "raw", request)
        if kind not in LORA_TAG_KINDS:
            raise ValueError(f"extra network {raw!r} is a {kind!r}; mixkit applies only {' and '.join(LORA_TAG_KINDS)} tags")
        unet = getattr(request, "unet_weight", None)
        te = getattr(request, "te_weight", 1.0)
        return cls(source=request.name, te_weight=float(te), unet_weight=float(te if unet is None else unet), name=request.name,
                   dyn_dim=getattr(request, "dyn_dim", None))


def written_name(source: str | Path) -> str:
    """The LoRA name a user meant by `source`: the file stem when it names a file (an existing path, or a file name
    ending in a LoRA suffix), else the text itself.

    Library names keep every dot (`add_detail.v2`, `my.style.v1`): cutting a "suffix" off them would write another
    LoRA's name into the infotext, and pasting it back would apply that file. A1111 likewise writes the name as
    mentioned in the prompt (`ExtraNetworkLora.activate`'s `mentioned_name`).
    """
    from mixkit.lora.reading import LORA_SUFFIXES

    path = Path(str(source)).expanduser()
    names_a_file = path.is_file() or path.suffix.lower() in LORA_SUFFIXES  # `x.v1.safetensors` in the LoRA folder
    return path.stem if names_a_file else str(source)


def parse_lora_cli_spec(spec: str) -> LoraRequest:
    """`NAME_OR_PATH[:STRENGTH[:UNET_STRENGTH]]` -> LoraRequest (one strength sets both, as in A1111).

    Strengths are read from the right so paths containing ':' (Windows drives) still work.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"--lora expects NAME_OR_PATH[:STRENGTH[:UNET_STRENGTH]], got {spec!r}")
    parts = spec.split(":")
    numbers: list[float] = []
    while len(parts) > 1 and len(numbers) < 2:
        try:
            value = float(parts[-1])
        except ValueError:
            break
        numbers.insert(0, value)
        parts.pop()
    source = ":".join(parts)
    if not source.strip():
        raise ValueError(f"--lora {spec!r} names no LoRA; expected NAME_OR_PATH[:STRENGTH[:UNET_STRENGTH]]")
    if any(not math.isfinite(n) for n in numbers):
        raise ValueError(f"--lora {spec!r}: strengths must be finite numbers")
    te = numbers[0] if numbers else 1.0
    unet = numbers[1] if len(numbers) > 1 else te
    return LoraRequest(source=source, te_weight=te, unet_weight=unet)


def resolve_lora_requests(explicit: list[LoraRequest], tags: list, lora_dir: str | Path | None = None) -> list[LoraRequest]:
    """Prompt-tag requests, then CLI/API requests, each with `source` resolved to a file path.

    That is their order in the infotext's prompt (explicit LoRAs are appended to it as tags), so they are applied,
    and listed in `Lora hashes`, in the order A1111 applies and lists them when the infotext is pasted there.

    Names resolve through a `LoraLibrary` on `lora_dir` (file stem, relative name or alias); explicit
    requests may also be paths to files, prompt tags never (they are untrusted text). The display name (for `Lora hashes`) stays what the user wrote.
    A name mentioned more than once is applied once per mention at its last mention's strengths, as A1111 does
    (`same_name_takes_last_strengths`).
    """
    from mixkit.errors import ModelNotFoundError
    from mixkit.lora.library import LoraLibrary

    tag_requests = [LoraRequest.from_extra_network(tag) for tag in tags]
    library = LoraLibrary(lora_dir) if lora_dir else None
    if tag_requests and library is None:
        raise ModelNotFoundError(
            f"prompt tag {tags[0].raw!r} names a LoRA but no LoRA folder is set; set the LoRA folder (--lora-dir)."
        )
    resolved = []
    for from_tag, request in [(True, r) for r in tag_requests] + [(False, r) for r in explicit]:
        path = Path(str(request.source)).expanduser()
        if from_tag:
            # Tags come from prompt text (possibly the HTTP API): names in the folder only, never paths.
            path = library.resolve_name(str(request.source))
        elif path.is_file():
            path = path.resolve()
        elif library is not None:
            try:
                path = library.resolve(str(request.source))
            except ModelNotFoundError as error:
                name, colon, tail = str(request.source).rpartition(":")
                if not colon or not name:
                    raise
                raise ModelNotFoundError(f"{error} (If {tail!r} after the last ':' is meant as the strength, it is not "
                                         f"a number: write {name}:0.8.)") from None
        else:
            raise ModelNotFoundError(
                f"LoRA {request.source!r} is not a file and no LoRA folder is set; pass a path or set the LoRA folder (--lora-dir)."
            )
        resolved.append(LoraRequest(source=path, te_weight=request.te_weight, unet_weight=request.unet_weight,
                                    name=request.display_name, dyn_dim=request.dyn_dim))
    return same_name_takes_last_strengths(resolved)


def same_name_takes_last_strengths(requests: list[LoraRequest]) -> list[LoraRequest]:
    """Every mention of a name at the strengths (te, unet, dyn) of its last mention, as A1111 applies them.

    A1111's `networks.load_networks` keeps one `Network` object per name as written: a second `<lora:a:...>` finds
    the first mention's object, overwrites its multipliers and dyn, and appends it again, so `<lora:a:1> <lora:a:0.5>`
    applies `a` twice at 0.5 (1 in all) and `<lora:a:0.5> <lora:a:1>` twice at 1. Two names of one file (its stem and
    its `ss_output_name` alias) are two networks there, each at its own strengths, and stay so here. A LoRA passed
    outside the prompt counts as a mention of its display name: the infotext writes it as a tag of that name.
    """
    last = {request.display_name: request for request in requests}
    changed = sorted({request.display_name for request in requests
                      if (request.te_weight, request.unet_weight, request.dyn_dim) != _strengths(last[request.display_name])})
    if changed:
        mentions = ", ".join(f"{name!r} ({sum(r.display_name == name for r in requests)} mentions, last "
                             f"{last[name].prompt_tag})" for name in changed)
        warnings.warn(f"LoRA {mentions} is named more than once with different strengths; as in A1111, each mention "
                      "applies it at the strengths of the last one. Name it once at the strength you want.",
                      UserWarning, stacklevel=3)
    return [dataclasses.replace(request, te_weight=last[request.display_name].te_weight,
                                unet_weight=last[request.display_name].unet_weight,
                                dyn_dim=last[request.display_name].dyn_dim) for request in requests]


def _strengths(request: LoraRequest) -> tuple:
    return request.te_weight, request.unet_weight, request.dyn_dim
