"""What a backend or a process gets wrong, handled as docs/dispatching.md says — logged, recorded on
the parcel, nothing corrupted: status reports naming strangers or failing the schema, a declared
report missing, undeclared outputs, unknown parcels, the wrong backend, the catalogue refusing a
file — on SQLite and MariaDB."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from recording_world import (
    World,
    assert_counters_exact,
    definitions,
    feed,
    inputs_of,
    outcome,
    pack,
    parcel,
    report,
    rows_of,
    snapshot,
)

from dxts.core.catalogue import CatalogueFile
from dxts.core.catalogue.local import LocalFileCatalogue
from dxts.core.db import Database
from dxts.core.ids import id_to_str, new_id
from dxts.core.schema import execution
from dxts.execution.edge.servicer_operations import record_outcome_messages as record_outcomes
from dxts.execution.logic import status_reports
from dxts.execution.logic.completing import Recorder
from dxts.execution.logic.transformations import ActiveSnapshot
from dxts.v1 import common_pb2

UNKNOWN = common_pb2.OUTCOME_DISPOSITION_UNKNOWN_PARCEL
RECORDED = common_pb2.OUTCOME_DISPOSITION_RECORDED


async def run(
    database: Database,
    world: World,
    catalogue: LocalFileCatalogue,
    fates: Any,
    *,
    count: int = 3,
    files: tuple[str, ...] = ("out",),
) -> tuple[bytes, list[bytes]]:
    """One parcel over `count` inputs, finished with this report (a callable of the input
    ids, or a value) and one file per output name; recorded to the end."""
    inputs = await feed(database, world, count)
    (p,) = await pack(database, world, [inputs])
    content = fates(inputs) if callable(fates) else fates
    named = [(name, f"/lhcb/o/{p.hex()}/{name}") for name in files]
    await record_outcomes(database, [outcome(p, report=content, files=named)])
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()
    return p, inputs


async def test_entries_for_inputs_not_carried_are_ignored_and_the_unnamed_not_tried(
    database: Database, world: World, catalogue: LocalFileCatalogue
) -> None:
    stranger = id_to_str(new_id())

    def fates(inputs: list[bytes]) -> dict[str, Any]:
        return report(
            **{id_to_str(inputs[0]): "SUCCESS", stranger: "SUCCESS", "not-an-id": "FAILURE"}
        )

    p, inputs = await run(database, world, catalogue, fates)

    row = await parcel(database, p)
    assert row.Status == "PartiallyDone"
    (warning,) = row.Annotations["warnings"]
    assert "2 input(s) this parcel did not carry" in warning and stranger in warning
    rows = await inputs_of(database, world.transformation_id)
    assert [rows[i].Status for i in inputs] == ["Processed", "Unassigned", "Unassigned"]
    assert [rows[i].ErrorCount for i in inputs] == [0, 0, 0]
    await assert_counters_exact(database)


BAD_REPORTS = {
    "not JSON": "{'a': 1",
    "not an object": "[1, 2]",
    "an entry not an object": lambda i: {id_to_str(i[0]): "SUCCESS"},
    "an unknown action": lambda i: report(**{id_to_str(i[0]): "DONE"}),
    "an unexpected key": lambda i: {id_to_str(i[0]): {"action": "SUCCESS", "SUCCESS": []}},
    "a split without children": lambda i: report(**{id_to_str(i[0]): {"action": "SPLIT"}}),
    "children not a list": lambda i: report(
        **{id_to_str(i[0]): {"action": "SPLIT", "SUCCESS": {"lfn": "/lhcb/a"}}}
    ),
    "a child with descriptor and data": lambda i: report(
        **{
            id_to_str(i[0]): {
                "action": "SPLIT",
                "SUCCESS": [{"descriptor": {"a": 1}, "data": {"a": 1}}],
            }
        }
    ),
    "an lfn without its size": lambda i: report(
        **{id_to_str(i[0]): {"action": "SPLIT", "FAILURE": [{"lfn": "/lhcb/x"}]}}
    ),
    "two identical children": lambda i: report(
        **{
            id_to_str(i[0]): {
                "action": "SPLIT",
                "SUCCESS": [{"descriptor": {"a": 1}}],
                "FAILURE": [{"data": {"a": 1}}],
            }
        }
    ),
    "no report at all": None,
}


@pytest.mark.parametrize("bad", sorted(BAD_REPORTS))
async def test_a_report_failing_the_schema_fails_the_parcel_and_every_input(
    database: Database,
    world: World,
    catalogue: LocalFileCatalogue,
    bad: str,
) -> None:
    p, inputs = await run(database, world, catalogue, BAD_REPORTS[bad])

    row = await parcel(database, p)
    assert row.Status == "Failed"
    assert "status report" in row.Annotations["reason"]
    rows = await inputs_of(database, world.transformation_id)
    assert {(rows[i].Status, rows[i].ErrorCount) for i in inputs} == {("Failed", 1)}
    assert len(rows) == len(inputs)  # no child inserted
    assert await rows_of(database, execution.parcel_outputs) == []
    assert await catalogue.files([f"/lhcb/o/{p.hex()}/out"]) == {}
    await assert_counters_exact(database)


async def test_undeclared_outputs_are_not_recorded(
    database: Database, world: World, catalogue: LocalFileCatalogue
) -> None:
    def fates(inputs: list[bytes]) -> dict[str, Any]:
        return report(**{id_to_str(i): "SUCCESS" for i in inputs})

    p, _ = await run(database, world, catalogue, fates, files=("out", "histograms"))

    row = await parcel(database, p)
    assert row.Status == "Done"
    assert row.Annotations["warnings"] == [
        "outputs the process does not declare, not recorded: 'histograms'"
    ]
    assert [o.LFN for o in await rows_of(database, execution.parcel_outputs)] == [
        f"/lhcb/o/{p.hex()}/out"
    ]
    assert list(
        await catalogue.files([f"/lhcb/o/{p.hex()}/out", f"/lhcb/o/{p.hex()}/histograms"])
    ) == [f"/lhcb/o/{p.hex()}/out"]


async def test_outcomes_that_are_no_parcels_change_nothing(
    database: Database, world: World, caplog: pytest.LogCaptureFixture
) -> None:
    inputs = await feed(database, world, 2)
    (assigned,) = await pack(database, world, [inputs[:1]])
    (reserved,) = await pack(database, world, [inputs[1:]], status="Reserved")
    before = await snapshot(database)
    nameless = outcome(assigned)
    nameless.parcel_id = "nonsense"

    with caplog.at_level(logging.WARNING, logger="dxts.execution.logic.recording"):
        acks = await record_outcomes(
            database,
            [
                outcome(new_id()),
                nameless,
                outcome(assigned, backend="slurm"),
                outcome(reserved),
            ],
        )

    assert [a.disposition for a in acks] == [UNKNOWN] * 4
    assert "no parcel" in acks[0].message
    assert "parcel_id" in acks[1].message
    assert acks[2].message == "parcel runs on null, not on slurm"
    assert acks[3].message == "parcel is Reserved: it has not been dispatched"
    assert await snapshot(database) == before
    assert len([r for r in caplog.records if "not recorded" in r.getMessage()]) >= 3


async def test_a_file_the_catalogue_refuses_fails_only_its_parcel(
    database: Database, world: World, catalogue: LocalFileCatalogue
) -> None:
    inputs = await feed(database, world, 2)
    refused, accepted = await pack(database, world, [inputs[:1], inputs[1:]])
    taken = f"/lhcb/o/{refused.hex()}/taken"
    await catalogue.register([CatalogueFile(lfn=taken, size=999)])  # another content
    await record_outcomes(
        database,
        [
            outcome(
                p,
                report=report(**{id_to_str(i): "SUCCESS"}),
                files=[("out", f"/lhcb/o/{p.hex()}/out"), ("out", taken)] if p == refused else [],
            )
            for p, i in ((refused, inputs[0]), (accepted, inputs[1]))
        ],
    )
    await Recorder(database, catalogue, ActiveSnapshot(definitions(world))).record_completing()

    row = await parcel(database, refused)
    assert row.Status == "Failed"
    assert "catalogue refused" in row.Annotations["reason"] and taken in row.Annotations["reason"]
    assert (await parcel(database, accepted)).Status == "Done"
    assert await catalogue.files([f"/lhcb/o/{refused.hex()}/out"]) == {}  # all or nothing
    rows = await inputs_of(database, world.transformation_id)
    assert (rows[inputs[0]].Status, rows[inputs[1]].Status) == ("Failed", "Processed")
    await assert_counters_exact(database)


def test_the_report_parser_on_its_own() -> None:
    child = {"lfn": "/lhcb/x.dst", "lfn_size": 10, "data": {"Mask": "1-5"}, "descriptor": None}
    first, second, stranger = (id_to_str(bytes([n]) * 16) for n in (1, 2, 3))
    carried = {first: b"\x01" * 16, second: b"\x02" * 16}
    parsed = status_reports.parse(
        json.dumps(
            {
                first: {"action": "NOT_TRIED"},
                second: {"action": "SPLIT", "SUCCESS": [child]},
                stranger: {"action": "SUCCESS"},
                "a free comment key": {"action": "FAILURE"},
            }
        ),
        carried,
    )
    assert parsed.entries[b"\x01" * 16].action is status_reports.Action.NOT_TRIED
    (portion,) = parsed.entries[b"\x02" * 16].succeeded
    assert (portion.descriptor, parsed.entries[b"\x02" * 16].some_success) == (
        {"Mask": "1-5"},
        True,
    )
    assert parsed.strangers == (stranger, "a free comment key")
    # A stranger's entry still has to follow the schema; every problem is counted.
    with pytest.raises(status_reports.ReportRefused, match=r"and 2 more"):
        status_reports.parse(json.dumps({str(n): {} for n in range(7)}), carried)
