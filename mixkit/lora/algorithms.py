"""The LoRA families (LoRA/LoCon, LoHa, LoKr, IA3, full diff, norm) as one registry.

A file is a set of modules; each module is a group of tensors whose suffixes (`lora_down.weight`,
`hada_w1_a`, `lokr_w1`, ...) say which family it is. Every family turns its tensors into the
change it makes to the target's weight (and bias) for a given strength, relative to the original
weight: merge mode adds that change, runtime mode adds it in the forward pass, so both are the
same function of the file.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from mixkit.lora import deltas
from mixkit.registry import Registry


@dataclass
class ModuleWeights:
    """The tensors of one LoRA module, plus the family that interprets them."""

    family: str
    tensors: dict[str, torch.Tensor]
    alpha: float | None = None
    dora_scale: torch.Tensor | None = None
    peft_magnitude: torch.Tensor | None = None  # PEFT's lora_magnitude_vector: DoRA in PEFT's form
    keys: list[str] = field(default_factory=list)

    @property
    def is_dora(self) -> bool:
        return self.dora_scale is not None or self.peft_magnitude is not None

    @property
    def spec(self) -> "AlgorithmFamily":
        return LORA_ALGORITHMS.get(self.family)

    def rank(self) -> int | None:
        return self.spec.rank(self.tensors)

    def scale(self) -> float:
        rank = self.rank()
        return 1.0 if rank is None else deltas.rank_scale(self.alpha, rank)

    def implied_shape(self) -> tuple[int, int]:
        """(out, flattened in) of the weight this module was trained on."""
        return self.spec.implied_shape(self.tensors)

    def weight_change(self, weight: torch.Tensor, strength: float) -> torch.Tensor:
        """merged(W0, strength) - W0 in float32, for a float32 original weight `weight`."""
        spec = self.spec
        if spec.multiplicative is not None:
            return spec.multiplicative(self.tensors, weight, strength) - weight
        delta = spec.delta(self.tensors, self.scale(), weight.shape)
        if self.peft_magnitude is not None:
            return deltas.peft_dora_weight(weight + delta * strength, self.peft_magnitude.float()) - weight
        if self.dora_scale is None:
            return delta * strength
        return deltas.dora_weight(weight + delta, self.dora_scale.float(), strength) - weight

    def bias_change(self, strength: float) -> torch.Tensor | None:
        key = self.spec.bias_key
        if key is None or key not in self.tensors:
            return None
        return self.tensors[key].float().reshape(-1) * strength

    def layout_tensor(self) -> torch.Tensor | None:
        """A tensor whose number of dims must equal the target weight's (Linear 2-D, Conv 4-D), if the family has one."""
        key = self.spec.layout_key
        return None if key is None else self.tensors.get(key)

    def low_rank_factors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None:
        """(down, up, mid) when runtime mode can apply this module as a cheap bypass branch."""
        if self.family != "lora" or self.is_dora:
            return None
        return self.tensors["lora_down.weight"], self.tensors["lora_up.weight"], self.tensors.get("lora_mid.weight")


@dataclass(frozen=True)
class AlgorithmFamily:
    """How to recognise one family's tensor group and turn it into a weight change."""

    name: str
    label: str
    marker_keys: tuple[str, ...]
    known_keys: tuple[str, ...]
    rank: Callable[[dict], int | None]
    implied_shape: Callable[[dict], tuple[int, int]]
    delta: Callable[[dict, float, torch.Size], torch.Tensor] | None = None
    multiplicative: Callable[[dict, torch.Tensor, float], torch.Tensor] | None = None
    bias_key: str | None = None
    # A tensor stored in the target's own layout (2-D for Linear, 4-D for Conv), to catch Linear/Conv mix-ups.
    layout_key: str | None = None
    # Alternatives of key sets; the group is complete when one alternative is fully present, per entry.
    required: tuple[tuple[tuple[str, ...], ...], ...] = ()

    def missing(self, suffixes: set[str]) -> list[str]:
        """Required tensors absent from a group (first alternative of each unmet requirement)."""
        absent: list[str] = []
        for alternatives in self.required:
            if not any(all(k in suffixes for k in option) for option in alternatives):
                absent.extend(k for k in alternatives[0] if k not in suffixes)
        return absent

    def matches(self, suffixes: set[str]) -> bool:
        return any(marker in suffixes for marker in self.marker_keys)


