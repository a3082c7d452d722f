"""The UNet as a graph of plain tensors: what OpenVINO conversion and torch export trace, and how a
diffusers-style UNet call is flattened into that graph's inputs.

Shared by every stand-in that replaces the UNet with a fixed graph (OpenVINO, the torch int8 graph)
and by int8 calibration, which records calls in the same flat form.
"""

from __future__ import annotations

import torch

from mixkit.models.diffusion.deepcache_branch import capture_feature, shallow_forward


class UNetGraph(torch.nn.Module):
    """The UNet with plain tensor inputs and output, as a traced graph needs (SDXL: two more inputs)."""

    def __init__(self, unet: torch.nn.Module, sdxl: bool) -> None:
        super().__init__()
        self.unet, self.sdxl = unet, sdxl

    def forward(self, sample, timestep, encoder_hidden_states, text_embeds=None, time_ids=None):
        added = {"text_embeds": text_embeds, "time_ids": time_ids} if self.sdxl else None
        return self.unet(sample, timestep, encoder_hidden_states, added_cond_kwargs=added, return_dict=False)[0]


def is_sdxl(unet_config) -> bool:
    return unet_config.get("addition_embed_type") == "text_time"


def refuse_graph_keywords(kwargs: dict, what: str, remedy: str) -> None:
    """A fixed graph has no ControlNet residuals or cross-attention kwargs: refuse them, never ignore them."""
    unsupported = sorted(k for k, v in kwargs.items() if v is not None and k != "return_dict")
    if unsupported:
        raise ValueError(f"{what} runs a fixed UNet graph and cannot honour {unsupported} (e.g. ControlNet "
                         f"residuals); {remedy}")


def flat_unet_inputs(sample, timestep, encoder_hidden_states, added_cond_kwargs, sdxl: bool) -> list[torch.Tensor]:
    """The graph's inputs for one UNet call: float32, contiguous, the timestep as one value per row."""
    batch = sample.shape[0]
    t = torch.as_tensor(timestep, dtype=torch.float32).reshape(-1).expand(batch).contiguous()
    inputs = [sample.float().contiguous(), t, encoder_hidden_states.float().contiguous()]
    if sdxl:
        inputs += [added_cond_kwargs["text_embeds"].float().contiguous(),
                   added_cond_kwargs["time_ids"].float().contiguous()]
    return inputs


class FeatureUNetGraph(torch.nn.Module):
    """`UNetGraph` that also returns DeepCache's deep features: output 0 is the UNet's output, output k
    (1 .. `layers`) the feature a DeepCache branch with k shallow layers starts from. One graph serves the
    plain call and every branch depth, so a backend stores one UNet graph, not one per setting."""

    def __init__(self, unet: torch.nn.Module, sdxl: bool, layers: int) -> None:
        super().__init__()
        self.plain, self.layers = UNetGraph(unet, sdxl), layers  # not "graph": a traced module's own attribute

    def forward(self, sample, timestep, encoder_hidden_states, text_embeds=None, time_ids=None):
        features: dict[int, torch.Tensor] = {}
        hooks = [capture_feature(self.plain.unet, k, lambda x, k=k: features.__setitem__(k, x))
                 for k in range(1, self.layers + 1)]
        try:
            output = self.plain(sample, timestep, encoder_hidden_states, text_embeds, time_ids)
        finally:
            for hook in hooks:
                hook.remove()
        return (output, *(features[k] for k in range(1, self.layers + 1)))


class ShallowUNetGraph(torch.nn.Module):
    """DeepCache's shallow branch with plain tensor inputs: the UNet inputs, then the cached feature."""

    def __init__(self, unet: torch.nn.Module, sdxl: bool, shallow_layers: int) -> None:
        super().__init__()
        self.unet, self.sdxl, self.shallow_layers = unet, sdxl, shallow_layers

    def forward(self, sample, timestep, encoder_hidden_states, feature, text_embeds=None, time_ids=None):
        added = {"text_embeds": text_embeds, "time_ids": time_ids} if self.sdxl else None
        return shallow_forward(self.unet, feature, self.shallow_layers, sample, timestep, encoder_hidden_states,
                               added_cond_kwargs=added).sample
