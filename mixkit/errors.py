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


class ModelNotFoundError(MixkitError, FileNotFoundError):
    """A model source (path or hub id) could not be found or is not a model."""


class UnknownNameError(MixkitError, KeyError, ValueError):
    """A name looked up in a registry does not exist; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""
