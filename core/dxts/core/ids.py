"""Identifiers and hashes: UUIDv7 for minted ids, one canonicaliser for every hash.

* Minted ids (workgraphs, transformations, inputs, parcels, outputs, ownership rows) are UUIDv7,
  increasing within a process, stored as BINARY(16) and carried over gRPC as canonical
  lowercase hyphenated strings.
* Content hashes (processes, requirements, resolved hints) are SHA-256 of the canonical JSON:
  32 bytes, carried as 64 lowercase hex characters. The canonical JSON is RFC 8785 (JCS) with
  one extension: an integer beyond IEEE-754's exact range (|n| > 2^53 - 1), which JCS refuses,
  is written as its exact decimal digits (sign, no exponent, no fraction), so a CWL document's
  `long` keeps its value. Every value JCS accepts is written byte for byte as JCS writes it
  (its hash is unchanged). A float keeps JCS's ECMAScript spelling (2.0**60 is
  `1152921504606847000`, 1e21 is `1e+21`) and an integer its exact digits (2**60 is
  `1152921504606846976`): an integer is never rounded into a float's spelling.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import threading
import time
import uuid
from typing import Any

import rfc8785
import xxhash

from dxts.core.errors import FieldViolation, InvalidArgument

UUID_BYTES = 16
CONTENT_HASH_BYTES = 32


def new_id() -> bytes:
    """Mint a UUIDv7 (time-ordered, so bulk inserts stay index-local) as 16 bytes."""
    return new_ids(1)[0]


def new_ids(count: int) -> list[bytes]:
    """Mint `count` UUIDv7s, in increasing order, each greater than every id this process
    minted before.

    RFC 9562's method 1 (a fixed-length counter): the 48-bit millisecond timestamp, a 26-bit
    counter (the 12 bits of rand_a and the top 14 of rand_b) seeded at random below half its
    range each new millisecond and counted up within one (or when the clock steps back), and
    48 random bits. A batch reserves its counter range once and draws its randomness in one
    call: a feeder mints an id per input, a packer one per parcel.
    """
    ids: list[bytes] = []
    while count > 0:
        size = min(count, _COUNTER_HALF)
        millisecond, first = _reserve(size)
        noise = os.urandom(6 * size)
        prefix = (millisecond << 16) | 0x7000  # timestamp and version 7: the first 8 bytes
        for i, counter in enumerate(range(first, first + size)):
            high = prefix | (counter >> 14)
            low = 0x8000 | (counter & 0x3FFF)  # variant 0b10 and the counter's low 14 bits
            ids.append(high.to_bytes(8) + low.to_bytes(2) + noise[6 * i : 6 * i + 6])
        count -= size
    return ids


_COUNTER_BITS = 26
_COUNTER_HALF = 1 << (_COUNTER_BITS - 1)
_mint_lock = threading.Lock()
_last_millisecond = 0
_last_counter = 0


def _reserve(size: int) -> tuple[int, int]:
    """The millisecond and first counter of `size` (at most half the counter range) ids that
    sort after every id reserved before; a full counter moves on to the next millisecond."""
    global _last_millisecond, _last_counter
    with _mint_lock:
        now = time.time_ns() // 1_000_000
        if now > _last_millisecond:
            millisecond, first = now, secrets.randbits(_COUNTER_BITS - 1)
        else:
            millisecond, first = _last_millisecond, _last_counter + 1
        if first + size > 1 << _COUNTER_BITS:
            millisecond, first = millisecond + 1, secrets.randbits(_COUNTER_BITS - 1)
        _last_millisecond, _last_counter = millisecond, first + size - 1
    return millisecond, first


def mint_after(floor: bytes) -> None:
    """Make every id this process mints from now on sort after `floor` (an id minted anywhere,
    perhaps by a process whose clock runs ahead): the next ids continue `floor`'s millisecond
    and counter when the local ones would not sort after it. The Edge feeder's watermark rests
    on this (`dxts.execution.store.outcomes.hold_outputs`)."""
    global _last_millisecond, _last_counter
    millisecond = int.from_bytes(floor[:6])
    counter = (int.from_bytes(floor[6:8]) & 0x0FFF) << 14 | int.from_bytes(floor[8:10]) & 0x3FFF
    with _mint_lock:
        if (millisecond, counter) >= (_last_millisecond, _last_counter):
            _last_millisecond, _last_counter = millisecond, counter


def id_to_str(value: bytes) -> str:
    """Render a 16-byte id in the canonical form used on the wire and in logs."""
    if not isinstance(value, bytes | bytearray) or len(value) != UUID_BYTES:
        raise InvalidArgument(f"an id is {UUID_BYTES} bytes, got {value!r}")
    h = value.hex()  # what str(uuid.UUID(bytes=value)) gives, a third of the time
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def id_from_str(text: str, *, field: str = "id") -> bytes:
    """Parse a canonical id string; anything else is INVALID_ARGUMENT naming `field`."""
    if not isinstance(text, str):
        raise InvalidArgument(f"expected a UUID string, got {type(text).__name__}", field=field)
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        raise InvalidArgument(f"{text!r} is not a UUID", field=field) from None
    if str(parsed) != text:
        raise InvalidArgument(f"{text!r} is not in canonical form (expected {parsed})", field=field)
    return parsed.bytes


def hash_to_str(value: bytes) -> str:
    """Render a 32-byte content hash as lowercase hex."""
    if not isinstance(value, bytes | bytearray) or len(value) != CONTENT_HASH_BYTES:
        raise InvalidArgument(f"a content hash is {CONTENT_HASH_BYTES} bytes, got {value!r}")
    return bytes(value).hex()


def hash_from_str(text: str, *, field: str = "hash") -> bytes:
    """Parse a content hash (64 hex characters, an optional `sha256:` prefix)."""
    if not isinstance(text, str):
        raise InvalidArgument(f"expected a hex string, got {type(text).__name__}", field=field)
    digits = text.removeprefix("sha256:")
    if len(digits) != 2 * CONTENT_HASH_BYTES:
        raise InvalidArgument(
            f"{text!r} is not a content hash ({2 * CONTENT_HASH_BYTES} hex digits)", field=field
        )
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise InvalidArgument(f"{text!r} is not hexadecimal", field=field) from None


def canonical_json(value: Any, *, field: str = "") -> bytes:
    """RFC 8785 (JCS) canonical JSON bytes of `value`, integers exact at any size (above).

    Refuses what JSON cannot carry exactly (NaN, infinities, non-string keys, non-JSON types) as
    INVALID_ARGUMENT rather than silently coercing it, because a hash over a coerced value would
    identify something the caller never sent.
    """
    try:
        return _plain_canonical(value)
    except _NotPlain:
        pass
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise InvalidArgument(
            FieldViolation(field, f"not canonicalisable as JSON: {exc}")
        ) from None


class _NotPlain(Exception):
    """The value needs the reference implementation (a float, a subclass, a refusal...)."""


# The C string encoder escapes exactly what RFC 8785 escapes: `"`, `\\`, and U+0000-U+001F
# (\b \t \n \f \r short, the rest as \u00xx in lowercase hex), and nothing else.
_encode_string = json.encoder.encode_basestring


def _plain_canonical(value: Any) -> bytes:
    """The canonical JSON of a value made only of the exact types null, bool, str, int, float
    (finite), list, tuple and dict with str keys: byte for byte what `rfc8785.dumps` writes
    (property-tested against it) but for the integers it refuses, at a fraction of its cost:
    input hashes and proposal copies canonicalise every input a feeder yields. A float's
    ECMAScript spelling is the reference's, number by number. Anything else (subclasses,
    strings that are not valid UTF-8, NaN and infinities) raises `_NotPlain` and goes to the
    reference implementation, which refuses an integer beyond 2^53 - 1 there."""
    parts: list[str] = []
    try:
        _write_plain(value, parts)
        return "".join(parts).encode("utf-8")
    except (UnicodeEncodeError, RecursionError):  # lone surrogates; the reference decides
        raise _NotPlain from None


def _write_plain(value: Any, parts: list[str]) -> None:
    kind = type(value)
    if kind is str:
        parts.append(_encode_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif kind is int:
        parts.append(str(value))  # exact at any size: the one extension of RFC 8785
    elif kind is float:
        if not math.isfinite(value):
            raise _NotPlain
        parts.append(rfc8785.dumps(value).decode())
    elif kind is list or kind is tuple:
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write_plain(item, parts)
        parts.append("]")
    elif kind is dict:
        for key in value:
            if type(key) is not str:
                raise _NotPlain
        # RFC 8785 orders keys by UTF-16 code units; for ASCII keys that is code point order.
        if all(key.isascii() for key in value):
            keys = sorted(value)
        else:
            keys = sorted(value, key=lambda key: key.encode("utf-16be"))
        parts.append("{")
        for index, key in enumerate(keys):
            if index:
                parts.append(",")
            parts.append(_encode_string(key))
            parts.append(":")
            _write_plain(value[key], parts)
        parts.append("}")
    else:
        raise _NotPlain


def content_hash(value: Any, *, field: str = "") -> bytes:
    """SHA-256 (32 bytes) of the canonical JSON: Processes, Requirements, ResolvedHints keys."""
    return hashlib.sha256(canonical_json(value, field=field)).digest()


def input_hash(lfn: str | None, descriptor: dict[str, Any] | None, *, field: str = "") -> bytes:
    """XXH3-128 (16 bytes) over the canonical JSON of `[lfn, descriptor]`: Inputs.InputHash."""
    if lfn is not None and not isinstance(lfn, str):
        raise InvalidArgument(
            f"lfn must be a string or null, got {type(lfn).__name__}",
            field=f"{field}.lfn" if field else "lfn",
        )
    if descriptor is not None and not isinstance(descriptor, dict):
        raise InvalidArgument(
            f"descriptor must be an object or null, got {type(descriptor).__name__}",
            field=f"{field}.descriptor" if field else "descriptor",
        )
    return xxhash.xxh3_128_digest(canonical_json([lfn, descriptor], field=field))
