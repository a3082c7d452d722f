"""Hires fix with ControlNet units guiding both passes, as sd-webui-controlnet runs them.

The extension detects each unit's map once, for the first pass (a pixel-perfect resolution is computed
from the first pass's size), and resizes that map by the unit's resize mode to each pass's size
(`Script.detectmap_proc(detected_map, module, resize_mode, h, w)` and again at the hires size). Here the
first pass prepares the controls as any ControlNet txt2img does, and the second pass resizes them to its
own sampling size (`pipelines.controlnet.residuals.resize_controls`); the guidance window counts the
second pass's own steps. Canny and mlsd units use soft injection in the second pass whatever their control mode
(the extension's `high_res_fix_forced_soft_injection`: `weight * 0.825 ** (12 - i)` per residual). `HiresFix` picks these passes when its params carry units (`hires_passes`).
`inpaint_only` keeps its picture's unmasked area in both passes, each at its own size, as the extension switches
to its hires control (`hr_hint_cond`) in the second pass: the picture and mask are fitted to each pass's size, the
picture's latents are encoded again at the hires size for the per-step blend, and only the finished hires image is
blended onto the picture in pixels (the extension's post-processing runs on the final images alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipelines.controlnet.pipelines import ControlImg2ImgParams, ControlNetMixin, _ControlState
from pipelines.controlnet.residuals import hires_second_pass_controls
from pipelines.hires import HiresParams, _FirstPass, _SecondPass


@dataclass
class ControlHiresParams(HiresParams):
    controlnets: list = field(default_factory=list)  # ControlNetUnit, at most ControlNetLimits.max_units


class ControlFirstPass(ControlNetMixin, _FirstPass):
    """The first pass with its units; keeps the prepared controls for the second pass."""

    controls_out: list

    def _finish_image(self, params, state: _ControlState, image, index: int):
        # No inpaint_only pixel restore here: the extension restores only the finished (hires) images, from the
        # picture fitted to the hires size (its post-processing skips an image of any other size).
        return super(ControlNetMixin, self)._finish_image(params, state.base, image, index)

    def _prepare(self, params) -> _ControlState:
        state = super()._prepare(params)
        self.controls_out = state.controls
        return state


class ControlSecondPass(ControlNetMixin, _SecondPass):
    """The second pass guided by the first pass's controls, resized to this pass's size."""

    first_controls: list

    @classmethod
    def pass_params(cls, params: ControlHiresParams, **values) -> ControlImg2ImgParams:
        return ControlImg2ImgParams(**values, controlnets=params.controlnets)

    def follow(self, first_pass: ControlFirstPass) -> None:
        self.first_controls = first_pass.controls_out

    def _prepare(self, params) -> _ControlState:
        base = super(ControlNetMixin, self)._prepare(params)  # _SecondPass's: the given latents
        return _ControlState(base, hires_second_pass_controls(self.first_controls, params.width, params.height))
