"""`execution` (part 2): outcome recording, run by `dxts.bench.execution` below its marker.

* `outcome_parcels_per_s`: parcels of `inputs_per_parcel` inputs each, Assigned, finished by
  the backend with `outputs_per_parcel` files under declared outputs and a status report
  calling every input SUCCESS: the outcomes forwarded in batches of `forward_batch`
  (`record_outcomes`: Assigned → Completing, the outcome stored on each parcel), then the
  Completing sweep (`Recorder.record_completing`, `record_batch` parcels per transaction:
  report parsed and checked, outputs registered and written as ParcelOutputs, inputs
  Processed, parcels Done, journals). The catalogue is an in-memory stand-in, so the figure is
  execution's own work. Baseline: the same writes in plain SQL, `record_batch` parcels per
  transaction: each parcel's outcome written into its Annotations with its Done status (one
  UPDATE per parcel, as the annotations differ), its inputs Processed (one UPDATE per batch),
  its outputs inserted (one executemany) — no report, no checks, no journals, no second step.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from google.protobuf import json_format

from dxts.bench.harness import Bench, Operation
from dxts.bench.seeding import TRIVIAL_TOOL, insert_transformations, utc_now
from dxts.core import content_store
from dxts.core.catalogue import CataloguePage, FileCatalogue, Registered
from dxts.core.counters import journal_inputs, journal_parcels
from dxts.core.db import Database, Isolation
from dxts.core.ids import id_to_str, input_hash, new_id, new_ids
from dxts.core.schema import definition, execution
from dxts.core.states import Kind
from dxts.execution.edge.servicer_operations import record_outcome_messages
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import (
    ActiveSnapshot,
    ActiveTransformation,
    Description,
    Output,
)
from dxts.v1 import common_pb2

RC = Isolation.READ_COMMITTED
SEED_PARCELS = 500  # parcels seeded per transaction
OUTPUTS = ("out", "log", "status-report")


@dataclass(frozen=True)
class OutcomeParams:
    parcels: int
    inputs_per_parcel: int
    outputs_per_parcel: int
    forward_batch: int
    record_batch: int
    rounds: int


SCALES = {
    "tiny": OutcomeParams(200, 10, 2, 500, 500, 1),
    "small": OutcomeParams(3_000, 10, 2, 500, 500, 3),
    "full": OutcomeParams(20_000, 10, 2, 500, 500, 5),
}


class NullCatalogue(FileCatalogue):
    """Accepts every registration: the catalogue is another service, not measured here."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def register(self, files: Iterable[Any]) -> Registered:
        return Registered(len(list(files)), 0)

    async def query(self, where: Any = None, **kwargs: Any) -> CataloguePage:
        raise NotImplementedError

    async def files(self, lfns: Iterable[str]) -> dict[str, Any]:
        raise NotImplementedError

    async def replicas(self, lfns: Iterable[str]) -> dict[str, tuple[str, ...]]:
        raise NotImplementedError

    async def remove_replicas(self, replicas: Mapping[str, Iterable[str]]) -> int:
        raise NotImplementedError

    async def remove_files(self, lfns: Iterable[str]) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class _Definition:
    """The definition side as the recorder asks it: the one seeded transformation."""

    record: ActiveTransformation

    async def active(self) -> list[ActiveTransformation]:
        return [self.record]

    async def listed(self, transformation_ids: Collection[bytes]) -> list[ActiveTransformation]:
        return [self.record] if self.record.id in transformation_ids else []

    async def describe(self, transformation_id: bytes, *, token: str | None) -> Description:
        r = self.record
        return Description(r.id, r.vo, r.owner_sub, r.status)

    async def describe_many(
        self, transformation_ids: Collection[bytes], *, token: str | None
    ) -> list[Description]:
        return [await self.describe(tid, token=token) for tid in transformation_ids]


@dataclass
class Seeded:
    """One round's rows: a transformation, its Assigned parcels and what their backend says."""

    transformation: ActiveTransformation
    parcels: list[bytes]
    inputs: dict[bytes, list[bytes]]
    outcomes: list[common_pb2.Outcome]


