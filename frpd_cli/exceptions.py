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
    "ModelOutputError",
    "OptionError",
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


class ModelOutputError(ModelError):
    """The model returned something that is not a probability for some row.

    Attributes
    ----------
    model : str
        The model file.
    row : int
        0-based position of the first bad row among the rows of the failing call.
    n_rows : int
        Rows in the call.
    n_bad : int
        Bad rows in the call.
    problem : str
        What is wrong with that row's output.
    where : str
        Where the row comes from, as the message says it.
    """

    def __init__(self, *, model: str, row: int, n_rows: int, n_bad: int, problem: str, where: str | None = None):
        self.model, self.row, self.n_rows, self.n_bad, self.problem = model, row, n_rows, n_bad, problem
        self.where = where or f"row {row + 1} of the {n_rows} row(s) passed in this call"
        others = f" ({n_bad - 1} other row(s) of the call too)" if n_bad > 1 else ""
        super().__init__(
            f"The model '{model}' {problem} for {self.where}{others}; expected one finite probability in [0, 1] "
            "per class, summing to 1. Check that the file holds a fitted classifier whose predict_proba "
            "returns probabilities."
        )

    def located(self, where: str) -> "ModelOutputError":
        """The same error, saying where the row comes from (e.g. a file and its line)."""
        return ModelOutputError(model=self.model, row=self.row, n_rows=self.n_rows, n_bad=self.n_bad,
                                problem=self.problem, where=where)


class OptionError(InputError):
    """A command-line option has an invalid value (a usage error: the command line exits with status 2).

    Attributes
    ----------
    option : str
        The option as typed on the command line (``--method``).
    """

    def __init__(self, option: str, message: str):
        self.option = option
        super().__init__(message)


class ArtifactError(FrpdError):
    """An artifact folder is missing, corrupted, of another kind or version."""


class StaleArtifactError(ArtifactError):
    """An artifact was built from other inputs than the ones given now."""


class SolverError(FrpdError):
    """An optimisation problem could not be solved (size limit, solver failure)."""


class NotImplementedYetError(FrpdError):
    """A command or option that is declared but not built yet."""
