"""The error every format check raises."""
from __future__ import annotations


class FormatError(ValueError):
    """A stage value that does not fit its format."""
