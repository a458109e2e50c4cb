"""RetryGridFailures: the experiment's HandleFailedInput policy."""

from __future__ import annotations

from pydantic import Field

from dxts.core.plugins import (
    Decision,
    FileInput,
    Input,
    InputRecord,
    Parcel,
    PluginArgs,
    SplitInto,
    ToProblematic,
    ToUnassigned,
    hook,
)
from dxts_example_experiment.settings import ExperimentSettings


class RetryArgs(PluginArgs):
    max_errors: int | None = Field(None, ge=1)
    retryable: list[str] = Field(
        default_factory=lambda: ["Stalled", "Pilot died", "Failed to download input"]
    )
    split_on: list[str] = Field(default_factory=lambda: ["CPU time limit exceeded"])


@hook("HandleFailedInput")
def retry_grid_failures(
    *, input: InputRecord, parcel: Parcel, args: RetryArgs, settings: ExperimentSettings
) -> Decision:
    """Retry what the grid did wrong, halve what ran out of time, set aside the rest.

    An input is halved by its event range (`first_event`..`last_event` inclusive, or `events`
    from 0); one that cannot be halved is set aside like any other unknown failure.
    """
    reason = parcel.reason or "no reason reported"
    limit = args.max_errors or settings.max_errors
    if input.error_count >= limit:
        return ToProblematic(f"failed {input.error_count} times (limit {limit}); last: {reason}")
    if any(marker in reason for marker in args.split_on):
        halves = _halves(input)
        if halves is not None:
            return SplitInto(halves)
    if any(marker in reason for marker in args.retryable):
        return ToUnassigned()
    return ToProblematic(f"not a known grid failure: {reason}")


def _halves(record: InputRecord) -> list[Input] | None:
    descriptor = dict(record.descriptor or {})
    if "first_event" in descriptor and "last_event" in descriptor:
        first, last = descriptor["first_event"], descriptor["last_event"]
    elif "events" in descriptor:
        first, last = 0, descriptor.pop("events") - 1
    else:
        return None
    if not isinstance(first, int) or not isinstance(last, int) or last <= first:
        return None
    middle = (first + last) // 2
    ranges = [(first, middle), (middle + 1, last)]
    children: list[Input] = []
    for low, high in ranges:
        child = {**descriptor, "first_event": low, "last_event": high}
        if record.lfn is None:
            children.append(Input(descriptor=child))
        else:
            children.append(
                FileInput(lfn=record.lfn, lfn_size=record.lfn_size or 0, descriptor=child)
            )
    return children
