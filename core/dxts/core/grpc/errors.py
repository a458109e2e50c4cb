"""The one mapping between dxts.core.errors and gRPC statuses, both ways.

Server side, `rich_status(error)` turns a domain error into a google.rpc.Status with details a
client can act on: BadRequest field violations for InvalidArgument, ResourceInfo for NotFound,
PreconditionFailure and the current state for FailedPrecondition, and for every domain error an
ErrorInfo (domain "dxts") whose reason names its class and whose metadata carries its fields.
Anything that is not a domain error becomes INTERNAL with an opaque reference that is also in
the server log next to the traceback, so nothing about the internals reaches the caller.

Client side, `domain_error(rpc_error)` rebuilds the domain error from such a status (same
class, same message, same fields), so a service calling another, and the CLI, handle the same
exceptions as in-process code.

The rich-status modules (google.rpc's messages, grpc_status) are imported when a status is
built or read, not with this module: every `dxts` command imports it, and a command that
succeeds never needs them (tests/cli/test_cli_startup.py holds the command to that).
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import TYPE_CHECKING

import grpc

from dxts.core import errors
from dxts.core.errors import DxtsError

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from google.rpc import error_details_pb2, status_pb2

log = logging.getLogger(__name__)

ERROR_DOMAIN = "dxts"

# Most specific first; a subclass not listed takes its nearest listed ancestor's code.
STATUS_CODES: dict[type[DxtsError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.Aborted: grpc.StatusCode.ABORTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
}
# A client sees DEADLINE_EXCEEDED as the transport's error whoever ran out of time (see
# `domain_error`), so DeadlineExceeded is reported by servers but never rebuilt.
_CODE_CLASSES = {
    code: cls for cls, code in STATUS_CODES.items() if cls is not errors.DeadlineExceeded
}


def reason_of(cls: type[BaseException]) -> str:
    """The ErrorInfo reason of a class: 'InvalidTransition' → 'INVALID_TRANSITION'."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).upper()


# The classes of dxts.core.errors by reason: the ones a client knows how to rebuild.
_REASONS = {
    reason_of(cls): cls
    for cls in vars(errors).values()
    if isinstance(cls, type) and issubclass(cls, DxtsError) and cls.__module__ == errors.__name__
}


def code_for(cls: type[BaseException]) -> grpc.StatusCode:
    """The code an error class maps to (its nearest mapped ancestor's); INTERNAL otherwise."""
    for ancestor in cls.__mro__:
        code = STATUS_CODES.get(ancestor)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def rich_status(error: BaseException, *, method: str = "") -> status_pb2.Status:
    """The google.rpc.Status an error is reported as (logging the unexpected ones)."""
    from google.rpc import error_details_pb2

    if isinstance(error, grpc.RpcError):
        # A call made while serving failed and its caller let the error through.
        converted = domain_error(error)
        if converted is not error:
            return rich_status(converted, method=method)
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return _status(
                grpc.StatusCode.DEADLINE_EXCEEDED, "a call this request depends on timed out", []
            )
    code = code_for(type(error))
    if code is grpc.StatusCode.INTERNAL or not isinstance(error, DxtsError):
        reference = str(uuid.uuid4())
        log.error("unhandled error in %s (reference %s)", method or "?", reference, exc_info=error)
        return _status(
            grpc.StatusCode.INTERNAL,
            f"internal error (reference {reference})",
            [
                error_details_pb2.ErrorInfo(
                    reason="INTERNAL", domain=ERROR_DOMAIN, metadata={"reference": reference}
                )
            ],
        )
    metadata: dict[str, str] = {}
    details: list[Message] = []
    if isinstance(error, errors.InvalidArgument):
        details.append(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(
                        field=violation.field, description=violation.description
                    )
                    for violation in error.violations
                ]
            )
        )
    elif isinstance(error, errors.NotFound):
        metadata.update(kind=error.kind, identifier=str(error.identifier))
        details.append(
            error_details_pb2.ResourceInfo(
                resource_type=error.kind, resource_name=str(error.identifier)
            )
        )
    elif isinstance(error, errors.FailedPrecondition):
        subject = ""
        if isinstance(error, errors.InvalidTransition):
            metadata.update(entity=error.entity, attempted=error.attempted)
            if error.actor:
                metadata["actor"] = error.actor
            if error.identifier is not None:
                metadata["identifier"] = str(error.identifier)
            subject = " ".join(filter(None, (error.entity, metadata.get("identifier"))))
        if error.current_state is not None:
            metadata["current_state"] = error.current_state
        details.append(
            error_details_pb2.PreconditionFailure(
                violations=[
                    error_details_pb2.PreconditionFailure.Violation(
                        type="STATE", subject=subject, description=str(error)
                    )
                ]
            )
        )
    info = error_details_pb2.ErrorInfo(
        reason=reason_of(type(error)), domain=ERROR_DOMAIN, metadata=metadata
    )
    return _status(code, str(error), [info, *details])


