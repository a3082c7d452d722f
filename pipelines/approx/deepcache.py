"""DeepCache (Ma, Fang & Wang 2023): reuse a UNet's deep features across denoising steps.

Adjacent denoising steps change the UNet's deep, low-resolution features very little, while the
shallow, full-resolution path carries the step-to-step detail. So every `interval` UNet calls the
whole UNet runs and the input of the last `shallow_layers` layers of its final up block is kept;
on the calls in between only the shallow branch runs: the time/text embeddings, `conv_in`, the
first layers of the first down block (the skip connections that branch needs), then the final up
block's last layers on the cached feature, and the output head. `shallow_layers=1` is the paper's
cheapest branch (the one its Stable Diffusion results use); `interval=1` is the plain UNet.

Installed as a `ForwardPatch` around `UNet2DConditionModel.forward` (the module, its weights and LoRA
matching are untouched); `remove_deepcache` takes only that patch out, whatever was stacked on it since. A fixed-graph
UNet that exports the two halves itself (the OpenVINO stand-in's `deepcache_branch`) gets the same schedule through a
ForwardPatch on its `forward`, which its call goes through. The model-level math (where the feature is taken, the
shallow branch) is `mixkit.models.diffusion.deepcache_branch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mixkit.forward_patches import has_foreign_forward, install_forward_patch
from mixkit.models.diffusion.deepcache_branch import capture_feature, check_branch_layout, shallow_forward

_STATE = "_mixkit_deepcache"
_COMPILED_MARKER = "_mixkit_eager_forward"  # set by mixkit.runtime.compile on a compiled UNet


@dataclass(frozen=True)
class DeepCacheSettings:
    """`interval`: run the full UNet every N calls (1 = always, exact). `shallow_layers`: how many
    layers of the final up block are recomputed on cached calls (1 .. layers in that block)."""

    interval: int
    shallow_layers: int = 1

    def __post_init__(self) -> None:
        check_deepcache_interval(self.interval)
        if isinstance(self.shallow_layers, bool) or not isinstance(self.shallow_layers, int) or self.shallow_layers < 1:
            raise ValueError(f"shallow_layers must be an integer >= 1, got {self.shallow_layers!r}")


def check_deepcache_interval(interval: object) -> int:
    if isinstance(interval, bool) or not isinstance(interval, int) or not 1 <= interval <= 50:
        raise ValueError(f"DeepCache interval must be an integer in [1, 50] (full UNet every N steps), got {interval!r}")
    return interval


@dataclass
class DeepCacheState:
    """The cached feature and counters of one installed DeepCache."""

    settings: DeepCacheSettings
    feature: torch.Tensor | None = None
    feature_key: tuple | None = None  # (input shape, dtype, device) the feature belongs to
    position: int = 0  # UNet calls since the start of the current trajectory
    last_timestep: float | None = None
    full_calls: int = 0
    cached_calls: int = 0
    capturing: bool = field(default=False, repr=False)

    def reset(self) -> None:
        """Forget the cached feature: the next call runs the full UNet."""
        self.feature, self.feature_key, self.position, self.last_timestep = None, None, 0, None


def apply_deepcache(unet, settings: DeepCacheSettings) -> DeepCacheState:
    """Wrap the UNet's call with DeepCache; returns the state (counters, `reset()`).

    Raises ValueError, changing nothing, for a UNet it cannot serve: a compiled UNet or a fixed graph
    without a DeepCache branch (their graphs fix the control flow), or block types whose layers it does
    not know.
    """
    check_deepcache_unet(unet, settings)
    # A graph stand-in's branch may be exported now (slow) or fail: before anything changes.
    branch = unet.deepcache_branch(settings.shallow_layers) if _is_graph_standin(unet) else None
    remove_deepcache(unet)
    state = DeepCacheState(settings)
    if branch is not None:
        _install_on_graph(unet, branch, state)
        return state
    def keep(feature):
        if state.capturing:
            state.feature = feature
    hook = capture_feature(unet, settings.shallow_layers, keep)

    def forward(plain_forward, sample, timestep, encoder_hidden_states, *args, **kwargs):
        if args:
            raise TypeError("a DeepCache UNet takes everything after encoder_hidden_states as keyword arguments")
        if _should_run_full(state, sample, timestep):
            state.capturing = True
            try:
                output = plain_forward(sample, timestep, encoder_hidden_states, **kwargs)
            finally:
                state.capturing = False
            state.feature_key = _key(sample)
            state.full_calls += 1
            return output
        state.cached_calls += 1
        result = shallow_forward(unet, state.feature, settings.shallow_layers, sample, timestep,
                                 encoder_hidden_states, **kwargs)
        return result if kwargs.get("return_dict", True) else (result.sample,)

    patch = install_forward_patch(unet, forward, "DeepCache")

    def undo() -> None:
        hook.remove()
        patch.remove()  # puts back the forward that was there before (e.g. the UNet's own, put back by a spy)
    unet.__dict__[_STATE] = (state, undo)
    return state


def prepare_deepcache(unet, settings: DeepCacheSettings) -> None:
    """Do the slow part that may fail before anything changes: a graph stand-in exports its shallow branch
    (once; cached on disk and in the stand-in). Nothing to do for the eager UNet."""
    check_deepcache_unet(unet, settings)
    if _is_graph_standin(unet):
        unet.deepcache_branch(settings.shallow_layers)


def _is_graph_standin(unet) -> bool:
    """A UNet replaced by a fixed graph that exports DeepCache's two halves itself (OpenVINO)."""
    return callable(getattr(type(unet), "deepcache_branch", None))


