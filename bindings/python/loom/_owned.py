"""What the Runtime, Model and Context classes share: a loom object this
side frees, its handle while it is open, and the ways close() is called."""

from __future__ import annotations

from typing import TypeVar

from .errors import LoomError, Status

_T = TypeVar("_T", bound="Owned")


class Owned:
    """A handle to a loom object; close() (the subclass's) frees it, and
    using the handle after that raises rather than passing a freed
    pointer to C."""

    _handle: int | None = None

    @property
    def handle(self) -> int:
        if self._handle is None:
            name = type(self).__name__
            raise LoomError(Status.INVALID_ARGUMENT, f"the {name.lower()} is closed", name)
        return self._handle

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _T) -> _T:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()
