"""The LoRA families (LoRA/LoCon, LoHa, LoKr, IA3, full diff, norm, GLoRA, OFT) as one registry.

A file is a set of modules; each module is a group of tensors whose suffixes (`lora_down.weight`,
`hada_w1_a`, `lokr_w1`, ...) say which family it is. Every family turns its tensors into the
change it makes to the target's weight (and bias) at full strength, relative to the original
weight; a strength s scales that change (A1111's `finalize_updown` multiplier, DoRA included), merge
mode adds it, runtime mode adds it in the forward pass, so both are the same function of the file.
Each family also checks that its tensors fit together (`check`) before anything is applied.
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
    # A `.scale` tensor: A1111's `NetworkModule.calc_scale` uses it instead of alpha/rank when present.
    scale_override: float | None = None

    @property
    def is_dora(self) -> bool:
        return self.dora_scale is not None or self.peft_magnitude is not None

    @property
    def spec(self) -> "AlgorithmFamily":
        return LORA_ALGORITHMS.get(self.family)

    def rank(self) -> int | None:
        return self.spec.rank(self.tensors)

    def scale(self) -> float:
        if not self.spec.scaled:
            return 1.0
        if self.scale_override is not None:
            return self.scale_override
        rank = self.rank()
        return 1.0 if rank is None else deltas.rank_scale(self.alpha, rank)

    def problem(self) -> str | None:
        """What is wrong inside this module (tensors that do not fit together, an unsupported variant), or None."""
        empty = sorted(k for k, t in self.tensors.items() if t.numel() == 0 and k not in ("on_input",))
        if empty:
            return f"{', '.join(f'{k} {list(self.tensors[k].shape)}' for k in empty)} is empty (rank 0)"
        return self.spec.check(self.tensors) if self.spec.check is not None else None

    def implied_shape(self) -> tuple[int, int]:
        """(out, flattened in) of the weight this module was trained on."""
        return self.spec.implied_shape(self.tensors)

    def weight_change(self, weight: torch.Tensor, strength: float) -> torch.Tensor:
        """merged(W0, strength) - W0 in float32, for a float32 original weight `weight`."""
        delta = self.spec.delta(self.tensors, self.scale(), weight)
        if self.peft_magnitude is not None:
            return deltas.peft_dora_weight(weight + delta * strength, self.peft_magnitude.float()) - weight
        if self.dora_scale is None:
            return delta * strength
        # DoRA: the strength scales the whole change W'·m/||W'|| - W0, as A1111 (`finalize_updown` after
        # `apply_weight_decompose`) and ComfyUI (`weight_decompose`) do, so 0 is "no LoRA" and the change is
        # linear in the strength; LyCORIS's own merge (W'·(s·(m/||W'|| - 1) + 1)) agrees only at 1.
        return (deltas.dora_weight(weight + delta, self.dora_scale.float()) - weight) * strength

    def bias_change(self, strength: float) -> torch.Tensor | None:
        key = self.spec.bias_key
        if key is None or key not in self.tensors:
            return None
        scale = self.scale() if self.spec.bias_scaled else 1.0
        return self.tensors[key].float().reshape(-1) * (scale * strength)

    def layout_tensor(self) -> torch.Tensor | None:
        """A tensor whose number of dims must equal the target weight's (Linear 2-D, Conv 4-D), if the family has one."""
        key = self.spec.layout_key
        return None if key is None else self.tensors.get(key)

    @property
    def additive(self) -> bool:
        """True when the change does not depend on the original weight (plain sums: LoRA, LoHa, LoKr, full, norm)."""
        return self.spec.additive and not self.is_dora

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
    # (tensors, scale, original float32 weight) -> the change at full strength, in the weight's shape.
    delta: Callable[[dict, float, torch.Tensor], torch.Tensor]
    # tensors -> what does not fit together inside the module (named by tensor and shape), or None.
    check: Callable[[dict], str | None] | None = None
    additive: bool = True  # False: the change depends on the original weight (IA3, GLoRA, OFT)
    scaled: bool = True  # False: alpha/rank and `.scale` do not apply (OFT's alpha is its constraint)
    bias_key: str | None = None
    # True: the bias change is scaled like the weight change (alpha/rank), as PEFT merges `lora_B.bias`.
    bias_scaled: bool = False
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
SHARED_KEYS = ("alpha", "dora_scale", "lora_magnitude_vector", "scale")


