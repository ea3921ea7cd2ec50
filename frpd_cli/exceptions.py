"""The exception hierarchy of frpd.

Every error the library raises on purpose is a :class:`FrpdError`. The command
line catches it once, prints ``Error: <message>`` to stderr and exits with
status 1. Subclasses also derive from :class:`ValueError` where the error is
about a value the caller passed in.
"""

__all__ = [
    "FrpdError",
    "InputError",
    "SchemaError",
    "ModelError",
    "ArtifactError",
    "StaleArtifactError",
    "SolverError",
    "NotImplementedYetError",
]


class FrpdError(Exception):
    """Base class of every error frpd raises on purpose."""


class InputError(FrpdError, ValueError):
    """A data file, an option or a value is not what frpd expects."""


class SchemaError(InputError):
    """The feature schema is inconsistent with the data or with itself."""


class ModelError(FrpdError):
    """The model file cannot be loaded or does not fit the data."""


class ArtifactError(FrpdError):
    """An artifact folder is missing, corrupted, of another kind or version."""


class StaleArtifactError(ArtifactError):
    """An artifact was built from other inputs than the ones given now."""


class SolverError(FrpdError):
    """An optimisation problem could not be solved (size limit, solver failure)."""


class NotImplementedYetError(FrpdError):
    """A command or option that is declared but not built yet."""
