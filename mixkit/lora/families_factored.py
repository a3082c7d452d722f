"""The LoRA families stored as low-rank factors: LoRA/LoCon (kohya), LoHa, LoKr and GLoRA (LyCORIS)."""

from __future__ import annotations

import math

from mixkit.lora import deltas
from mixkit.lora.algorithm_family import AlgorithmFamily, flat_in, float_tensor, shapes_text


# LoRA / LoCon (kohya): lora_down [r, in, k, k], lora_up [out, r, 1, 1], optional Tucker lora_mid [r, r, k, k].
def _lora_shape(t):
    down, up, mid = t["lora_down.weight"], t["lora_up.weight"], t.get("lora_mid.weight")
    kernel = mid.shape[2:] if mid is not None else down.shape[2:]
    return up.shape[0], int(down.shape[1] * math.prod(kernel))


def _lora_check(t):
    down, up, mid = t["lora_down.weight"], t["lora_up.weight"], t.get("lora_mid.weight")
    keys = ("lora_down.weight", "lora_mid.weight", "lora_up.weight")
    if up.dim() < 2 or flat_in(up.shape) != (mid.shape[0] if mid is not None else down.shape[0]):
        return f"ranks disagree: {shapes_text(t, *keys)} (lora_up must be [out, rank(, 1, 1)])"
    if mid is not None and (mid.dim() < 2 or mid.shape[1] != down.shape[0] or math.prod(down.shape[2:]) != 1):
        return f"Tucker ranks disagree: {shapes_text(t, *keys)} (lora_mid must be [rank, rank, k, k], lora_down [rank, in, 1, 1])"
    return None


LORA = AlgorithmFamily(
    name="lora", label="LoRA/LoCon", marker_keys=("lora_down.weight", "lora_up.weight"),
    known_keys=("lora_down.weight", "lora_up.weight", "lora_mid.weight", "lora_up.bias"),
    required=((("lora_down.weight", "lora_up.weight"),),), layout_key="lora_down.weight",
    # PEFT's `lora_bias=True` (`lora_B.bias`): merged as bias + scaling * b (peft `Linear.merge`), as diffusers loads it.
    bias_key="lora_up.bias", bias_scaled=True,
    rank=lambda t: int(t["lora_down.weight"].shape[0]),
    implied_shape=_lora_shape, check=_lora_check,
    delta=lambda t, s, w: deltas.lora_delta(float_tensor(t, "lora_down.weight"), float_tensor(t, "lora_up.weight"),
                                            float_tensor(t, "lora_mid.weight"), s, w.shape),
)


# LoHa: hada_w1_a [out, r] @ hada_w1_b [r, in*k*k]; with Tucker hada_w1_a [r, out], hada_w1_b [r, in], hada_t1 [r, r, k, k].
def _loha_shape(t):
    if "hada_t1" in t:
        return t["hada_w1_a"].shape[1], int(t["hada_w1_b"].shape[1] * math.prod(t["hada_t1"].shape[2:]))
    return t["hada_w1_a"].shape[0], flat_in(t["hada_w1_b"].shape)


def _loha_check(t):
    keys = ("hada_w1_a", "hada_w1_b", "hada_t1", "hada_w2_a", "hada_w2_b", "hada_t2")
    if ("hada_t1" in t) != ("hada_t2" in t):
        return f"only one Tucker core: {shapes_text(t, *keys)} (hada_t1 and hada_t2 come together)"
    if any(t[k].dim() < 2 for k in keys[:2] + keys[3:5]):
        return f"factors must be matrices: {shapes_text(t, *keys)}"
    if "hada_t1" in t:  # hada_wN_a [r, out], hada_wN_b [r, in], hada_tN [r, r, k, k]
        fits = all(t[f"hada_t{n}"].shape[0] == t[f"hada_w{n}_a"].shape[0] and t[f"hada_t{n}"].shape[1] == t[f"hada_w{n}_b"].shape[0]
                   for n in (1, 2)) and t["hada_w1_a"].shape[1] == t["hada_w2_a"].shape[1] \
            and t["hada_w1_b"].shape[1] == t["hada_w2_b"].shape[1] and t["hada_t1"].shape[2:] == t["hada_t2"].shape[2:]
    else:  # hada_wN_a [out, r], hada_wN_b [r, in*k*k]
        fits = all(t[f"hada_w{n}_a"].shape[1] == t[f"hada_w{n}_b"].shape[0] for n in (1, 2)) \
            and t["hada_w1_a"].shape[0] == t["hada_w2_a"].shape[0] and t["hada_w1_b"].shape == t["hada_w2_b"].shape
    return None if fits else f"factors do not fit together: {shapes_text(t, *keys)}"


