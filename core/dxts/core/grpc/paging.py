"""Paging for every List RPC (common.proto's `Paging` / `next_page_token`).

A page token is opaque to clients: URL-safe base64 of a small JSON object holding where the
next page starts (typically the last key returned) and a fingerprint of the filters it was
issued for, so a token replayed with other filters is refused instead of silently skipping
rows.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from dxts.core.errors import InvalidArgument
from dxts.v1 import common_pb2

DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


def page_size(
    paging: common_pb2.Paging,
    *,
    default: int = DEFAULT_PAGE_SIZE,
    maximum: int = MAX_PAGE_SIZE,
    field: str = "paging.page_size",
) -> int:
    """The number of items to return: 0 → `default`, capped at `maximum`."""
    if paging.page_size < 0:
        raise InvalidArgument(f"must not be negative, got {paging.page_size}", field=field)
    return min(paging.page_size or default, maximum)


def filters_fingerprint(*filters: Any) -> str:
    """A short digest of a request's filters (anything JSON-serialisable)."""
    text = json.dumps(filters, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_page_token(position: dict[str, Any], *, filters: str = "") -> str:
    """The next_page_token for `position` (JSON-serialisable) under `filters`."""
    payload = json.dumps({"p": position, "f": filters}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def decode_page_token(
    paging: common_pb2.Paging, *, filters: str = "", field: str = "paging.page_token"
) -> dict[str, Any] | None:
    """The position a page token encodes; None for the first page."""
    token = paging.page_token
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw)
        position, issued_for = payload["p"], payload["f"]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise InvalidArgument("not a page token this server issued", field=field) from None
    if not isinstance(position, dict):
        raise InvalidArgument("not a page token this server issued", field=field)
    if issued_for != filters:
        raise InvalidArgument("the page token was issued for different filters", field=field)
    return position
