"""The outbox worker: delivers the notices queued in the log's database through their channels, retries failures
with a doubling wait, and runs the desk's periodic upkeep (idle conversations handed back to the bot).

Notices are rows, written in the same transaction as the ticket or message they announce, so a killed process or
an SMTP / WeCom outage delays them and loses none. Before delivering, a worker leases a row (moves its due time on,
conditionally), so of several replicas one sends it; a worker killed mid-send leaves the lease to run out and the
notice is sent again (at least once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from bot.config.base import default_of
from bot.config.handoff import NotifySettings
from bot.handoff.channels import Channel, DeliveryError
from bot.handoff.store import TicketStore

log = logging.getLogger(__name__)
STOP_WAIT_SECONDS = 5.0  # how long closing a server waits for a delivery round already running


class Outbox:
    """Delivers due notices of ``store`` through ``channels`` (name -> channel); ``upkeep`` runs every round."""

    def __init__(
        self,
        store: TicketStore,
        channels: Mapping[str, Channel],
        retry_seconds: float,
        max_retry_seconds: float,
        upkeep: Callable[[], None] | None = None,
        lease_seconds: float = default_of(NotifySettings, "lease_seconds"),
    ):
        self.store = store
        self.channels = dict(channels)
        self.retry_seconds, self.max_retry_seconds = retry_seconds, max_retry_seconds
        self.upkeep = upkeep
        self.lease_seconds = lease_seconds  # a notice in delivery is not taken by another worker for this long
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def add(self, channel: Channel) -> None:
        """Deliver ``channel.name`` notices through ``channel`` from now on (a front end's channel, e.g. WeCom)."""
        self.channels[channel.name] = channel

    def run_once(self) -> int:
        """One round: upkeep, then every due notice whose channel is known; how many were delivered."""
        if self.upkeep is not None:
            self.upkeep()
        delivered = 0
        for notice_id, name, payload, due, attempts in self.store.due():
            channel = self.channels.get(name)
            if channel is None or not self.store.lease(notice_id, due, self.lease_seconds):
                continue  # a channel this process does not run (another replica may), or taken by another worker
            try:
                channel.deliver(payload)
            except DeliveryError as exc:
                wait = min(self.retry_seconds * 2**attempts, self.max_retry_seconds)
                log.warning("hand-off notice %d (%s) failed, retried in %g s: %s", notice_id, name, wait, exc)
                self.store.failed(notice_id, str(exc), wait)
                continue
            except Exception as exc:  # a bug in a channel must not stop the worker nor lose the notice
                log.exception("hand-off notice %d (%s) failed", notice_id, name)
                self.store.failed(notice_id, f"{type(exc).__name__}", self.max_retry_seconds)
                continue
            self.store.sent(notice_id)
            delivered += 1
        return delivered

    def start(self, every: float) -> None:
        """Run a round every ``every`` seconds on a daemon thread until :meth:`stop` (idempotent)."""
        if self._thread is not None:
            return

        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    self.run_once()
                except Exception as exc:  # the database down: logged once per outage, tried again next round
                    if not self._failing:
                        log.error("hand-off outbox round failed (tried again every %g s): %s", every, exc)
                    self._failing = True
                else:
                    if self._failing:
                        log.info("hand-off outbox works again")
                    self._failing = False

        self._thread = threading.Thread(target=loop, name="handoff-outbox", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the worker thread, waiting up to ``STOP_WAIT_SECONDS`` for a round in progress."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(STOP_WAIT_SECONDS)
