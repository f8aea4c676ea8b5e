"""Time as the receipts and LangGraph's checkpoint ids write it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["checkpoint_time", "format_time", "fresh_after", "utc_now", "uuid6_floor"]


_UUID_EPOCH = 0x01B21DD213814000
"""100-ns intervals between the UUID epoch (1582-10-15) and the Unix epoch."""
_UNIX = datetime(1970, 1, 1, tzinfo=UTC)


def uuid6_floor(t: datetime) -> str:
    """The smallest uuid6 text with timestamp ``t``: a LangGraph checkpoint id (uuid6,
    time-ordered) sorts before it exactly when it was made before ``t``. A naive
    ``datetime`` is taken as UTC."""
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t
    d = t - _UNIX
    ts = ((d.days * 86400 + d.seconds) * 10**6 + d.microseconds) * 10 + _UUID_EPOCH
    if not 0 <= ts < 1 << 60:
        raise ValueError(f"{t} is outside the uuid6 time range")
    high = f"{ts >> 12:012x}"
    return f"{high[:8]}-{high[8:]}-6{ts & 0xFFF:03x}-8000-000000000000"


def checkpoint_time(checkpoint_id: str) -> datetime | None:
    """When a uuid6 checkpoint id was made (UTC), or None for any other id."""
    if len(checkpoint_id) != 36 or checkpoint_id[14] != "6":
        return None
    try:
        h = checkpoint_id.replace("-", "")
        ts = (int(h[:12], 16) << 12) | int(h[13:16], 16)
    except ValueError:
        return None
    return _UNIX + timedelta(microseconds=(ts - _UUID_EPOCH) // 10)


def utc_now() -> datetime:
    """Now, in UTC (the default clock)."""
    return datetime.now(UTC)


def format_time(t: datetime) -> str:
    """The receipts' UTC form ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` (fraction only if non-zero).

    A naive datetime is taken as UTC (as ``digest.utc_timestamp`` does), never as the
    machine's local time, so an injected ``clock`` cannot shift ``issued_at``.
    """
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    frac = f".{t.microsecond:06d}" if t.microsecond else ""
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def fresh_after(erased_at: str, newest: str | None) -> str:
    """The bound a ``new_conversations`` tombstone compares checkpoint ids with: the
    smallest uuid6 of the erasure's time, or the newest id it erased if that is later
    (a writer's clock ahead of this one)."""
    floor = uuid6_floor(datetime.fromisoformat(erased_at.replace("Z", "+00:00")))
    return max(floor, newest) if newest is not None else floor