LORA_ALGORITHMS: Registry[AlgorithmFamily] = Registry("LoRA algorithm")

# Keys every family may carry next to its own tensors.
SHARED_KEYS = ("alpha", "dora_scale", "lora_magnitude_vector")


def _f(tensors: dict, key: str) -> torch.Tensor | None:
    value = tensors.get(key)
    return None if value is None else value.float()


def _flat_in(shape) -> int:
    return int(math.prod(shape[1:]))


# LoRA / LoCon (kohya): lora_down [r, in, k, k], lora_up [out, r, 1, 1], optional Tucker lora_mid [r, r, k, k].
def _lora_shape(t):
    down, up, mid = t["lora_down.weight"], t["lora_up.weight"], t.get("lora_mid.weight")
    kernel = mid.shape[2:] if mid is not None else down.shape[2:]
    return up.shape[0], int(down.shape[1] * math.prod(kernel))


LORA_ALGORITHMS.register("lora", AlgorithmFamily(
    name="lora", label="LoRA/LoCon", marker_keys=("lora_down.weight", "lora_up.weight"),
    known_keys=("lora_down.weight", "lora_up.weight", "lora_mid.weight"),
    required=((("lora_down.weight", "lora_up.weight"),),), layout_key="lora_down.weight",
    rank=lambda t: int(t["lora_down.weight"].shape[0]),
    implied_shape=_lora_shape,
    delta=lambda t, s, shape: deltas.lora_delta(_f(t, "lora_down.weight"), _f(t, "lora_up.weight"),
                                                _f(t, "lora_mid.weight"), s, shape),
))


# LoHa: hada_w1_a [out, r] @ hada_w1_b [r, in*k*k]; with Tucker hada_w1_a [r, out], hada_w1_b [r, in], hada_t1 [r, r, k, k].
def _loha_shape(t):
    if "hada_t1" in t:
        return t["hada_w1_a"].shape[1], int(t["hada_w1_b"].shape[1] * math.prod(t["hada_t1"].shape[2:]))
    return t["hada_w1_a"].shape[0], _flat_in(t["hada_w1_b"].shape)


LORA_ALGORITHMS.register("loha", AlgorithmFamily(
    name="loha", label="LoHa", marker_keys=("hada_w1_a",),
    known_keys=("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b", "hada_t1", "hada_t2"),
    required=((("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"),),),
    rank=lambda t: int(t["hada_w1_b"].shape[0]),
    implied_shape=_loha_shape,
    delta=lambda t, s, shape: deltas.loha_delta(_f(t, "hada_w1_a"), _f(t, "hada_w1_b"), _f(t, "hada_w2_a"),
                                                _f(t, "hada_w2_b"), _f(t, "hada_t1"), _f(t, "hada_t2"), s, shape),
))


# LoKr: kron(w1, w2); each half stored whole or as a/b factors; alpha only matters when a half is factored.
def _lokr_halves(t):
    w1 = deltas.lokr_half(_f(t, "lokr_w1"), _f(t, "lokr_w1_a"), _f(t, "lokr_w1_b"), _f(t, "lokr_t1"))
    w2 = deltas.lokr_half(_f(t, "lokr_w2"), _f(t, "lokr_w2_a"), _f(t, "lokr_w2_b"), _f(t, "lokr_t2"))
    return w1, w2


def _lokr_rank(t):
    # Both halves whole: LyCORIS ignores alpha (scale 1); otherwise rank is the factored side's.
    if "lokr_w1_b" in t:
        return int(t["lokr_w1_b"].shape[0])
    if "lokr_w2_b" in t:
        return int(t["lokr_w2_b"].shape[0])
    return None


def _lokr_shape(t):
    w1, w2 = _lokr_halves(t)
    return int(w1.shape[0] * w2.shape[0]), int(_flat_in(w1.shape) * _flat_in(w2.shape))


