"""Apply several LoRAs to a UNet and its text encoders, and take them off again bit for bit.

Two modes, chosen by name from `LORA_APPLY_MODES`:
- "merge": weights are rewritten once (fastest sampling); the original tensors are kept and copied
  back on `remove()`, so restoring is exact whatever rounding the merge caused.
- "runtime": parameters are never written; patched forwards add the LoRA outputs (see `runtime`).
Sets come off in any order, with one exception: a merged set under a later merged set (its saved copy would drop the
later merge). A merged set under later runtime sets comes off, as A1111 users expect of a baked-in LoRA: its saved
weights are copied back, and the runtime changes that depend on the weight are computed again on them.
LoRAs act on a module in prompt order, each on the weight the earlier ones left, as A1111's
`network_apply_weights` and ComfyUI's `calculate_weight` do: a family whose change depends on the weight
(IA3, OFT, GLoRA, DoRA) also transforms the changes made before it, so `<lora:a:1> <lora:oft:1>` differs
from the reverse order. Additive families (LoRA, LoHa, LoKr, full, norm) do not read the weight, so their
changes are simply summed, which is the same result; strength s of a linear family scales its change by s.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from mixkit.errors import ModelNotFoundError
from mixkit.forward_patches import stamp_forward_change
from mixkit.lora.module_weights import rank_cut
from mixkit.lora.lora_file import LoraFile, load_lora
from mixkit.lora.matching import MatchedModule, find_matches, match_lora
from mixkit.lora.model_index import UNET, ModelIndex
from mixkit.lora.requests import LoraRequest
from mixkit.lora.runtime import BypassBranch, RuntimePatch, can_bypass, install_patch
from mixkit.registry import Registry

# Handles applied to a model and not yet removed, in application order (keyed by the UNet).
_ACTIVE: "weakref.WeakKeyDictionary[nn.Module, list[AppliedLoras]]" = weakref.WeakKeyDictionary()


@dataclass
class LoadedRequest:
    request: LoraRequest
    lora: LoraFile
    matched: list[MatchedModule]
    # `apply_loras(..., partial=True)`: the file's keys that found no module of the same shape, left out
    left_out: list[str] = field(default_factory=list)


@dataclass
class AppliedLoras:
    """LoRAs currently applied to a model; `remove()` restores the model exactly."""

    mode: str
    loaded: list[LoadedRequest]
    _unet: nn.Module
    _undo: list[Callable[[], None]] = field(default_factory=list)
    # runtime mode: recompute the changes that depend on the weight, after a merged set under this one came off
    _reweigh: list[Callable[[], None]] = field(default_factory=list)
    removed: bool = False

    def names(self) -> list[str]:
        return [item.request.display_name for item in self.loaded]

    def infotext_hashes(self) -> str:
        """A1111's `Lora hashes` value: `name1: hash12, name2: hash12`, with ':' and ',' taken out of the names
        (A1111's `ExtraNetworkLora.remove_symbols`), since readers split the value on them."""
        return ", ".join(f"{_infotext_name(item.request.display_name)}: {item.lora.short_hash()}" for item in self.loaded)

    def records(self) -> list[str]:
        """`name:hash:te:unet` per file, what a cache key or report needs to tell two merged weight sets apart."""
        return [f"{_infotext_name(item.request.display_name)}:{item.lora.short_hash()}:{item.request.te_weight:g}:"
                f"{item.request.unet_weight:g}" for item in self.loaded]

    def module_count(self) -> int:
        return sum(len(item.matched) for item in self.loaded)

    def left_out(self) -> dict[str, tuple[int, list[str]]]:
        """A partial application's LoRAs that did not fit whole: display name -> (modules applied, keys left out)."""
        return {item.request.display_name: (len(item.matched), item.left_out) for item in self.loaded if item.left_out}

    def bundled_embeddings(self) -> dict:
        """Trigger-word vectors bundled in the applied files (`bundle_emb.*`), by word, for the prompt encoder; each
        knows the LoRA's name (`TextualInversion.bundled_in`, what `TI hashes` writes for the word)."""
        return {word: dataclasses.replace(embedding, bundled_in=item.request.display_name)
                for item in self.loaded for word, embedding in item.lora.embeddings.items()}

    def remove(self) -> None:
        """Undo this application; a second call does nothing.

        Runtime-mode sets come off in any order: each takes out only its own forward patches. A merge-mode set copies
        back, bit for bit, the weights saved when it was applied; runtime sets applied since stay on, their
        weight-dependent changes (IA3, OFT, GLoRA, DoRA) computed again on the restored weights, so the model is
        what applying them without this set gives. A merge-mode set with a merged set applied after it still on the
        model is refused (ValueError, nothing changed): the copy would drop the later merge."""
        if self.removed:
            return
        stack = _ACTIVE.get(self._unet, [])
        position = next((index for index, handle in enumerate(stack) if handle is self), None)
        later = [] if position is None else stack[position + 1:]
        merged_later = [handle for handle in later if handle.mode == "merge"]
        if self.mode == "merge" and merged_later:
            raise ValueError(
                f"LoRAs {', '.join(self.names())} were merged into the weights before "
                f"{', '.join(name for handle in merged_later for name in handle.names())} were merged too, which are "
                "still applied; remove the most recently applied merged LoRAs first (merged weights are put back "
                "from a copy taken before the later merges), or apply with mode='runtime', whose sets come off in "
                "any order."
            )
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        if self.mode == "merge":
            with torch.no_grad():
                for handle in later:
                    for reweigh in handle._reweigh:
                        reweigh()
        if position is not None:
            del stack[position]
        self.removed = True

    def __enter__(self) -> "AppliedLoras":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def applied_lora_records(unet: nn.Module) -> tuple[str, ...]:
    """Records (`AppliedLoras.records`) of every LoRA set still applied to `unet`, oldest first: what a graph
    converted from this UNet now (OpenVINO) has in its weights, whoever applied them."""
    return tuple(record for handle in _ACTIVE.get(unet, []) if not handle.removed for record in handle.records())


def _infotext_name(name: str) -> str:
    return name.replace(":", "").replace(",", "")


def _changes(module: nn.Module, items: list[tuple[MatchedModule, float]]) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Total float32 weight and bias changes of the LoRAs on one module, applied in `items` order.

    A change that depends on the weight (IA3, OFT, GLoRA, DoRA) is computed on the running weight, original plus
    the changes before it, as A1111 re-reads `self.weight` for each network; additive changes ignore the weight,
    so for them the running weight is never built and a stack of them is the plain sum it always was."""
    original = module.weight.detach().float()
    weight_total, bias_total = None, None
    for match, strength in items:
        weights = match.lora_module.weights
        if match.pad_inputs_to is not None:
            # A 4-channel conv_in change on an inpainting (or instruct-pix2pix) UNet: the extra inputs get zero.
            change = weights.weight_change(original[:, :4], strength)
            change = torch.nn.functional.pad(change, (0, 0, 0, 0, 0, original.shape[1] - 4))
        else:
            running = original if weights.additive or weight_total is None else original + weight_total
            change = weights.weight_change(running, strength).reshape(original.shape)
        weight_total = change if weight_total is None else weight_total + change
        bias = weights.bias_change(strength)
        if bias is not None:
            bias_total = bias if bias_total is None else bias_total + bias
    return weight_total, bias_total


def _apply_merge(targets: dict[int, tuple[nn.Module, list]], undo: list[Callable[[], None]],
                 reweigh: list[Callable[[], None]]) -> None:
    """Merge mode: each module's weights rewritten, a copy kept for `undo`; nothing depends on weights applied later,
    so `reweigh` is left empty."""
    for module, items in targets.values():
        weight_change, bias_change = _changes(module, items)
        for name, change in (("weight", weight_change), ("bias", bias_change)):
            if change is None:
                continue
            param = getattr(module, name)
            # The backup lives on the CPU (as in A1111) so GPU memory does not double during generation.
            saved = param.detach().to("cpu", copy=True)
            with torch.no_grad():
                param.copy_((param.detach().float() + change.reshape(param.shape)).to(param.dtype))
            undo.append(lambda param=param, saved=saved: _restore(param, saved))


def _restore(param: torch.Tensor, saved: torch.Tensor) -> None:
    with torch.no_grad():
        param.copy_(saved)


def _reweighed(module: nn.Module, patch: RuntimePatch, items: list[tuple[MatchedModule, float]]) -> None:
    """`patch`'s dense weight change computed again on `module`'s current weight (a merged set under it came off):
    what applying `items` to the module now gives, bit for bit."""
    weight_change, _ = _changes(module, items)  # the bias change does not depend on the weight
    patch.weight_change = weight_change.reshape(module.weight.shape).to(module.weight.device, module.weight.dtype)
    stamp_forward_change(module)


def _apply_runtime(targets: dict[int, tuple[nn.Module, list]], undo: list[Callable[[], None]],
                   reweigh: list[Callable[[], None]]) -> None:
    """Runtime mode: a forward patch per module (`runtime`), taken out by `undo`; the dense changes of
    weight-dependent families are also registered in `reweigh`, to be computed again if the weights under them
    change."""
    for module, items in targets.values():
        patch = RuntimePatch()
        dense_items, bias_items = [], []
        # A weight-dependent change must see the earlier LoRAs' changes, so such a stack is computed densely, whole.
        weight_dependent = any(not match.lora_module.weights.additive for match, _ in items)
        for match, strength in items:
            bypass = can_bypass(module) and match.pad_inputs_to is None and not weight_dependent
            factors = match.lora_module.weights.low_rank_factors() if bypass else None
            if factors is None:
                dense_items.append((match, strength))
                continue
            dtype = module.weight.dtype
            down, up, mid = (None if t is None else t.to(module.weight.device, dtype) for t in factors)
            patch.branches.append(BypassBranch(down, up, mid, match.lora_module.weights.scale() * strength))
            if match.lora_module.weights.bias_change(strength) is not None:  # PEFT's lora_bias
                bias_items.append(match.lora_module.weights.bias_change(strength))
        weight_change, bias_change = _changes(module, dense_items) if dense_items else (None, None)
        for bias in bias_items:
            bias_change = bias if bias_change is None else bias_change + bias
        cast = lambda t: None if t is None else t.to(module.weight.device, module.weight.dtype)  # noqa: E731
        patch.weight_change = None if weight_change is None else cast(weight_change.reshape(module.weight.shape))
        patch.bias_change = cast(bias_change)
        try:
            undo.append(install_patch(module, patch))
        except ValueError as error:  # a hypernetwork hidden under a foreign wrapper (mixkit.forward_patches)
            target = items[0][0].target
            raise ValueError(f"{target.component} module {target.path}: {error}") from None
        if weight_dependent:  # every item is dense then; additive changes and branches never read the weight
            reweigh.append(lambda module=module, patch=patch, items=dense_items: _reweighed(module, patch, items))


LORA_APPLY_MODES: Registry[Callable] = Registry("LoRA apply mode")
LORA_APPLY_MODES.register("merge", _apply_merge)
LORA_APPLY_MODES.register("runtime", _apply_runtime)


def _combined_by_file(mentions: list[tuple[Path, LoraRequest]]) -> dict[Path, LoraRequest]:
    """One request per file, in first-mention order, for reading, matching, names and hashes: a file requested twice
    is read once and listed once, at the sum of its strengths. Its changes are still made once per mention, in
    request order (`apply_loras` step 2), as A1111 applies each mention (prompt tags of one name come here with their
    last mention's strengths, `requests.same_name_takes_last_strengths`)."""
    combined: dict[Path, LoraRequest] = {}
    for path, request in mentions:
        first = combined.get(path)
        if first is not None and first.dyn_dim != request.dyn_dim:
            raise ValueError(f"LoRA {first.display_name!r} is named twice with different dyn ({first.dyn_dim} and "
                             f"{request.dyn_dim}); one file can be cut to one rank: name it once")
        combined[path] = request if first is None else dataclasses.replace(
            first, te_weight=first.te_weight + request.te_weight, unet_weight=first.unet_weight + request.unet_weight)
    return combined


def _add_in_order(items: list[tuple[MatchedModule, float]], match: MatchedModule, strength: float) -> None:
    """Append one mention's (module, strength) to a module's stack. An additive module mentioned again with no
    weight-dependent change in between is folded into its earlier mention (strengths summed): the same result,
    one weight change instead of two, and bit for bit what applying the file once at the summed strength gives."""
    if match.lora_module.weights.additive:
        for position in range(len(items) - 1, -1, -1):
            earlier, earlier_strength = items[position]
            if not earlier.lora_module.weights.additive:
                break
            if earlier is match:
                items[position] = (earlier, earlier_strength + strength)
                return
    items.append((match, strength))


def _resolve_source(request: LoraRequest, library) -> Path:
    path = Path(str(request.source)).expanduser()
    if path.is_file():
        # absolute, a symlink not followed: errors about the file name it as the caller (or --lora-dir) does
        return path.absolute()
    if library is not None:
        return library.resolve(str(request.source))
    raise ModelNotFoundError(
        f"LoRA {request.source!r} is not a file; pass a path to a .safetensors file, or a LoraLibrary to resolve names."
    )


def check_inputs(unet, text_encoders, requests, mode) -> None:
    if not isinstance(unet, nn.Module):
        raise TypeError(f"unet must be a torch.nn.Module (a diffusers UNet2DConditionModel), got {type(unet).__name__}")
    if not isinstance(text_encoders, (list, tuple)) or not all(isinstance(t, nn.Module) for t in text_encoders):
        raise TypeError("text_encoders must be a list of torch modules: [te] for SD 1.x/2.x, [te1, te2] for SDXL")
    if len(text_encoders) > 2:
        raise ValueError(f"text_encoders holds {len(text_encoders)} models; at most 2 (SDXL) are supported")
    if not isinstance(requests, (list, tuple)) or not all(isinstance(r, LoraRequest) for r in requests):
        raise TypeError("requests must be a list of LoraRequest (see parse_lora_cli_spec / LoraRequest.from_extra_network)")
    LORA_APPLY_MODES.get(mode)


def apply_loras(unet: nn.Module, text_encoders: list[nn.Module], requests: list[LoraRequest], *,
                mode: str = "merge", library=None, partial: bool = False) -> AppliedLoras:
    """Apply `requests` to the model; every key must match or nothing is applied (LoraMismatchError).

    `partial=True` applies each file's modules that find a layer of their shape and leaves the others out
    (`AppliedLoras.left_out`), as A1111's Lora extension patches whichever layers of the loaded model carry a
    network's layer names and fit its shapes: what a model's LoRA does on another model, such as A1111's Refiner."""
    check_inputs(unet, text_encoders, requests, mode)
    index = ModelIndex(unet, list(text_encoders))
    runtime = mode == "runtime"
    loaded: dict[Path, LoadedRequest] = {}
    # 1. Resolve, read and match every file before touching the model.
    mentions = [(_resolve_source(request, library), request) for request in requests]
    for path, request in _combined_by_file(mentions).items():
        lora = load_lora(path)
        if request.dyn_dim is not None:
            lora = dataclasses.replace(lora, modules=[dataclasses.replace(m, weights=rank_cut(m.weights, request.dyn_dim))
                                                      for m in lora.modules])
        for word in lora.embeddings:
            other = next((item for item in loaded.values() if word in item.lora.embeddings), None)
            if other is not None:
                raise ValueError(f"LoRAs {other.request.display_name!r} and {request.display_name!r} both bundle "
                                 f"vectors for the word {word!r}; a prompt can read only one: apply one of them")
        if partial:
            result = find_matches(lora, index, runtime=runtime)
            loaded[path] = LoadedRequest(request, lora, result.matched, result.problems)
        else:
            loaded[path] = LoadedRequest(request, lora, match_lora(lora, index, runtime=runtime))
    # 2. Group all (module, strength) pairs by target module, one per mention in prompt order (the order matters
    #    to weight-dependent families, see `_changes`); strength 0 is skipped: every family's change is its full
    #    change times the strength (DoRA's too, see ModuleWeights.weight_change), so 0 changes nothing.
    targets: dict[int, tuple[nn.Module, list]] = {}
    for path, request in mentions:
        for match in loaded[path].matched:
            strength = float(request.unet_weight if match.target.component == UNET else request.te_weight)
            if strength == 0:
                continue
            _add_in_order(targets.setdefault(id(match.target.module), (match.target.module, []))[1], match, strength)
    # 3. Apply; if anything fails half way, undo what was done so the model is unchanged.
    undo: list[Callable[[], None]] = []
    reweigh: list[Callable[[], None]] = []
    try:
        with torch.no_grad():
            LORA_APPLY_MODES.get(mode)(targets, undo, reweigh)
    except BaseException:
        for step in reversed(undo):
            step()
        raise
    handle = AppliedLoras(mode=mode, loaded=list(loaded.values()), _unet=unet, _undo=undo, _reweigh=reweigh)
    _ACTIVE.setdefault(unet, []).append(handle)
    return handle
