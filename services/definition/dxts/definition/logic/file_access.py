"""Whether a caller's VO may use files, decided here rather than by the client.

`dxts file` reaches storage and the catalogue itself (no service carries file contents); what
it may touch used to be decided on the client, from the VO its token names read without
verifying the token, and from the client's own idea of the namespace. Asked here, the VO is
the verified token's and the namespace the installation's (`DXTS_FILES_*` of the definition
service), so a forged token or a client's own settings lift nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from dxts.core.errors import (
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    PermissionDenied,
)
from dxts.core.identity import Identity
from dxts.core.lfn import FileNamespace, lfn_problem


def file_access(
    caller: Identity, namespace: FileNamespace, lfns: Sequence[str], *, write: bool
) -> str:
    """The caller's VO's home once every one of `lfns` is its to read (or, with `write`, to
    change); InvalidArgument naming each LFN not in its normal form, PermissionDenied naming
    the first file of another VO (or of none)."""
    if not caller.vo:
        raise FailedPrecondition("files belong to a VO, and the caller's token names none")
    problems = [(i, lfn, lfn_problem(lfn)) for i, lfn in enumerate(lfns)]
    wrong = [
        FieldViolation(f"lfns[{i}]", f"{lfn[:80]!r} is refused: {problem}")
        for i, lfn, problem in problems
        if problem is not None
    ]
    if wrong:
        raise InvalidArgument(wrong)
    refused = namespace.refusal(caller.vo, list(lfns), write=write)
    if refused is not None:
        raise PermissionDenied(refused)
    return namespace.home(caller.vo)