def _f(tensors: dict, key: str) -> torch.Tensor | None:
    value = tensors.get(key)
    return None if value is None else value.float()


def _flat_in(shape) -> int:
    return int(math.prod(shape[1:]))


def _shapes(tensors: dict, *keys: str) -> str:
    return ", ".join(f"{k} {list(tensors[k].shape)}" for k in keys if k in tensors)


# LoRA / LoCon (kohya): lora_down [r, in, k, k], lora_up [out, r, 1, 1], optional Tucker lora_mid [r, r, k, k].
def _lora_shape(t):
    down, up, mid = t["lora_down.weight"], t["lora_up.weight"], t.get("lora_mid.weight")
    kernel = mid.shape[2:] if mid is not None else down.shape[2:]
    return up.shape[0], int(down.shape[1] * math.prod(kernel))


def _lora_check(t):
    down, up, mid = t["lora_down.weight"], t["lora_up.weight"], t.get("lora_mid.weight")
    keys = ("lora_down.weight", "lora_mid.weight", "lora_up.weight")
    if up.dim() < 2 or _flat_in(up.shape) != (mid.shape[0] if mid is not None else down.shape[0]):
        return f"ranks disagree: {_shapes(t, *keys)} (lora_up must be [out, rank(, 1, 1)])"
    if mid is not None and (mid.dim() < 2 or mid.shape[1] != down.shape[0] or math.prod(down.shape[2:]) != 1):
        return f"Tucker ranks disagree: {_shapes(t, *keys)} (lora_mid must be [rank, rank, k, k], lora_down [rank, in, 1, 1])"
    return None


LORA_ALGORITHMS.register("lora", AlgorithmFamily(
    name="lora", label="LoRA/LoCon", marker_keys=("lora_down.weight", "lora_up.weight"),
    known_keys=("lora_down.weight", "lora_up.weight", "lora_mid.weight", "lora_up.bias"),
    required=((("lora_down.weight", "lora_up.weight"),),), layout_key="lora_down.weight",
    # PEFT's `lora_bias=True` (`lora_B.bias`): merged as bias + scaling * b (peft `Linear.merge`), as diffusers loads it.
    bias_key="lora_up.bias", bias_scaled=True,
    rank=lambda t: int(t["lora_down.weight"].shape[0]),
    implied_shape=_lora_shape, check=_lora_check,
    delta=lambda t, s, w: deltas.lora_delta(_f(t, "lora_down.weight"), _f(t, "lora_up.weight"),
                                            _f(t, "lora_mid.weight"), s, w.shape),
))


# LoHa: hada_w1_a [out, r] @ hada_w1_b [r, in*k*k]; with Tucker hada_w1_a [r, out], hada_w1_b [r, in], hada_t1 [r, r, k, k].
def _loha_shape(t):
    if "hada_t1" in t:
        return t["hada_w1_a"].shape[1], int(t["hada_w1_b"].shape[1] * math.prod(t["hada_t1"].shape[2:]))
    return t["hada_w1_a"].shape[0], _flat_in(t["hada_w1_b"].shape)


