"""The one set of request-parsing helpers every servicer uses.

Each turns a field of a request into a domain value or records what is wrong with it under the
field's path. A servicer parses all of a request's fields into one `Problems` and raises once,
so a caller who got three fields wrong hears about all three in one INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TypeVar

from dxts.core.errors import FieldViolation, InvalidArgument
from dxts.core.grpc.convert import enum_from_proto
from dxts.core.grpc.paging import decode_page_token, encode_page_token
from dxts.core.ids import hash_from_str, id_from_str, id_to_str
from dxts.v1 import common_pb2

E = TypeVar("E", bound=StrEnum)
PAGE_TOKEN = "paging.page_token"


class Problems:
    """The field violations found while parsing one request."""

    def __init__(self) -> None:
        self.violations: list[FieldViolation] = []

    def add(self, field: str, description: str) -> None:
        self.violations.append(FieldViolation(field, description))

    def raise_if_any(self) -> None:
        """INVALID_ARGUMENT listing every violation, if there is one."""
        if self.violations:
            raise InvalidArgument(list(self.violations))

    def id(self, text: str, field: str, *, required: bool = True) -> bytes | None:
        """`text` as a 16-byte id; None (and a violation) when it is missing or malformed.
        An empty optional id is None without a violation."""
        if not text:
            if required:
                self.add(field, "required")
            return None
        try:
            return id_from_str(text, field=field)
        except InvalidArgument as error:
            self.violations.extend(error.violations)
            return None

    def ids(self, texts: Sequence[str], field: str) -> list[bytes]:
        """Each text as an id, each checked under `field[i]`; the malformed ones left out."""
        parsed = (self.id(text, f"{field}[{i}]") for i, text in enumerate(texts))
        return [value for value in parsed if value is not None]

    def hash(self, text: str, field: str, *, required: bool = True) -> bytes | None:
        """`text` as a 32-byte content hash (hex), like `id`."""
        if not text:
            if required:
                self.add(field, "required")
            return None
        try:
            return hash_from_str(text, field=field)
        except InvalidArgument as error:
            self.violations.extend(error.violations)
            return None

    def enums(self, enum: type[E], numbers: Sequence[int], field: str) -> list[E]:
        """Each proto enum number as the domain enum; unknown or unspecified ones violate."""
        found: list[E] = []
        for i, number in enumerate(numbers):
            try:
                found.append(enum_from_proto(enum, number, field=f"{field}[{i}]"))
            except InvalidArgument as error:
                self.violations.extend(error.violations)
        return found


def required_id(text: str, field: str) -> bytes:
    """`text` as an id, or INVALID_ARGUMENT naming `field`."""
    if not text:
        raise InvalidArgument("required", field=field)
    return id_from_str(text, field=field)


def optional_id(text: str, field: str) -> bytes | None:
    """`text` as an id, None when empty, or INVALID_ARGUMENT naming `field`."""
    problems = Problems()
    value = problems.id(text, field, required=False)
    problems.raise_if_any()
    return value


def page_after(paging: common_pb2.Paging, fingerprint: str) -> bytes | None:
    """The id a List RPC's page starts after (None: the first page); the token must have
    been issued for the same filters (`fingerprint`)."""
    position = decode_page_token(paging, filters=fingerprint, field=PAGE_TOKEN)
    if position is None:
        return None
    text = position.get("after")
    if not isinstance(text, str):
        raise InvalidArgument("not a page token this server issued", field=PAGE_TOKEN)
    return id_from_str(text, field=PAGE_TOKEN)


def next_page_token(last: bytes | None, fingerprint: str, *, full: bool = True) -> str:
    """The token of the page after the one ending with `last`; empty when there is none (no
    last item, or the page was not full)."""
    if last is None or not full:
        return ""
    return encode_page_token({"after": id_to_str(last)}, filters=fingerprint)