LORA_ALGORITHMS.register("lokr", AlgorithmFamily(
    name="lokr", label="LoKr", marker_keys=("lokr_w1", "lokr_w1_a"),
    known_keys=("lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t1", "lokr_t2"),
    required=((("lokr_w1",), ("lokr_w1_a", "lokr_w1_b")), (("lokr_w2",), ("lokr_w2_a", "lokr_w2_b"))),
    rank=_lokr_rank,
    implied_shape=_lokr_shape,
    delta=lambda t, s, shape: deltas.lokr_delta(*_lokr_halves(t), s, shape),
))


# IA3: a learned per-channel rescale of the weight (output channels, or input ones when `on_input`).
def _ia3_on_input(t) -> bool:
    return bool(int(t["on_input"].reshape(-1)[0].item())) if "on_input" in t else False


def _ia3_shape(t):
    size = int(t["weight"].numel())
    return (-1, size) if _ia3_on_input(t) else (size, -1)


LORA_ALGORITHMS.register("ia3", AlgorithmFamily(
    name="ia3", label="IA3", marker_keys=("on_input",), known_keys=("weight", "on_input"),
    required=((("weight",),),),
    rank=lambda t: None, implied_shape=_ia3_shape,
    multiplicative=lambda t, w, strength: deltas.ia3_weight(w, _f(t, "weight"), _ia3_on_input(t), strength),
))

# Full / diff: the stored tensor is the weight change itself.
LORA_ALGORITHMS.register("full", AlgorithmFamily(
    name="full", label="Full (diff)", marker_keys=("diff",), known_keys=("diff", "diff_b"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["diff"].shape[0]), _flat_in(t["diff"].shape)),
    delta=lambda t, s, shape: _f(t, "diff").reshape(shape) * s,
    bias_key="diff_b", layout_key="diff",
))

# Norm: additive changes to a normalization layer's weight and bias.
LORA_ALGORITHMS.register("norm", AlgorithmFamily(
    name="norm", label="Norm", marker_keys=("w_norm",), known_keys=("w_norm", "b_norm"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["w_norm"].shape[0]), _flat_in(t["w_norm"].shape)),
    delta=lambda t, s, shape: _f(t, "w_norm").reshape(shape) * s,
    bias_key="b_norm", layout_key="w_norm",
))


def rank_cut(weights: ModuleWeights, rank: int) -> ModuleWeights:
    """A1111's `dyn` for DyLoRA files: only the first `rank` ranks of a plain LoRA module (down rows, up columns),
    at the scale of the whole module (alpha over the full rank), as A1111's `rebuild_conventional` slices them.
    Other families and Tucker LoRAs are returned unchanged, as A1111 leaves them."""
    full = weights.rank()
    if weights.family != "lora" or "lora_mid.weight" in weights.tensors or full is None or rank >= full:
        return weights
    tensors = {**weights.tensors, "lora_down.weight": weights.tensors["lora_down.weight"][:rank],
               "lora_up.weight": weights.tensors["lora_up.weight"][:, :rank]}
    alpha = weights.alpha if not weights.alpha else weights.alpha * rank / full  # keeps alpha / rank = alpha / full
    return dataclasses.replace(weights, tensors=tensors, alpha=alpha)


def build_module(tensors_by_suffix: dict[str, torch.Tensor], keys: list[str]) -> tuple[ModuleWeights | None, list[str]]:
    """Recognise one module's tensor group; return it and the suffixes no family claimed.

    A group missing a required tensor is not built: its suffixes come back as unclaimed, with the
    missing ones named as `missing:<suffix>`, so the caller reports the module as broken.
    """
    suffixes = set(tensors_by_suffix)
    for name in LORA_ALGORITHMS:
        family = LORA_ALGORITHMS.get(name)
        if family.matches(suffixes):
            absent = family.missing(suffixes)
            if absent:
                return None, sorted(suffixes) + [f"missing:{k}" for k in absent]
            claimed = set(family.known_keys) | set(SHARED_KEYS)
            own = {k: v for k, v in tensors_by_suffix.items() if k in family.known_keys}
            alpha = tensors_by_suffix.get("alpha")
            module = ModuleWeights(
                family=name, tensors=own,
                alpha=None if alpha is None else float(alpha.float().reshape(-1)[0].item()),
                dora_scale=tensors_by_suffix.get("dora_scale"),
                peft_magnitude=tensors_by_suffix.get("lora_magnitude_vector"), keys=keys,
            )
            return module, sorted(suffixes - claimed)
    return None, sorted(suffixes)