def _status(code: grpc.StatusCode, message: str, details: list[Message]) -> status_pb2.Status:
    from google.protobuf import any_pb2
    from google.rpc import status_pb2

    packed = []
    for detail in details:
        wrapper = any_pb2.Any()
        wrapper.Pack(detail)
        packed.append(wrapper)
    return status_pb2.Status(code=code.value[0], message=message, details=packed)


def to_grpc_status(status: status_pb2.Status) -> grpc.Status:
    """What `context.abort_with_status` takes."""
    from grpc_status import rpc_status

    return rpc_status.to_status(status)


def domain_error(error: grpc.RpcError) -> Exception:
    """The domain error a failed call's status stands for, or `error` itself when its code has
    no domain meaning (DEADLINE_EXCEEDED, CANCELLED, INTERNAL, UNIMPLEMENTED, ...).

    Use as `raise domain_error(exc) from exc`; `channel()` clients do it for you.
    """
    code = error.code()
    message = error.details() or ""
    fallback = _CODE_CLASSES.get(code)
    if fallback is None:
        return error
    info, bad_request = _details_of(error)
    ours = info if info is not None and info.domain == ERROR_DOMAIN else None
    meta = dict(ours.metadata) if ours is not None else {}
    cls = _REASONS.get(ours.reason, fallback) if ours is not None else fallback
    # Trust the reason only when it agrees with the code.
    if code_for(cls) != code:
        cls = fallback
    rebuilt = _rebuild(cls, message, meta, bad_request)
    rebuilt.args = (message,)  # exactly the server's message, whatever the class renders
    return rebuilt


def _rebuild(
    cls: type[DxtsError],
    message: str,
    meta: dict[str, str],
    bad_request: error_details_pb2.BadRequest | None,
) -> DxtsError:
    if cls is errors.InvalidArgument:
        violations = [
            errors.FieldViolation(v.field, v.description)
            for v in (bad_request.field_violations if bad_request else ())
        ]
        return errors.InvalidArgument(violations or message)
    if cls is errors.NotFound:
        return errors.NotFound(meta.get("kind", "resource"), meta.get("identifier", ""))
    if cls is errors.InvalidTransition and {"entity", "current_state", "attempted"} <= meta.keys():
        return errors.InvalidTransition(
            meta["entity"],
            meta["current_state"],
            meta["attempted"],
            actor=meta.get("actor"),
            identifier=meta.get("identifier"),
        )
    if issubclass(cls, errors.FailedPrecondition):
        return errors.FailedPrecondition(message, current_state=meta.get("current_state"))
    return cls(message)


def _details_of(
    error: grpc.RpcError,
) -> tuple[error_details_pb2.ErrorInfo | None, error_details_pb2.BadRequest | None]:
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    try:
        status = rpc_status.from_call(error)
    except ValueError:
        status = None
    info = bad_request = None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
    return info, bad_request
