"""smelt's errors: one class per smelt_status code, all under smelt.Error.

Each carries smelt's message (what went wrong and where) as str(e) and the
status code as ``e.status``.
"""
from __future__ import annotations


class Error(Exception):
    """Any failure reported by smelt.  ``status`` is the smelt_status code."""

    status: int = 0

    def __init__(self, message: str = "", status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class InvalidArgumentError(Error, ValueError):
    """A caller argument is wrong (name, shape, dtype, closed session...)."""
    status = 1


class InvalidModelError(Error, ValueError):
    """The model is malformed or inconsistent."""
    status = 2


class UnsupportedError(Error, NotImplementedError):
    """Valid, but not implemented by smelt (an op, a dtype, a precision)."""
    status = 3


class IOError(Error, OSError):  # noqa: A001 - smelt.IOError, not the builtin
    """A file could not be read or written."""
    status = 4


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed or a size is implausible."""
    status = 5


class RuntimeFailure(Error, RuntimeError):
    """A kernel failed on the given data (index out of range...)."""
    status = 6


class InternalError(Error):
    """A bug in smelt: please report it."""
    status = 7


#: indexed by smelt_status (0 = the base class, for codes this version does not know)
BY_STATUS = (Error, InvalidArgumentError, InvalidModelError, UnsupportedError, IOError,
             OutOfMemoryError, RuntimeFailure, InternalError)
