"""Per-step conditioning for the sampling loop: prompt editing, alternation, AND and CFG combination.

`build_conditioning_plan` parses every prompt of a batch once (AND split, then a step schedule per
part, as A1111 does) and `ConditioningPlan.at_step` returns the batch tensors for one step. Row
layout (A1111's): the AND parts of image 0, of image 1, ..., then one negative-prompt row per image;
`row_image` says which image's latent each row needs (`expand_latents` builds that input).

Step semantics are A1111's: `at_step(s)` (0-based, the sampler's step counter) uses, for each
schedule, the first entry whose end step is >= s. So `[a:b:3]` shows "a" on steps 0..3. A hires-fix
pass passes `first_pass_steps`: its schedules then use A1111's hires offsets (`scheduling.StepCounting`).

Rows of different lengths are padded as A1111 1.10 does with its default settings: the texts of
one prompt's schedule are encoded as one batch (`PromptEncoder.encode_group`), so the shorter ones get
the empty prompt's chunk and emphasis "Original" restores one mean over the whole schedule;
AND parts (and the prompts of a batch) are stacked by repeating each row's last vector
(`stack_conds`); negative prompts of a batch are padded with the empty chunk. Prompt rows and
negative rows are *not* padded to each other (A1111's "Pad prompt/negative prompt" is off by
default): `row_tokens` gives each row's length and the sampler runs each length on its own. With
`cond_padding` (A1111's pad_cond_uncond / pad_cond_uncond_v0) they are made one length (`cond_padding.py`), and
`ConditioningPlan.padded` says whether that happened at some step (A1111's "Pad conds" key).

On SDXL an empty negative prompt is zeros (hidden states and pooled), as in A1111 and diffusers'
`force_zeros_for_empty_prompt`; see `ConditioningPlan._zeroed_negatives`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from mixkit.prompts.composable import get_multicond_prompt_list
from mixkit.prompts.embeddings import ti_hashes_infotext
from mixkit.prompts.encoder import PromptEncoder
from mixkit.prompts.scheduling import get_learned_conditioning_prompt_schedules


@dataclass
class StepConditioning:
    embeds: torch.Tensor  # [R, T, D]
    pooled: torch.Tensor | None  # [R, D2] (SDXL) or None
    uncond_rows: list[int]  # per image, its negative-prompt row
    cond_rows: list[list[tuple[int, float]]]  # per image, (row, weight) of each AND part
    row_image: list[int] = field(default_factory=list)  # per row, the image whose latent it denoises
    # per row, how many of `embeds`' tokens are its own (None: all); rows of unequal length run as
    # separate UNet calls, the rest of `embeds` past a row's length is zero filler
    row_tokens: list[int] | None = None

    def subset(self, rows: list[int], tokens: int) -> "StepConditioning":
        """These rows alone, cut to `tokens`, for one UNet call (combine_cfg still takes the whole step).

        Rows are renumbered; a prompt or negative row left out is dropped from `cond_rows` / marked -1
        in `uncond_rows`, so a ControlNet still tells prompt rows from negative ones.
        """
        index = {row: position for position, row in enumerate(rows)}
        return StepConditioning(
            embeds=self.embeds[rows, :tokens],
            pooled=None if self.pooled is None else self.pooled[rows],
            uncond_rows=[index.get(row, -1) for row in self.uncond_rows],
            cond_rows=[[(index[row], weight) for row, weight in parts if row in index] for parts in self.cond_rows],
            row_image=[self.row_image[row] for row in rows],
        )

    def token_groups(self) -> list[tuple[list[int], int]]:
        """(rows, token count) for each distinct row length, in row order of first appearance."""
        if self.row_tokens is None or len(set(self.row_tokens)) == 1:
            return [(list(range(self.embeds.shape[0])), self.embeds.shape[1])]
        groups: dict[int, list[int]] = {}
        for row, tokens in enumerate(self.row_tokens):
            groups.setdefault(tokens, []).append(row)
        return [(rows, tokens) for tokens, rows in groups.items()]


def _entry_at(schedule: list[list], step: int) -> int:
    for index, (end, _) in enumerate(schedule):
        if step <= end:
            return index
    return len(schedule) - 1


class ConditioningPlan:
    """All schedules of one batch; `at_step` is cheap and returns the same object while nothing changes."""

    def __init__(self, encoder: PromptEncoder, cond_parts: list[list[tuple[list[list], float]]],
                 uncond_schedules: list[list[list]], steps: int, cond_padding: str | None = None) -> None:
        self.encoder = encoder
        self.cond_padding = cond_padding  # None, "empty" or "v0" (mixkit.prompts.cond_padding)
        self.padded = False  # whether some step's prompt and negative rows were padded to one length
        self.old_timelines = False  # whether "use old prompt editing timelines" changed a schedule (infotext key)
        self.cond_parts = cond_parts  # per image: [(schedule, weight)]
        self.uncond_schedules = uncond_schedules
        self.steps = steps
        self._by_texts: dict[tuple[int, ...], StepConditioning] = {}
        self.embeddings_used: dict[str, str] = {}

    def _row_schedules(self) -> list[list[list]]:
        return [schedule for parts in self.cond_parts for schedule, _ in parts] + list(self.uncond_schedules)

    def _row_encodings(self, row: int) -> list:
        """Row `row`'s schedule encoded as one A1111 batch: one EncodedPrompt per schedule entry."""
        schedule = self._row_schedules()[row]
        encoded = self.encoder.encode_group([text for _, text in schedule])
        for item in encoded:
            self.embeddings_used.update(item.embeddings_used)
        return encoded

    @property
    def uses_brackets(self) -> bool:
        """Whether any scheduled text has "(" or "[": when A1111 writes a non-default `Emphasis` to the infotext."""
        return any("(" in text or "[" in text for schedule in self._row_schedules() for _, text in schedule)

    @property
    def ti_hashes(self) -> str:
        """The `TI hashes` infotext value for the embeddings encoded so far (empty when none)."""
        return ti_hashes_infotext(self.embeddings_used)

    def texts_at(self, step: int) -> tuple[str, ...]:
        """The row texts at `step`: every AND part of every image, then every negative prompt."""
        texts = [schedule[_entry_at(schedule, step)][1] for parts in self.cond_parts for schedule, _ in parts]
        texts += [schedule[_entry_at(schedule, step)][1] for schedule in self.uncond_schedules]
        return tuple(texts)

    def at_step(self, step: int) -> StepConditioning:
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0 (0-based sampling step), got {step!r}")
        entries = tuple(_entry_at(schedule, step) for schedule in self._row_schedules())
        cached = self._by_texts.get(entries)
        if cached is None:
            cached = self._build(entries)
            self._by_texts[entries] = cached
        return cached

    def _zeroed_negatives(self) -> list[int]:
        """The negative rows A1111 zeroes on SDXL: those whose every scheduled text is exactly ''.

        A1111's `sd_models_xl.get_learned_conditioning` zeroes the text embedders' outputs (hidden
        states and pooled vector; the size embeddings stay) when `is_negative_prompt and all(x == ''
        for x in batch)`, where `batch` is one negative prompt's schedule texts
        (`prompt_parser.get_learned_conditioning` encodes each prompt's schedule as one batch). So each
        empty negative of a batch is zeroed on its own, a scheduled one such as `[:ugly:5]` is text
        throughout, and an empty *positive* prompt is always text. diffusers' SDXL
        `force_zeros_for_empty_prompt` gives the same zeros for an unset negative prompt. SD 1.x/2.x
        encode the empty negative as text in both.
        """
        if not self.encoder.is_sdxl:
            return []
        return [index for index, schedule in enumerate(self.uncond_schedules)
                if all(text == "" for _, text in schedule)]

    def _build(self, entries: tuple[int, ...]) -> StepConditioning:
        encoded = [self._row_encodings(row)[entry] for row, entry in enumerate(entries)]
        empty = self.encoder.encode("").hidden  # the empty prompt's chunk, A1111's padding chunk
        rows = [item.hidden for item in encoded]
        n_cond = sum(len(parts) for parts in self.cond_parts)
        cond = _stack_repeating_last(rows[:n_cond])
        negative = _stack_with_empty_chunks(rows[n_cond:], empty)
        zeroed = self._zeroed_negatives()
        if zeroed:
            negative = negative.clone()
            negative[zeroed] = 0
        tokens = max(cond.shape[1], negative.shape[1])
        embeds = torch.cat([_zero_fill(cond, tokens), _zero_fill(negative, tokens)])
        row_tokens = [cond.shape[1]] * n_cond + [negative.shape[1]] * negative.shape[0]
        pooled = torch.stack([item.pooled for item in encoded]) if encoded[0].pooled is not None else None
        if pooled is not None and zeroed:
            pooled[[n_cond + index for index in zeroed]] = 0

        cond_rows, row_image, row = [], [], 0
        for image, parts in enumerate(self.cond_parts):
            cond_rows.append([(row + j, weight) for j, (_, weight) in enumerate(parts)])
            row_image += [image] * len(parts)
            row += len(parts)
        uncond_rows = [row + image for image in range(len(self.uncond_schedules))]
        row_image += list(range(len(self.uncond_schedules)))
        built = StepConditioning(embeds=embeds, pooled=pooled, uncond_rows=uncond_rows, cond_rows=cond_rows,
                                 row_image=row_image, row_tokens=row_tokens)
        if self.cond_padding is not None:
            from mixkit.prompts.cond_padding import padded_to_one_length

            padded = padded_to_one_length(built, empty, self.cond_padding)
            if padded is not None:
                self.padded = True
                return padded
        return built


