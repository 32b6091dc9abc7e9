"""Business hours: whether people answer now, and when they next will (``handoff.hours``, in its time zone)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from bot.config.handoff import HoursSettings

ZH_DAYS = ("周一", "周二", "周三", "周四", "周五", "周六", "周日")
EN_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LOOKAHEAD_DAYS = 400  # a schedule with a year of holidays still finds its next opening


class BusinessHours:
    """The weekly schedule and holidays of ``handoff.hours``; no schedule means always open."""

    def __init__(self, settings: HoursSettings):
        self.zone = ZoneInfo(settings.timezone)
        self.always = not settings.weekly
        self.holidays = frozenset(settings.holidays)
        self._spans = [settings.spans(day) for day in range(7)]

    def _day_spans(self, day: date) -> list[tuple[time, time | None]]:
        return [] if day in self.holidays else self._spans[day.weekday()]

    def is_open(self, now: datetime) -> bool:
        """True when ``now`` (aware) falls in an opening span."""
        if self.always:
            return True
        local = now.astimezone(self.zone)
        clock = local.time().replace(tzinfo=None)
        return any(start <= clock and (end is None or clock < end) for start, end in self._day_spans(local.date()))

    def next_open(self, now: datetime) -> datetime | None:
        """The next moment (in the schedule's zone) people answer after ``now``; ``now`` itself when open; None when
        the schedule never opens."""
        if self.is_open(now):
            return now.astimezone(self.zone)
        local = now.astimezone(self.zone)
        for offset in range(LOOKAHEAD_DAYS):
            day = local.date() + timedelta(days=offset)
            for start, _ in self._day_spans(day):
                opening = datetime.combine(day, start, self.zone)
                if opening > local:
                    return opening
        return None

    def describe(self, moment: datetime, now: datetime) -> tuple[str, str]:
        """(Chinese, English) of ``moment`` as a visitor reads it at ``now``: 今天/明天/周三 09:00 (Asia/Shanghai)."""
        local, today = moment.astimezone(self.zone), now.astimezone(self.zone).date()
        days = (local.date() - today).days
        clock = local.strftime("%H:%M")
        if days == 0:
            zh, en = f"今天 {clock}", f"today at {clock}"
        elif days == 1:
            zh, en = f"明天 {clock}", f"tomorrow at {clock}"
        elif days < 7:
            zh, en = f"{ZH_DAYS[local.weekday()]} {clock}", f"{EN_DAYS[local.weekday()]} at {clock}"
        else:
            zh, en = f"{local:%m月%d日} {clock}", f"{local:%b %d} at {clock}"
        zone = str(self.zone)
        return f"{zh}（{zone}）", f"{en} ({zone})"


def utc_now() -> datetime:
    """Now, aware, in UTC."""
    return datetime.now(UTC)
