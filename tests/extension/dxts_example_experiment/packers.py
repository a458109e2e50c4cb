"""ByDescriptorKey: one parcel per group of inputs sharing a descriptor value (a run, a stream)."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pydantic import Field

from dxts.core.plugins import BadInput, ComputeParcel, InputRecord, PackerProposal, PluginArgs


class ByKeyArgs(PluginArgs):
    key: str = Field("run", min_length=1)
    group_size: int = Field(ge=1)


def by_descriptor_key(
    *,
    inputs: Iterator[InputRecord],
    packer_args: ByKeyArgs,
    flush: bool,
    feeder_active: bool,
) -> Iterator[PackerProposal]:
    """Full groups are packed as they fill; partial ones wait while the feeder may still add to
    them, and are packed on a flush or once the feeder is off. An input without the key cannot
    be grouped at all."""
    key = packer_args.key
    groups: dict[str, list[InputRecord]] = {}
    for record in inputs:
        descriptor = record.descriptor or {}
        if key not in descriptor:
            yield BadInput(record.id, f"its descriptor has no {key!r} to group by")
            continue
        label = json.dumps(descriptor[key], sort_keys=True)
        group = groups.setdefault(label, [])
        group.append(record)
        if len(group) == packer_args.group_size:
            yield _parcel(key, groups.pop(label))
    if flush or not feeder_active:
        for group in groups.values():
            yield _parcel(key, group)


def _parcel(key: str, group: list[InputRecord]) -> ComputeParcel:
    value = (group[0].descriptor or {})[key]
    return ComputeParcel(inputs=[record.id for record in group], metadata={key: value})
