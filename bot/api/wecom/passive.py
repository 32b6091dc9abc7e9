"""How one WeCom answer goes out: in the callback's passive reply while WeCom still waits, or by the send API after."""

from __future__ import annotations

import threading
from typing import Literal

Way = Literal["passive", "send_api"]
PASSIVE: Way = "passive"
SEND_API: Way = "send_api"


class ReplyWay:
    """Settled once, by whichever comes first: the answer being ready (passive) or the callback giving up (send API)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._way: Way | None = None

    def settle(self, way: Way) -> Way:
        """The way the answer goes out: ``way`` when nothing was settled before, else the one settled first."""
        with self._lock:
            if self._way is None:
                self._way = way
            return self._way
