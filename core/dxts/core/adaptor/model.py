"""What crosses the backend-adaptor contract, as plain dataclasses.

Identifiers stay in their contract text (a ParcelID's canonical UUID, an adaptor's identifier):
an adaptor is outside dxts, so what it answers is checked by the logic that reads it, not
trusted by a decoder. JSON fields stay text, sent on as stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from dxts.core.states import Kind


class ReportMode(StrEnum):
    UNSPECIFIED = "unspecified"
    PULL = "pull"  # the dispatcher polls
    PUSH = "push"  # the adaptor reports outcomes on its own (DispatcherService.ReportOutcomes)


class Limitation(StrEnum):
    """What an adaptor declares (Describe) it does not do, so that its callers and the
    conformance checks expect the declared behaviour instead."""

    NO_LOGS = "no_logs"  # it runs nothing that writes logs: GetLogs answers them empty
    FORGETS_ON_RESTART = "forgets_on_restart"  # it keeps what it accepted in memory only


class SubmitDisposition(StrEnum):
    UNSPECIFIED = "unspecified"
    ACCEPTED = "accepted"
    REFUSED = "refused"


class OutcomeResult(StrEnum):
    """What the backend says became of the work. The values are the contract's enum names, the
    one spelling everywhere: in messages, logs, and the outcome stored on a parcel."""

    UNSPECIFIED = "OUTCOME_RESULT_UNSPECIFIED"
    SUCCEEDED = "OUTCOME_RESULT_SUCCEEDED"  # ran to completion: the status report says the rest
    FAILED = "OUTCOME_RESULT_FAILED"
    CANCELLED = "OUTCOME_RESULT_CANCELLED"  # the backend confirms a cancellation


TERMINAL_RESULTS = frozenset(
    {OutcomeResult.SUCCEEDED, OutcomeResult.FAILED, OutcomeResult.CANCELLED}
)


class FailureClass(StrEnum):
    """Why a parcel failed, the same from every adaptor (docs/adaptors.md): what failures are
    grouped by (`dxts errors`) and counted by. The values are how people read and type them."""

    UNSPECIFIED = "unclassified"
    APPLICATION_ERROR = "application-error"  # the payload exited non-zero: see exit_code
    OUT_OF_MEMORY = "out-of-memory"
    TIME_EXCEEDED = "time-exceeded"  # wall-clock or CPU time limit
    KILLED = "killed"  # a signal, a cancellation or pre-emption from outside
    LOST = "lost"  # the backend no longer knows the work
    STAGE_IN = "stage-in"  # an input could not be fetched (Failure.lfn, storage_element)
    STAGE_OUT = "stage-out"  # an output could not be stored or registered
    SETUP_ERROR = "setup-error"  # the payload could not be set up or started
    REFUSED = "refused"  # the backend refused the work


@dataclass(frozen=True)
class Failure:
    """How a FAILED outcome failed: its class and the payload's own words (`tool_message`: the
    last error-looking line of its stderr, not the runner's log), for a staging failure the file
    and storage element, and the site it ran at when the backend knows it."""

    failure_class: FailureClass = FailureClass.UNSPECIFIED
    tool_message: str = ""
    lfn: str = ""
    storage_element: str = ""
    site: str = ""  # where it ran, when the backend knows


class OutcomeDisposition(StrEnum):
    """What recording did with one outcome; the values are the outcomes metrics' labels."""

    UNSPECIFIED = "unspecified"
    RECORDED = "recorded"
    ALREADY_RECORDED = "already_recorded"  # past that point already: a retry, ignored
    UNKNOWN_PARCEL = "unknown_parcel"  # no parcel it can be: logged, ignored


# Where a stored process carries the ontologies its `$schemas` names, their texts by the names
# as written: the loader puts them there, an adaptor writes them out again beside the process.
SCHEMAS_FIELD = "https://diracgrid.org/cwl#schemas"


@dataclass(frozen=True)
class ProcessDocument:
    process_id: str
    document_json: str


@dataclass(frozen=True)
class ComputePayload:
    """What every compute parcel of a Submit runs: the root process, every process it
    references (children before parents), and the resolved-hints sidecar."""

    process_id: str
    processes: tuple[ProcessDocument, ...]
    resolved_hints_id: str
    resolved_hints_json: str