def _install_on_graph(unet, branch, state: DeepCacheState) -> None:
    """The same schedule on a graph stand-in: its full graph also returns the feature, its shallow graph
    (`branch`, from `unet.deepcache_branch`) takes it back."""

    def call(plain_forward, sample, timestep, encoder_hidden_states, added_cond_kwargs=None, **kwargs):
        # full calls run the graph's feature-returning form, not `plain_forward`: nothing else is below (refused by
        # `check_deepcache_unet`), as on the torch UNet
        if _should_run_full(state, sample, timestep):
            output, state.feature = branch.full(sample, timestep, encoder_hidden_states, added_cond_kwargs, **kwargs)
            state.feature_key = _key(sample)
            state.full_calls += 1
            return output
        state.cached_calls += 1
        return branch.shallow(state.feature, sample, timestep, encoder_hidden_states, added_cond_kwargs, **kwargs)

    patch = install_forward_patch(unet, call, "DeepCache")
    unet.__dict__[_STATE] = (state, patch.remove)


def remove_deepcache(unet: torch.nn.Module) -> bool:
    """Take DeepCache out, putting back the forward that was there before it and leaving patches stacked on top of it
    since in place; False if DeepCache was not installed."""
    installed = unet.__dict__.pop(_STATE, None)
    if installed is None:
        return False
    installed[1]()
    return True


def deepcache_state(unet: torch.nn.Module) -> DeepCacheState | None:
    installed = unet.__dict__.get(_STATE)
    return None if installed is None else installed[0]


def check_deepcache_unet(unet: object, settings: DeepCacheSettings) -> None:
    """Refuse UNets DeepCache cannot wrap, naming what to change."""
    from diffusers import UNet2DConditionModel

    if _is_graph_standin(unet):
        unet.check_deepcache_branch(settings.shallow_layers)
        _refuse_foreign_forward(unet)
        return
    if not isinstance(unet, UNet2DConditionModel):
        raise ValueError(f"DeepCache needs a diffusers UNet2DConditionModel or the openvino backend's UNet graph, got "
                         f"{type(unet).__name__} (e.g. the torch int8 graph, compiled for one call shape): use the "
                         "float UNet, or backend 'openvino' for int8 with DeepCache")
    if _COMPILED_MARKER in unet.__dict__:
        raise ValueError("DeepCache cannot wrap a compiled UNet (torch.compile fixes the control flow it changes); "
                         "drop compile / backend 'torch.compile' or do not use DeepCache")
    _refuse_foreign_forward(unet)
    check_branch_layout(unet, settings.shallow_layers)


def _refuse_foreign_forward(unet) -> None:
    """Refuse a UNet whose forward another wrapper already replaced (DeepCache's own, being re-applied, aside)."""
    if _STATE not in unet.__dict__ and has_foreign_forward(unet):
        raise ValueError(f"DeepCache cannot wrap a UNet whose forward is already replaced (by "
                         f"{getattr(unet.forward, '__qualname__', repr(unet.forward))}): its cached steps run the "
                         "UNet's own blocks and would bypass that wrapper; take it off first (del unet.forward) "
                         "or do not use DeepCache")


def _key(sample: torch.Tensor) -> tuple:
    return tuple(sample.shape), sample.dtype, sample.device


def _should_run_full(state: DeepCacheState, sample: torch.Tensor, timestep) -> bool:
    """Full on every `interval`-th call of a trajectory, and whenever the cache cannot serve this call.

    A timestep above the previous one means a new trajectory (the next image, a hires pass):
    the cached feature belongs to another image. A repeated timestep (second-order samplers
    evaluate twice per step) is the same trajectory.
    """
    t = float(torch.as_tensor(timestep).flatten()[0]) if torch.as_tensor(timestep).numel() else 0.0
    if state.last_timestep is not None and t > state.last_timestep:
        state.reset()
    state.last_timestep = t
    full = (state.position % state.settings.interval == 0 or state.feature is None
            or state.feature_key != _key(sample))
    state.position += 1
    return full
