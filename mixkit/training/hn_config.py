"""Settings of A1111's Train tab for hypernetworks, as JSON-round-tripping dataclasses: creating one
(`HypernetworkCreateConfig`, A1111's "Create hypernetwork") and training one (`SDHypernetworkConfig`, its "Train
hypernetwork"; the data, steps, optimizer, validation and saving settings are every SD trainer's, `SDRunOptions`).

A hypernetwork is used by its file name (`<hypernet:NAME:1>`), so the name is the output's file stem and the output
is an A1111 `.pt` (the only suffix A1111 and mixkit list as hypernetworks).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from mixkit.hypernetworks.shape import HypernetworkShape, check_name
from mixkit.training.config_checks import check_bools, check_optional_strings
from mixkit.training.config_json import JsonConfig
from mixkit.training.sd_run_options import SDRunOptions

HYPERNETWORK_SUFFIX = ".pt"
# A1111's default hypernetwork learning rate (its Train tab's field)
A1111_HYPERNETWORK_RATE = 1e-5


def check_hypernetwork_output(output, setting: str = "output") -> Path:
    """The output must be a `.pt` file name (not a folder) whose stem is a name A1111 keeps."""
    if not isinstance(output, str) or not output.strip():
        raise ValueError(f"{setting} must name the hypernetwork file to write, like "
                         f"'models/hypernetworks/my_style.pt', got {output!r}")
    path = Path(output).expanduser()
    if path.is_dir():
        raise ValueError(f"{setting} {output!r} is a folder; name the file, like {str(path / 'my_style.pt')!r}")
    if path.suffix != HYPERNETWORK_SUFFIX:
        raise ValueError(f"{setting} {output!r} must end in .pt: A1111 and mixkit list only .pt files as "
                         f"hypernetworks; try {str(path.with_suffix(HYPERNETWORK_SUFFIX))!r}")
    check_name(path.stem)
    return path


@dataclass
class HypernetworkCreateConfig(HypernetworkShape, JsonConfig):
    """A new, untrained hypernetwork written to `output` (`models/hypernetworks/NAME.pt`), initialised from `seed`.

    An existing file is kept unless `overwrite` (A1111's "Overwrite Old Hypernetwork")."""

    output: str
    overwrite: bool = False
    seed: int = 0

    def check(self) -> None:
        """Raise ValueError/TypeError naming the first setting out of range."""
        check_hypernetwork_output(self.output)
        check_bools(self, ("overwrite",))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"seed must be a whole number, got {self.seed!r}")
        self.check_shape()
        if not self.overwrite and Path(self.output).expanduser().exists():
            raise ValueError(f"output {self.output!r} exists; set overwrite=true to replace it (its training is lost) "
                             "or choose another name")


@dataclass
class SDHypernetworkConfig(SDRunOptions, HypernetworkShape, JsonConfig):
    """Everything that decides the result of a run.

    Trains the file `hypernetwork` on (its layout, weights and step: the written files count on from its step, as
    A1111 continues a hypernetwork), or, without it, a new one of the shape settings (`enable_sizes`,
    `layer_structure`, ...) initialised from `seed`; a continued file's data order, noise and dropout go on from
    its step, and with its `.optim` (`save_optimizer_state`) its optimizer too. `max_steps` is this run's steps;
    `learning_rate_schedule` (A1111's stepped "5e-5:100, 5e-6:1500") counts the hypernetwork's own steps, as A1111
    does, and ends the run at its last step. `save_every_n_steps` writes `<name>-<step>.pt` next to `output`, as
    A1111 names them.
    """

    model: str
    dataset: str
    output: str
    hypernetwork: str | None = None
    learning_rate: float = A1111_HYPERNETWORK_RATE
    learning_rate_schedule: str | None = None
    # The training captions from an A1111 template file's lines ([filewords]: the image's caption, [name]: the
    # hypernetwork's name) or one of mixkit's named sets (`ti_templates.NAMED_TEMPLATES`); without: the captions.
    template_file: str | None = None
    template_name: str | None = None
    mixed_precision: str = "auto"
    output_name: str | None = None  # names the sample images; default: the output's stem
    # A1111's "Saves Optimizer state as separate *.optim file": every written `.pt` gets `<file>.pt.optim`, which a
    # later run continuing that file loads (whatever this setting), so it goes on as one unbroken run would.
    save_optimizer_state: bool = False

    def name(self) -> str:
        return Path(self.output).stem

    def check(self) -> None:
        """Raise ValueError/TypeError naming the first setting out of range (before anything loads)."""
        self.check_sd_training()
        output = check_hypernetwork_output(self.output)
        check_bools(self, ("save_optimizer_state",))
        check_optional_strings(self, ("hypernetwork", "template_file", "template_name", "learning_rate_schedule",
                                      "output_name"))
        if self.hypernetwork is not None:
            start = Path(self.hypernetwork).expanduser()
            if not start.is_file():
                raise ValueError(f"hypernetwork {self.hypernetwork!r} is not a file; name the A1111 hypernetwork "
                                 "(.pt) to train on, or leave it out to create a new one")
            changed = [f.name for f in dataclasses.fields(HypernetworkShape)
                       if getattr(self, f.name) != getattr(HypernetworkShape(), f.name)]
            if changed:
                raise ValueError(f"{', '.join(changed)} describe a new hypernetwork, but hypernetwork "
                                 f"{self.hypernetwork!r} brings its own layout; remove them or the hypernetwork")
            if output.exists() and output.resolve() != start.resolve():
                raise ValueError(f"output {self.output!r} exists and is not the hypernetwork being trained; choose "
                                 "another output, or set output to the hypernetwork to continue it in place")
        else:
            self.check_shape()
            if output.exists():
                raise ValueError(f"output {self.output!r} exists; set hypernetwork={self.output!r} to continue "
                                 "training it, or choose another output for a new one")
        if self.template_file is not None and self.template_name is not None:
            raise ValueError("template_file and template_name each choose the training captions; keep one")
        if self.template_name is not None:
            from mixkit.training.ti_templates import NAMED_TEMPLATES

            NAMED_TEMPLATES.get(self.template_name)  # an unknown name lists the valid ones
        if self.learning_rate_schedule is not None:
            from mixkit.training.a1111_learn_rate import parse_learn_rate

            parse_learn_rate(self.learning_rate_schedule)
            if self.lr_schedule != "constant" or self.warmup_steps:
                raise ValueError(f"learning_rate_schedule {self.learning_rate_schedule!r} sets every step's rate; "
                                 f"remove lr_schedule={self.lr_schedule!r} / warmup_steps={self.warmup_steps!r}")

    def caption_templates(self):
        """The run's `CaptionTemplates` ([name] is the hypernetwork's name), or None: the captions as they are."""
        from mixkit.training.ti_templates import NAMED_TEMPLATES, CaptionTemplates, read_template_file

        if self.template_file:
            lines = read_template_file(self.template_file, require_name=False)
        elif self.template_name:
            lines = NAMED_TEMPLATES.get(self.template_name)
        else:
            return None
        return CaptionTemplates(lines, self.name())
