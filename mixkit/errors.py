"""Exception types a user can trigger, shared by every layer.

They subclass the built-in exceptions a caller would already catch (ValueError, FileNotFoundError),
so `except ValueError` keeps working; the CLI and HTTP layers turn them into one-line messages.
"""


class MixkitError(Exception):
    """Base of all user-facing mixkit errors."""


class UnsafeCheckpointError(MixkitError, ValueError):
    """A checkpoint needs code execution (pickle globals) that mixkit refuses to run."""


class CheckpointFormatError(MixkitError, ValueError):
    """A file is not a readable checkpoint (truncated, wrong format, corrupt header)."""


class ConfigMismatchError(CheckpointFormatError):
    """A single-file checkpoint's tensors do not fit the configs it was read with (another architecture).

    `mismatch` says which keys do not fit, `advice` how to give the right configs; a caller that knows better
    where the configs come from (a refiner reads the base model's) re-raises with its own advice."""

    def __init__(self, mismatch: str, advice: str = "") -> None:  # advice optional: an unpickled copy has one arg
        super().__init__(f"{mismatch}. {advice}" if advice else mismatch)
        self.mismatch, self.advice = mismatch, advice


class ModelNotFoundError(MixkitError, FileNotFoundError):
    """A model source (path or hub id) could not be found or is not a model."""


class UnknownNameError(MixkitError, KeyError, ValueError):
    """A name looked up in a registry does not exist; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""