async def _seed(database: Database, params: OutcomeParams) -> Seeded:
    """A transformation with declared outputs and `parcels` Assigned parcels of Assigned inputs,
    rows and journals as the packer and the dispatcher leave them (untimed)."""
    output_ids = dict(zip(OUTPUTS, new_ids(len(OUTPUTS)), strict=True))
    parcel_ids = new_ids(params.parcels)
    inputs = {p: new_ids(params.inputs_per_parcel) for p in parcel_ids}
    async with database.transaction(RC) as conn:
        (tid,) = await insert_transformations(conn, packer="PerInput")
        await conn.execute(
            sa.insert(definition.transformation_outputs),
            [
                {
                    "TransformationOutputID": oid,
                    "TransformationID": tid,
                    "Name": name,
                    "Intermediate": False,
                }
                for name, oid in output_ids.items()
            ],
        )
        (process_id,) = await content_store.put_processes(conn, [TRIVIAL_TOOL])
    for start in range(0, len(parcel_ids), SEED_PARCELS):
        chunk = parcel_ids[start : start + SEED_PARCELS]
        now = utc_now()
        async with database.transaction(RC) as conn:
            await conn.execute(
                sa.insert(execution.parcels),
                [
                    {
                        "ParcelID": p,
                        "TransformationID": tid,
                        "Kind": "Compute",
                        "Status": "Assigned",
                        "Backend": "null",
                        "UpdatedAt": now,
                    }
                    for p in chunk
                ],
            )
            await conn.execute(
                sa.insert(execution.compute_parcels),
                [{"ParcelID": p, "ProcessID": process_id, "Parameters": {}} for p in chunk],
            )
            await conn.execute(
                sa.insert(execution.inputs),
                [
                    {
                        "TransformationID": tid,
                        "InputID": i,
                        "InputHash": input_hash(f"/bench/in/{i.hex()}", None),
                        "LFN": f"/bench/in/{i.hex()}",
                        "LFNSize": 1_000_000,
                        "Status": "Assigned",
                        "LastParcelID": p,
                        "UpdatedAt": now,
                    }
                    for p in chunk
                    for i in inputs[p]
                ],
            )
            await conn.execute(
                sa.insert(execution.parcel_inputs),
                [
                    {"TransformationID": tid, "ParcelID": p, "InputID": i}
                    for p in chunk
                    for i in inputs[p]
                ],
            )
            created: tuple[bytes, str | None, str | None] = (tid, None, "Assigned")
            await journal_inputs(conn, {created: len(chunk) * params.inputs_per_parcel})
            await journal_parcels(conn, {created: len(chunk)})
    outcomes = [
        common_pb2.Outcome(
            parcel_id=id_to_str(p),
            backend="null",
            identifier=id_to_str(new_id()),
            result=common_pb2.OUTCOME_RESULT_SUCCEEDED,
            outputs=[
                common_pb2.OutputFile(
                    output_name=OUTPUTS[n % 2],
                    lfn=f"/bench/out/{p.hex()}/{n}.root",
                    size=2_000_000,
                    checksum="adler32:0a1b2c3d",
                    storage_element="BENCH-SE",
                )
                for n in range(params.outputs_per_parcel)
            ],
            status_report_json=json.dumps({id_to_str(i): {"action": "SUCCESS"} for i in inputs[p]}),
        )
        for p in parcel_ids
    ]
    record = ActiveTransformation(
        id=tid,
        type="Bench",
        kind=Kind.COMPUTE,
        packer="PerInput",
        outputs=tuple(Output(oid, name) for name, oid in output_ids.items()),
    )
    return Seeded(record, parcel_ids, inputs, outcomes)


def _record(database: Database, params: OutcomeParams) -> Operation:
    seeded: list[Seeded] = []

    async def setup() -> None:
        seeded[:] = [await _seed(database, params)]

    async def record() -> int:
        (round_,) = seeded
        for start in range(0, len(round_.outcomes), params.forward_batch):
            acks = await record_outcome_messages(
                database, round_.outcomes[start : start + params.forward_batch]
            )
            if any(a.disposition != common_pb2.OUTCOME_DISPOSITION_RECORDED for a in acks):
                raise RuntimeError(f"an outcome was not recorded: {acks}")
        recorder = Recorder(
            database, NullCatalogue(), ActiveSnapshot(_Definition(round_.transformation))
        )
        recorded = await recorder.record_completing(batch=params.record_batch)
        if recorded != params.parcels:
            raise RuntimeError(f"{recorded} of {params.parcels} parcels recorded")
        return recorded

    return Operation(record, setup)


def _raw(database: Database, params: OutcomeParams) -> Operation:
    seeded: list[Seeded] = []
    parcels, inputs, outputs = execution.parcels, execution.inputs, execution.parcel_outputs

    async def setup() -> None:
        seeded[:] = [await _seed(database, params)]

    async def record() -> int:
        (round_,) = seeded
        tid = round_.transformation.id
        declared = {o.name: o.output_id for o in round_.transformation.outputs}
        for start in range(0, len(round_.parcels), params.record_batch):
            chunk = round_.parcels[start : start + params.record_batch]
            outcomes = round_.outcomes[start : start + params.record_batch]
            now = utc_now()
            async with database.transaction(RC) as conn:
                await conn.execute(
                    sa.update(parcels)
                    .where(parcels.c.ParcelID == sa.bindparam("b_id"))
                    .values(
                        Status="Done",
                        Annotations=sa.bindparam("b_annotations", type_=parcels.c.Annotations.type),
                        UpdatedAt=now,
                        CompletedAt=now,
                    ),
                    [
                        {
                            "b_id": p,
                            "b_annotations": {
                                "outcome": json_format.MessageToDict(
                                    o, preserving_proto_field_name=True
                                )
                            },
                        }
                        for p, o in zip(chunk, outcomes, strict=True)
                    ],
                )
                await conn.execute(
                    sa.update(inputs)
                    .where(
                        inputs.c.TransformationID == tid,
                        inputs.c.InputID.in_([i for p in chunk for i in round_.inputs[p]]),
                    )
                    .values(Status="Processed", UpdatedAt=now)
                )
                await conn.execute(
                    sa.insert(outputs),
                    [
                        {
                            "TransformationOutputID": declared[f.output_name],
                            "OutputID": new_id(),
                            "ParcelID": p,
                            "LFN": f.lfn,
                            "LFNSize": f.size,
                        }
                        for p, o in zip(chunk, outcomes, strict=True)
                        for f in o.outputs
                    ],
                )
        return len(round_.parcels)

    return Operation(record, setup)


async def run_outcomes(bench: Bench) -> None:
    params = SCALES[bench.scale]
    await bench.compare(
        "outcome_parcels_per_s",
        unit="parcels/s",
        baseline=_raw(bench.database, params),
        subject=_record(bench.database, params),
        rounds=params.rounds,
        params={
            "parcels": params.parcels,
            "inputs_per_parcel": params.inputs_per_parcel,
            "outputs_per_parcel": params.outputs_per_parcel,
            "forward_batch": params.forward_batch,
            "record_batch": params.record_batch,
            "catalogue": "in-memory stand-in (not measured)",
        },
    )
