"""The failure taxonomy's two shared readings: the tool's own message picked out of a payload's
stderr (every adaptor reports it the same way), and a failure message normalised so that like
failures group together (`dxts errors`, the web's "Failures by reason").

A payload's stderr is its own: what the runner logs about running it is not (an adaptor that
runs cwltool keeps the tool's stderr apart from the runner's log, `dxts.backends.runner`).
"""

from __future__ import annotations

import re

# The default of "what looks like an error line" in a payload's stderr.
DEFAULT_ERROR_PATTERN = r"ERROR|FATAL|Exception"
TRACEBACK_START = "Traceback (most recent call last):"
# What a tool message may be at most (a line that long is cut, with an ellipsis).
TOOL_MESSAGE_LENGTH = 500
# What a normalised message may be at most.
NORMALISED_LENGTH = 200


def _cut(line: str, length: int) -> str:
    return line if len(line) <= length else line[: length - 1] + "…"


def _traceback_end(lines: list[str]) -> int | None:
    """The index of the last line of the last Python traceback (its `Error: message` line,
    the first unindented line after its start), or None when there is no complete one."""
    starts = [n for n, line in enumerate(lines) if line.startswith(TRACEBACK_START)]
    if not starts:
        return None
    for n in range(starts[-1] + 1, len(lines)):
        if lines[n] and not lines[n][0].isspace():
            return n
    return None


def tool_message(stderr: str, pattern: str | re.Pattern[str] | None = None) -> str:
    """The payload's own reason for failing, from its stderr: the last line matching `pattern`
    (default: containing ERROR, FATAL or Exception) or a Python traceback's last line,
    whichever comes last; else the last non-empty line; "" when the stderr is empty."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    matcher = re.compile(pattern or DEFAULT_ERROR_PATTERN)
    matched = next((n for n in range(len(lines) - 1, -1, -1) if matcher.search(lines[n])), None)
    candidates = [n for n in (matched, _traceback_end(lines)) if n is not None]
    chosen = max(candidates) if candidates else len(lines) - 1
    return _cut(lines[chosen].strip(), TOOL_MESSAGE_LENGTH)


_UUID = re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
_PATH = re.compile(r"(?:lfn:|file://)?(?<![\w.])/[^\s'\",;:()\[\]]*")
_HEX = re.compile(r"\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b")
_NUMBER = re.compile(r"\d+")


def normalise(message: str) -> str:
    """A failure message as the reason its like share: its first line, ids as `<id>`, paths and
    LFNs as `<path>`, long hex strings as `<hex>`, every number as `#`, spaces folded; so that
    one payload failing on 12 inputs, in 12 directories, gives one reason."""
    line = next((line.strip() for line in message.splitlines() if line.strip()), "")
    line = _UUID.sub("<id>", line)
    line = _PATH.sub("<path>", line)
    line = _HEX.sub("<hex>", line)
    line = _NUMBER.sub("#", line)
    return _cut(" ".join(line.split()), NORMALISED_LENGTH)