def _loha_check(t):
    keys = ("hada_w1_a", "hada_w1_b", "hada_t1", "hada_w2_a", "hada_w2_b", "hada_t2")
    if ("hada_t1" in t) != ("hada_t2" in t):
        return f"only one Tucker core: {_shapes(t, *keys)} (hada_t1 and hada_t2 come together)"
    if any(t[k].dim() < 2 for k in keys[:2] + keys[3:5]):
        return f"factors must be matrices: {_shapes(t, *keys)}"
    if "hada_t1" in t:  # hada_wN_a [r, out], hada_wN_b [r, in], hada_tN [r, r, k, k]
        fits = all(t[f"hada_t{n}"].shape[0] == t[f"hada_w{n}_a"].shape[0] and t[f"hada_t{n}"].shape[1] == t[f"hada_w{n}_b"].shape[0]
                   for n in (1, 2)) and t["hada_w1_a"].shape[1] == t["hada_w2_a"].shape[1] \
            and t["hada_w1_b"].shape[1] == t["hada_w2_b"].shape[1] and t["hada_t1"].shape[2:] == t["hada_t2"].shape[2:]
    else:  # hada_wN_a [out, r], hada_wN_b [r, in*k*k]
        fits = all(t[f"hada_w{n}_a"].shape[1] == t[f"hada_w{n}_b"].shape[0] for n in (1, 2)) \
            and t["hada_w1_a"].shape[0] == t["hada_w2_a"].shape[0] and t["hada_w1_b"].shape == t["hada_w2_b"].shape
    return None if fits else f"factors do not fit together: {_shapes(t, *keys)}"