@dataclass(frozen=True)
class DataPayload:
    """A data parcel's payload: everything it does is in its submission's request."""


# No payload at all (an adaptor refuses the parcels); only ever decoded, never sent.
Payload = ComputePayload | DataPayload | None


@dataclass(frozen=True)
class Submission:
    """The per-parcel part of a Submit; `parcel_id` is the idempotency key."""

    parcel_id: str
    parameters_json: str = ""
    request_json: str = ""
    requirements_json: str = ""
    output_prefix: str = ""
    input_ids: tuple[str, ...] = ()
    vo: str = ""  # whose files a data parcel may touch ("": not said)


@dataclass
class SubmitResult:
    parcel_id: str
    disposition: SubmitDisposition
    identifier: str = ""
    reason: str = ""

    @classmethod
    def accepted(cls, parcel_id: str, identifier: str) -> SubmitResult:
        return cls(parcel_id, SubmitDisposition.ACCEPTED, identifier=identifier)

    @classmethod
    def refused(cls, parcel_id: str, reason: str) -> SubmitResult:
        return cls(parcel_id, SubmitDisposition.REFUSED, reason=reason)


@dataclass(frozen=True)
class OutputFile:
    """One file of an output manifest."""

    output_name: str  # the process's CWL output id
    lfn: str
    size: int = 0
    checksum: str = ""  # "adler32:0a1b2c3d"-style, when the backend computed one
    storage_element: str = ""  # where the backend wrote it (its first replica)


@dataclass(frozen=True)
class ResourceUsage:
    """What a run used, as far as the backend measured it (None: not measured)."""

    cpu_seconds: float | None = None
    wall_seconds: float | None = None
    max_memory_bytes: int | None = None


@dataclass
class Outcome:
    """How a parcel's work ended, as its backend reports it: the one model from the adaptor
    to execution. `parcel_id` is the text the backend sent (an ack names it back, even when it
    is no id); `usage` is None when nothing was reported."""

    parcel_id: str = ""
    backend: str = ""
    identifier: str = ""
    result: OutcomeResult = OutcomeResult.UNSPECIFIED
    outputs: list[OutputFile] = field(default_factory=list)
    status_report_json: str = ""
    backend_status: str = ""
    message: str = ""
    finished_at: datetime | None = None
    usage: ResourceUsage | None = None
    exit_code: int | None = None  # the work's exit status, where the backend knows it
    # The CWL output object, every File and Directory at `lfn:<LFN>` (common.proto's Outcome).
    output_object_json: str = ""
    failure: Failure | None = None  # why a FAILED outcome failed (None: not classified)


@dataclass(frozen=True)
class OutcomeAck:
    parcel_id: str
    backend: str
    identifier: str
    disposition: OutcomeDisposition
    message: str = ""


@dataclass
class PollResult:
    outcomes: list[Outcome] = field(default_factory=list)
    unknown_identifiers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CancelledKey:
    """A key cancelled by ParcelID: its identifier if the adaptor had accepted it, else ""
    (and the adaptor now refuses the key for good)."""

    parcel_id: str
    identifier: str = ""


@dataclass
class CancelResult:
    unknown_identifiers: list[str] = field(default_factory=list)
    keys: list[CancelledKey] = field(default_factory=list)


@dataclass(frozen=True)
class Description:
    name: str
    kind: Kind | None  # None: the adaptor did not say (or said something unknown)
    report_mode: ReportMode
    capacity: int  # 0: not declared
    version: str
    counters: dict[str, int]
    limitations: frozenset[Limitation] = frozenset()


# What GetLogs returns of each stream when the caller sets no limit, and the most it returns
# whatever the caller asks (both streams together stay well inside one gRPC message).
DEFAULT_LOG_BYTES = 64 * 1024
MAX_LOG_BYTES = 1024 * 1024


def log_bytes(asked: int) -> int:
    """How much of each stream to read for a caller asking `asked` bytes (0: the default)."""
    return min(asked, MAX_LOG_BYTES) if asked > 0 else DEFAULT_LOG_BYTES


@dataclass(frozen=True)
class JobLogs:
    """The end of a job's stdout and stderr, and where its files are (a directory, a sandbox
    reference): what a person needs to see why a parcel failed."""

    stdout: str = ""
    stderr: str = ""
    sandbox: str = ""
    truncated: bool = False
