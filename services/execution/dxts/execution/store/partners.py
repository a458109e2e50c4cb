"""SQL of the Join packer's partner lookup: for each driving input, the partner transformation's
files produced from the same sources, and where each stands (`find_partners`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from dxts.core.plugins.protocols.readers import Partner, PartnerState, ProducedFile
from dxts.core.schema.execution import inputs, parcel_inputs, parcel_outputs, parcels
from dxts.core.states import InputStatus
from dxts.execution.store.common import chunked


async def find_partners(
    conn: AsyncConnection,
    lfns: Sequence[str],
    *,
    driving_output: bytes,
    partner_output: bytes,
    partner_transformation: bytes | None,
) -> dict[str, Partner]:
    """The schema's path for a join, four indexed reads for a chunk of driving LFNs: the producing
    parcel ((TransformationOutputID, LFN)), its inputs (ParcelInputs by its transformation and
    parcel), the partner producer's inputs for those source files ((TransformationID, LFN)) and
    what their last parcels produced under the joined output ((ParcelID))."""
    answer = {
        lfn: Partner(PartnerState.NEVER, reason="not produced under the driving output")
        for lfn in lfns
    }
    produced: dict[str, bytes] = {}
    for names in chunked(list(lfns)):
        rows = await conn.execute(
            sa.select(parcel_outputs.c.LFN, parcel_outputs.c.ParcelID)
            .where(
                parcel_outputs.c.TransformationOutputID == driving_output,
                parcel_outputs.c.LFN.in_(names),
            )
            .order_by(parcel_outputs.c.OutputID)
        )
        produced.update({r.LFN: bytes(r.ParcelID) for r in rows})  # the latest wins
    sources: dict[bytes, list[str]] = defaultdict(list)
    for chunk in chunked(sorted(set(produced.values()))):
        rows = await conn.execute(
            sa.select(parcels.c.ParcelID, inputs.c.LFN)
            .select_from(
                parcels.join(
                    parcel_inputs,
                    sa.and_(
                        parcel_inputs.c.TransformationID == parcels.c.TransformationID,
                        parcel_inputs.c.ParcelID == parcels.c.ParcelID,
                    ),
                ).join(
                    inputs,
                    sa.and_(
                        inputs.c.TransformationID == parcel_inputs.c.TransformationID,
                        inputs.c.InputID == parcel_inputs.c.InputID,
                    ),
                )
            )
            .where(parcels.c.ParcelID.in_(chunk))
        )
        for r in rows:
            if r.LFN is not None:
                sources[bytes(r.ParcelID)].append(r.LFN)
    source_lfns = sorted({lfn for names in sources.values() for lfn in names})
    partner_inputs: dict[str, list[tuple[str, bytes | None]]] = defaultdict(list)
    if partner_transformation is not None:
        for names in chunked(source_lfns):
            rows = await conn.execute(
                sa.select(inputs.c.LFN, inputs.c.Status, inputs.c.LastParcelID).where(
                    inputs.c.TransformationID == partner_transformation, inputs.c.LFN.in_(names)
                )
            )
            for r in rows:
                if r.Status != InputStatus.SPLIT.value:  # its children stand for it
                    last = bytes(r.LastParcelID) if r.LastParcelID else None
                    partner_inputs[r.LFN].append((r.Status, last))
    last_parcels = sorted(
        {
            last
            for rows in partner_inputs.values()
            for status, last in rows
            if last and status == "Processed"
        }
    )
    files: dict[bytes, list[ProducedFile]] = defaultdict(list)
    for chunk in chunked(last_parcels):
        rows = await conn.execute(
            sa.select(
                parcel_outputs.c.ParcelID,
                parcel_outputs.c.OutputID,
                parcel_outputs.c.LFN,
                parcel_outputs.c.LFNSize,
            )
            .where(
                parcel_outputs.c.ParcelID.in_(chunk),
                parcel_outputs.c.TransformationOutputID == partner_output,
            )
            .order_by(parcel_outputs.c.OutputID)
        )
        for r in rows:
            files[bytes(r.ParcelID)].append(
                ProducedFile(UUID(bytes=bytes(r.OutputID)), r.LFN, r.LFNSize)
            )
    for lfn, parcel_id in produced.items():
        answer[lfn] = _partner(sources.get(parcel_id, []), partner_inputs, files)
    return answer


def _partner(
    source_lfns: list[str],
    partner_inputs: dict[str, list[tuple[str, bytes | None]]],
    files: dict[bytes, list[ProducedFile]],
) -> Partner:
    if not source_lfns:
        return Partner(PartnerState.NEVER, reason="its producing parcel carried no file input")
    found: list[ProducedFile] = []
    for source in source_lfns:
        rows = partner_inputs.get(source, [])
        statuses = {status for status, _ in rows}
        if not rows:
            return Partner(PartnerState.WAITING, reason=f"{source} not fed to the partner yet")
        if statuses == {InputStatus.NOT_PROCESSED.value}:
            return Partner(
                PartnerState.NEVER, reason=f"the partner's input {source} ended NotProcessed"
            )
        if statuses - {InputStatus.PROCESSED.value, InputStatus.NOT_PROCESSED.value}:
            return Partner(PartnerState.WAITING, reason=f"the partner's input {source} is pending")
        produced = [f for status, last in rows if last for f in files.get(last, [])]
        if not produced:
            return Partner(
                PartnerState.NEVER,
                reason=f"the partner's parcel for {source} produced nothing under the output",
            )
        found.extend(produced)
    return Partner(PartnerState.READY, files=tuple(found))