LORA_ALGORITHMS.register("loha", AlgorithmFamily(
    name="loha", label="LoHa", marker_keys=("hada_w1_a",),
    known_keys=("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b", "hada_t1", "hada_t2"),
    required=((("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"),),),
    rank=lambda t: int(t["hada_w1_b"].shape[0]),
    implied_shape=_loha_shape, check=_loha_check,
    delta=lambda t, s, w: deltas.loha_delta(_f(t, "hada_w1_a"), _f(t, "hada_w1_b"), _f(t, "hada_w2_a"),
                                            _f(t, "hada_w2_b"), _f(t, "hada_t1"), _f(t, "hada_t2"), s, w.shape),
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


def _lokr_check(t):
    try:  # the halves are small (each about the square root of the weight): building them is the check
        _lokr_halves(t)
    except RuntimeError:
        keys = ("lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_t1", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t2")
        return f"Kronecker halves do not fit together: {_shapes(t, *keys)}"
    return None


LORA_ALGORITHMS.register("lokr", AlgorithmFamily(
    name="lokr", label="LoKr", marker_keys=("lokr_w1", "lokr_w1_a"),
    known_keys=("lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t1", "lokr_t2"),
    required=((("lokr_w1",), ("lokr_w1_a", "lokr_w1_b")), (("lokr_w2",), ("lokr_w2_a", "lokr_w2_b"))),
    rank=_lokr_rank,
    implied_shape=_lokr_shape, check=_lokr_check,
    delta=lambda t, s, w: deltas.lokr_delta(*_lokr_halves(t), s, w.shape),
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
    rank=lambda t: None, implied_shape=_ia3_shape, additive=False,
    delta=lambda t, s, w: deltas.ia3_delta(w, _f(t, "weight"), _ia3_on_input(t)) * s,
))

# Full / diff: the stored tensor is the weight change itself.
LORA_ALGORITHMS.register("full", AlgorithmFamily(
    name="full", label="Full (diff)", marker_keys=("diff",), known_keys=("diff", "diff_b"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["diff"].shape[0]), _flat_in(t["diff"].shape)),
    delta=lambda t, s, w: _f(t, "diff").reshape(w.shape) * s,
    bias_key="diff_b", layout_key="diff",
))

# Norm: additive changes to a normalization layer's weight and bias.
LORA_ALGORITHMS.register("norm", AlgorithmFamily(
    name="norm", label="Norm", marker_keys=("w_norm",), known_keys=("w_norm", "b_norm"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(t["w_norm"].shape[0]), _flat_in(t["w_norm"].shape)),
    delta=lambda t, s, w: _f(t, "w_norm").reshape(w.shape) * s,
    bias_key="b_norm", layout_key="w_norm",
))


# GLoRA (LyCORIS): W + scale * (W @ a1 @ a2 + b1 @ b2). A1111's `network_glora` multiplies the factors in
# an older order that fails on these shapes unless the layer is square, so LyCORIS and ComfyUI define it here.
_GLORA_KEYS = ("a1.weight", "a2.weight", "b1.weight", "b2.weight")


def _glora_check(t):
    if "bm.weight" in t:
        return "GLoRA with a Tucker core (bm.weight) is not supported; export the LoRA without use_tucker"
    a1, a2, b1, b2 = (t[k] for k in _GLORA_KEYS)
    if min(x.dim() for x in (a1, a2, b1, b2)) < 2:
        return f"factors must be matrices: {_shapes(t, *_GLORA_KEYS)}"
    rank, inputs = a2.shape[0], a1.shape[0]
    fits = (_flat_in(a1.shape) == rank and _flat_in(a2.shape) == inputs and _flat_in(b1.shape) == b2.shape[0]
            and b2.shape[1] == inputs)
    return None if fits else (
        f"factors do not fit together: {_shapes(t, *_GLORA_KEYS)} (LyCORIS's layout is a1 [in, r], a2 [r, in], "
        "b1 [out, r], b2 [r, in(, k, k)]; GLoRA files of LyCORIS before 2.0 are not supported)")


LORA_ALGORITHMS.register("glora", AlgorithmFamily(
    name="glora", label="GLoRA", marker_keys=("a1.weight",), known_keys=(*_GLORA_KEYS, "bm.weight"),
    required=((_GLORA_KEYS,),), layout_key="b2.weight",
    rank=lambda t: int(t["a2.weight"].shape[0]),
    implied_shape=lambda t: (int(t["b1.weight"].shape[0]), _flat_in(t["b2.weight"].shape)),
    check=_glora_check, additive=False,
    delta=lambda t, s, w: deltas.glora_delta(w, *(_f(t, k) for k in _GLORA_KEYS), s),
))


# OFT (kohya's OFT, LyCORIS's diag-OFT: `oft_blocks` [blocks, size, size], `alpha` the norm constraint per
# output channel; LyCORIS before 2.0: `oft_diag`, the rotations themselves), as A1111's `network_oft` applies
# them: W' = rescale * R^T W per block of output channels, and strength s gives W + s (W' - W).
def _oft_blocks(t) -> torch.Tensor:
    return t["oft_blocks"] if "oft_blocks" in t else t["oft_diag"]


def _oft_check(t):
    blocks = _oft_blocks(t)
    key = "oft_blocks" if "oft_blocks" in t else "oft_diag"
    if blocks.dim() == 4:
        return f"BOFT (butterfly OFT, {key} {list(blocks.shape)}) is not supported; use OFT (diag-oft) or LoRA"
    if blocks.dim() != 3 or blocks.shape[1] != blocks.shape[2]:
        return f"{key} {list(blocks.shape)} must be [blocks, size, size]"
    rescale = t.get("rescale")
    if rescale is not None and rescale.numel() != blocks.shape[0] * blocks.shape[1]:
        return f"rescale {list(rescale.shape)} is not one value per output of {key} {list(blocks.shape)}"
    return None


def _oft_delta(t, scale, weight):
    blocks = _oft_blocks(t).float()
    if "oft_blocks" in t:
        alpha = t.get("alpha")
        constraint = 0.0 if alpha is None else float(alpha.float().reshape(-1)[0]) * weight.shape[0]
        rotation = deltas.oft_rotation(blocks, constraint)
    else:
        rotation = blocks
    return deltas.oft_delta(weight, rotation, _f(t, "rescale"))


LORA_ALGORITHMS.register("oft", AlgorithmFamily(
    name="oft", label="OFT", marker_keys=("oft_blocks", "oft_diag"), known_keys=("oft_blocks", "oft_diag", "rescale", "alpha"),
    rank=lambda t: None,
    implied_shape=lambda t: (int(_oft_blocks(t).shape[0] * _oft_blocks(t).shape[-1]), -1),
    check=_oft_check, additive=False, scaled=False, delta=_oft_delta,
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
            alpha, scale = tensors_by_suffix.get("alpha"), tensors_by_suffix.get("scale")
            module = ModuleWeights(
                family=name, tensors=own,
                alpha=None if alpha is None else float(alpha.float().reshape(-1)[0].item()),
                dora_scale=tensors_by_suffix.get("dora_scale"),
                peft_magnitude=tensors_by_suffix.get("lora_magnitude_vector"), keys=keys,
                scale_override=None if scale is None else float(scale.float().reshape(-1)[0].item()),
            )
            return module, sorted(suffixes - claimed)
    return None, sorted(suffixes)
