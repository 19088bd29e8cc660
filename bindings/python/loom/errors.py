"""loom's status codes, and the exception a failed call raises."""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """loom_status: LOOM_OK, and the LOOM_ERR_* codes of loom.h."""

    OK = 0
    INVALID_ARGUMENT = -1
    NO_MEMORY = -2
    IO = -3
    BAD_FORMAT = -4
    UNSUPPORTED = -5
    NOT_FOUND = -6
    CONFIG = -7
    PLUGIN = -8
    CONTRACT = -9
    CONTEXT_FULL = -10
    BUFFER_TOO_SMALL = -11
    BACKEND = -12
    CANCELLED = -13


class LoomError(Exception):
    """A loom call that failed: its status and loom_last_error()'s message."""

    def __init__(self, status: Status | int, message: str, call: str = "") -> None:
        try:
            self.status: Status | int = Status(status)
        except ValueError:
            self.status = status
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        name = self.status.name if isinstance(self.status, Status) else str(status)
        super().__init__(f"{where}{message} ({name})")
