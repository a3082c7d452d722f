"""Progress of a hires-fix job as a whole: each batch's first pass, then its second pass, as A1111 runs them.

A1111 runs the hires pass inside each batch (modules/processing.py: `process_images_inner` loops over
`n_iter`, and each `StableDiffusionProcessingTxt2Img.sample` runs the first pass, then `sample_hr_pass`).
Its console bar counts `(steps + hires steps) * n_iter` steps (`shared.total_tqdm.updateTotal` in `init`), and
`state.job_count` is doubled, with `state.nextjob()` before each hires pass and after each batch, so
`state.job_no` counts passes. Its progress only rises. Here each pass reports its own steps (`StepProgress`
of a one-batch call), and `HiresJobProgress` rewrites them as steps of the whole job.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipelines.control import StepCallback, StepProgress


@dataclass
class HiresStepProgress(StepProgress):
    """One step of one pass, placed in the whole hires job.

    `step`/`total_steps` stay the pass's own (what "Step 3/6" shows); `batch_index`/`batch_count` are the
    job's batches. `fraction` counts every pass's steps, so it only rises over the job."""

    steps_before: int = 0  # steps the job's finished passes ran
    steps_after: int = 0  # steps the passes after this one will run (as planned)
    pass_index: int = 0  # A1111's state.job_no: passes finished before this one (a hires batch is two passes)
    pass_count: int = 1  # A1111's state.job_count: 2 x batch count

    @property
    def fraction(self) -> float:
        done = self.steps_before + self.step
        return done / max(1, self.steps_before + self.total_steps + self.steps_after)


class HiresJobProgress:
    """Hands out the step callback of each pass of a hires job, in running order (batch 1's first pass, its
    second pass, batch 2's first pass, ...), each forwarding to the caller's callback as `HiresStepProgress`."""

    def __init__(self, callback: StepCallback | None, batch_count: int, first_steps: int, second_steps: int) -> None:
        self.callback = callback
        self.batch_count = batch_count
        self.planned = [first_steps, second_steps] * batch_count  # steps of each pass, in running order
        self.ran: list[int] = []  # steps of each started pass: a pass's own count once it reports (UniPC may add)

    def next_pass(self) -> StepCallback | None:
        """The callback for the job's next pass; None when the caller gave no callback."""
        index = len(self.ran)
        self.ran.append(self.planned[index])
        if self.callback is None:
            return None
        before, after = sum(self.ran[:index]), sum(self.planned[index + 1:])

        def forward(progress: StepProgress):
            self.ran[index] = progress.total_steps
            return self.callback(HiresStepProgress(
                progress.step, progress.total_steps, index // 2, self.batch_count, progress.latents, progress.control,
                steps_before=before, steps_after=after, pass_index=index, pass_count=len(self.planned)))

        return forward