LOHA = AlgorithmFamily(
    name="loha", label="LoHa", marker_keys=("hada_w1_a",),
    known_keys=("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b", "hada_t1", "hada_t2"),
    required=((("hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"),),),
    rank=lambda t: int(t["hada_w1_b"].shape[0]),
    implied_shape=_loha_shape, check=_loha_check,
    delta=lambda t, s, w: deltas.loha_delta(float_tensor(t, "hada_w1_a"), float_tensor(t, "hada_w1_b"), float_tensor(t, "hada_w2_a"),
                                            float_tensor(t, "hada_w2_b"), float_tensor(t, "hada_t1"), float_tensor(t, "hada_t2"), s, w.shape),
)


# LoKr: kron(w1, w2); each half stored whole or as a/b factors; alpha only matters when a half is factored.
def _lokr_halves(t):
    w1 = deltas.lokr_half(float_tensor(t, "lokr_w1"), float_tensor(t, "lokr_w1_a"), float_tensor(t, "lokr_w1_b"), float_tensor(t, "lokr_t1"))
    w2 = deltas.lokr_half(float_tensor(t, "lokr_w2"), float_tensor(t, "lokr_w2_a"), float_tensor(t, "lokr_w2_b"), float_tensor(t, "lokr_t2"))
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
    return int(w1.shape[0] * w2.shape[0]), int(flat_in(w1.shape) * flat_in(w2.shape))


def _lokr_check(t):
    try:  # the halves are small (each about the square root of the weight): building them is the check
        _lokr_halves(t)
    except RuntimeError:
        keys = ("lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_t1", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t2")
        return f"Kronecker halves do not fit together: {shapes_text(t, *keys)}"
    return None


LOKR = AlgorithmFamily(
    name="lokr", label="LoKr", marker_keys=("lokr_w1", "lokr_w1_a"),
    known_keys=("lokr_w1", "lokr_w1_a", "lokr_w1_b", "lokr_w2", "lokr_w2_a", "lokr_w2_b", "lokr_t1", "lokr_t2"),
    required=((("lokr_w1",), ("lokr_w1_a", "lokr_w1_b")), (("lokr_w2",), ("lokr_w2_a", "lokr_w2_b"))),
    rank=_lokr_rank,
    implied_shape=_lokr_shape, check=_lokr_check,
    delta=lambda t, s, w: deltas.lokr_delta(*_lokr_halves(t), s, w.shape),
)


# GLoRA (LyCORIS): W + scale * (W @ a1 @ a2 + b1 @ b2). A1111's `network_glora` multiplies the factors in
# an older order that fails on these shapes unless the layer is square, so LyCORIS and ComfyUI define it here.
_GLORA_KEYS = ("a1.weight", "a2.weight", "b1.weight", "b2.weight")


def _glora_check(t):
    if "bm.weight" in t:
        return "GLoRA with a Tucker core (bm.weight) is not supported; export the LoRA without use_tucker"
    a1, a2, b1, b2 = (t[k] for k in _GLORA_KEYS)
    if min(x.dim() for x in (a1, a2, b1, b2)) < 2:
        return f"factors must be matrices: {shapes_text(t, *_GLORA_KEYS)}"
    rank, inputs = a2.shape[0], a1.shape[0]
    fits = (flat_in(a1.shape) == rank and flat_in(a2.shape) == inputs and flat_in(b1.shape) == b2.shape[0]
            and b2.shape[1] == inputs)
    return None if fits else (
        f"factors do not fit together: {shapes_text(t, *_GLORA_KEYS)} (LyCORIS's layout is a1 [in, r], a2 [r, in], "
        "b1 [out, r], b2 [r, in(, k, k)]; GLoRA files of LyCORIS before 2.0 are not supported)")


GLORA = AlgorithmFamily(
    name="glora", label="GLoRA", marker_keys=("a1.weight",), known_keys=(*_GLORA_KEYS, "bm.weight"),
    required=((_GLORA_KEYS,),), layout_key="b2.weight",
    rank=lambda t: int(t["a2.weight"].shape[0]),
    implied_shape=lambda t: (int(t["b1.weight"].shape[0]), flat_in(t["b2.weight"].shape)),
    check=_glora_check, additive=False,
    delta=lambda t, s, w: deltas.glora_delta(w, *(float_tensor(t, k) for k in _GLORA_KEYS), s),
)