def _pad_with(hidden: torch.Tensor, empty: torch.Tensor, chunks: int) -> torch.Tensor:
    missing = chunks - hidden.shape[0] // empty.shape[0]
    return torch.cat([hidden] + [empty] * missing) if missing > 0 else hidden


def _stack_repeating_last(rows: list[torch.Tensor]) -> torch.Tensor:
    """A1111's `stack_conds`: shorter rows continue with copies of their last token vector."""
    length = max(row.shape[0] for row in rows)
    return torch.stack([torch.cat([row, row[-1:].expand(length - row.shape[0], -1)]) for row in rows])


def _stack_with_empty_chunks(rows: list[torch.Tensor], empty: torch.Tensor) -> torch.Tensor:
    length = max(row.shape[0] for row in rows)
    return torch.stack([_pad_with(row, empty, length // empty.shape[0]) for row in rows])


def _zero_fill(stacked: torch.Tensor, tokens: int) -> torch.Tensor:
    if stacked.shape[1] == tokens:
        return stacked
    return torch.cat([stacked, stacked.new_zeros(stacked.shape[0], tokens - stacked.shape[1], stacked.shape[2])], dim=1)


def _check_step_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _timelines_differ(prompts: list[str], counting: tuple) -> bool:
    """Whether the old and the new timelines give these prompts different schedules.

    A1111's `get_conds_with_caching` compares exactly this (whole prompts, AND included, and negative prompts, with
    the pass's step counts) and writes "Old prompt editing timelines: True" only when they differ, so the key marks
    the images the option changed. In a hires pass the old timelines count in the first pass's steps, so they differ
    whenever the two passes' steps do, even for a prompt without editing (as in A1111).
    """
    return (get_learned_conditioning_prompt_schedules(prompts, *counting, use_old_scheduling=False)
            != get_learned_conditioning_prompt_schedules(prompts, *counting, use_old_scheduling=True))


def build_conditioning_plan(encoder: PromptEncoder, prompts: list[str], negative_prompts: list[str],
                            steps: int, *, first_pass_steps: int | None = None,
                            cond_padding: str | None = None, use_old_scheduling: bool = False) -> ConditioningPlan:
    """Parse a batch's prompts (one per image, extra-network tags already removed) into a plan.

    Positive prompts get AND splitting and scheduling; negative prompts get scheduling only
    (as in A1111, where "AND" in a negative prompt is ordinary text). `steps` are the steps the
    schedules count in (model calls: A1111's total steps); for a hires-fix pass, `first_pass_steps` are
    the first pass's, and the schedules are A1111's hires ones (`get_learned_conditioning_prompt_schedules(
    prompts, first_pass_steps, steps)`, as its `calculate_hr_conds`). `cond_padding`: "empty" or "v0" to make
    prompt and negative rows one length (A1111's "Pad prompt/negative prompt" settings), None to leave them.
    `use_old_scheduling`: A1111's Settings > Compatibility "Use old prompt editing timelines" (`StepCounting`);
    `ConditioningPlan.old_timelines` then says whether it changed any schedule (A1111's infotext key).
    """
    for label, batch in (("prompts", prompts), ("negative_prompts", negative_prompts)):
        if isinstance(batch, str) or not isinstance(batch, (list, tuple)) or not all(isinstance(p, str) for p in batch):
            raise TypeError(f"{label} must be a list of str (one per image), got {batch!r:.100}")
    if len(prompts) != len(negative_prompts) or not prompts:
        raise ValueError(
            f"prompts and negative_prompts must be non-empty and of equal length (one per image), "
            f"got {len(prompts)} and {len(negative_prompts)}"
        )
    _check_step_count("steps", steps)
    if first_pass_steps is not None:
        _check_step_count("first_pass_steps", first_pass_steps)
    # A1111's argument order: (prompts, base steps, hires steps); without a first pass, `steps` are the base.
    counting = (steps,) if first_pass_steps is None else (first_pass_steps, steps)
    if not isinstance(use_old_scheduling, bool):
        raise TypeError(f"use_old_scheduling must be True or False, got {use_old_scheduling!r}")
    indexes, flat, _ = get_multicond_prompt_list(list(prompts))
    flat_schedules = get_learned_conditioning_prompt_schedules(flat, *counting, use_old_scheduling=use_old_scheduling)
    cond_parts = [[(flat_schedules[index], weight) for index, weight in row] for row in indexes]
    uncond_schedules = get_learned_conditioning_prompt_schedules(list(negative_prompts), *counting,
                                                                 use_old_scheduling=use_old_scheduling)
    if cond_padding not in (None, "empty", "v0"):
        raise ValueError(f"cond_padding must be None, 'empty' or 'v0', got {cond_padding!r}")
    plan = ConditioningPlan(encoder, cond_parts, uncond_schedules, steps, cond_padding)
    plan.old_timelines = use_old_scheduling and _timelines_differ([*prompts, *negative_prompts], counting)
    # Encode every schedule now (each batch once, cached in the encoder), so a bad prompt or
    # embedding fails before the first UNet call instead of in the middle of sampling.
    for row in range(len(plan._row_schedules())):
        plan._row_encodings(row)
    plan.at_step(0)
    return plan


def expand_latents(latents: torch.Tensor, step_cond: StepConditioning) -> torch.Tensor:
    """[B, ...] latents -> [R, ...]: the latent of the image each conditioning row belongs to."""
    return latents[torch.as_tensor(step_cond.row_image, device=latents.device)]


def combine_cfg(noise_pred: torch.Tensor, step_cond: StepConditioning, cfg_scale: float) -> torch.Tensor:
    """[R, ...] predictions -> [B, ...]: uncond_i + sum_j w_ij * cfg * (cond_ij - uncond_i)."""
    if noise_pred.shape[0] != len(step_cond.row_image):
        raise ValueError(f"noise_pred has {noise_pred.shape[0]} rows; the step conditioning has {len(step_cond.row_image)}")
    images = []
    for image, parts in enumerate(step_cond.cond_rows):
        uncond = noise_pred[step_cond.uncond_rows[image]]
        result = uncond.clone()
        for row, weight in parts:
            result = result + (noise_pred[row] - uncond) * (weight * cfg_scale)
        images.append(result)
    return torch.stack(images)
