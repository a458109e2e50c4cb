"""AccountingService over a real server, on SQLite and MariaDB: counts, summaries, storage,
logs and paging, bad requests and rights."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import grpc
import pytest
import sqlalchemy as sa
from accounting_world import DATA, INPUTS, PARCELS, Lister, World, recount

from dxts.core.db import Database
from dxts.core.errors import InvalidArgument, NotFound
from dxts.core.grpc.convert import enum_from_proto, from_timestamp
from dxts.core.ids import id_to_str, new_id
from dxts.core.states import InputStatus, ParcelStatus, TransformationStatus, values
from dxts.v1 import accounting_pb2, common_pb2

if TYPE_CHECKING:
    from dxts.v1.accounting_pb2_grpc import AccountingServiceAsyncStub as Stub

INPUT, PARCEL = common_pb2.ENTITY_INPUT, common_pb2.ENTITY_PARCEL


def as_dict(counts: Any) -> dict[str, int]:
    """StatusCount messages as {core status value: count}, in the order given."""
    found = {}
    enums: dict[str, type[StrEnum]] = {
        "input_status": InputStatus,
        "parcel_status": ParcelStatus,
        "transformation_status": TransformationStatus,
    }
    for count in counts:
        which = count.WhichOneof("status")
        found[enum_from_proto(enums[which], getattr(count, which), field=which).value] = count.count
    return found


def every_status(states: tuple[str, ...], nonzero: dict[str, int]) -> dict[str, int]:
    return {status: nonzero.get(status, 0) for status in states}


def fields(error: InvalidArgument) -> list[str]:
    return [violation.field for violation in error.violations]


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """Every SQL statement the server's engine sends while the block runs."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    engine = database.engine.sync_engine
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


# -- counts -------------------------------------------------------------------------------------


async def test_counts_of_many_transformations_in_one_read(
    stub: Stub, world: World, database: Database
) -> None:
    unknown = new_id()
    asked = [world.ids["simulate"], unknown, world.ids["reconstruct"], world.ids["simulate"]]
    with statements(database) as seen:
        reply = await stub.GetCounts(
            accounting_pb2.GetCountsRequest(
                transformation_ids=[id_to_str(t) for t in asked], entity=INPUT
            )
        )
    assert len([s for s in seen if "CounterJournal" in s]) == 1
    assert [c.transformation_id for c in reply.counts] == [id_to_str(t) for t in asked]
    expected = {
        world.ids["simulate"]: INPUTS["simulate"],
        unknown: {},
        world.ids["reconstruct"]: INPUTS["reconstruct"],
    }
    for tid, counts in zip(asked, reply.counts, strict=True):
        assert counts.entity == INPUT
        assert as_dict(counts.counts) == every_status(values(InputStatus), expected[tid])
        assert counts.total == sum(expected[tid].values())
        assert as_dict(counts.counts) == every_status(
            values(InputStatus), await recount(database, tid, "Input")
        )


async def test_parcel_counts(stub: Stub, world: World, database: Database) -> None:
    reply = await stub.GetCounts(
        accounting_pb2.GetCountsRequest(
            transformation_ids=[id_to_str(t) for t in world.ids.values()], entity=PARCEL
        )
    )
    for (step, tid), counts in zip(world.ids.items(), reply.counts, strict=True):
        assert as_dict(counts.counts) == every_status(values(ParcelStatus), PARCELS[step])
        assert as_dict(counts.counts) == every_status(
            values(ParcelStatus), await recount(database, tid, "Parcel")
        )


async def test_no_transformations_no_counts(stub: Stub) -> None:
    reply = await stub.GetCounts(accounting_pb2.GetCountsRequest(entity=PARCEL))
    assert list(reply.counts) == []


# -- workgraph summary --------------------------------------------------------------------------


async def test_workgraph_summary(
    stub: Stub, world: World, lister: Lister, operator_token: str
) -> None:
    reply = await stub.GetWorkgraphSummary(
        accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=id_to_str(world.workgraph_id))
    )
    assert lister.tokens[-1] == operator_token  # the caller's token reaches the lister
    assert reply.workgraph_id == id_to_str(world.workgraph_id)
    assert reply.status == common_pb2.WORKGRAPH_STATUS_ACTIVE
    assert [(m.transformation_id, m.step) for m in reply.members] == [
        (id_to_str(tid), step) for step, tid in world.ids.items()
    ]
    for member in reply.members:
        assert member.kind == (
            common_pb2.KIND_DATA if member.step == "replicate" else common_pb2.KIND_COMPUTE
        )
        assert as_dict(member.input_counts) == every_status(
            values(InputStatus), INPUTS[member.step]
        )
        assert as_dict(member.parcel_counts) == every_status(
            values(ParcelStatus), PARCELS[member.step]
        )
    assert as_dict(reply.member_counts) == every_status(
        values(TransformationStatus), {"Active": 2, "Paused": 1}
    )
    for totals, table, states in (
        (reply.input_totals, INPUTS, values(InputStatus)),
        (reply.parcel_totals, PARCELS, values(ParcelStatus)),
    ):
        summed: dict[str, int] = {}
        for counts in table.values():
            for status, n in counts.items():
                summed[status] = summed.get(status, 0) + n
        assert as_dict(totals) == every_status(states, summed)


async def test_unknown_workgraph_is_not_found(stub: Stub) -> None:
    with pytest.raises(NotFound):
        await stub.GetWorkgraphSummary(
            accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=id_to_str(new_id()))
        )


async def test_workgraph_id_is_required_and_canonical(stub: Stub) -> None:
    for text in ("", "0190F1C2-7A4B-7C3D-8E9F-0123456789AB", "workgraph-1"):
        with pytest.raises(InvalidArgument) as caught:
            await stub.GetWorkgraphSummary(
                accounting_pb2.GetWorkgraphSummaryRequest(workgraph_id=text)
            )
        assert fields(caught.value) == ["workgraph_id"]


# -- storage ------------------------------------------------------------------------------------


def usage_rows(usages: Any) -> dict[tuple[str, str, str], tuple[int, int, int, int]]:
    return {
        (
            u.transformation_id,
            u.storage_element,
            enum_from_proto(ParcelStatus, u.status, field="status").value,
        ): (u.lfn_count_added, u.lfn_size_added, u.lfn_count_freed, u.lfn_size_freed)
        for u in usages
    }


def outlook_rows(outlooks: Any) -> dict[tuple[str, str], tuple[int, ...]]:
    return {
        (o.transformation_id, o.storage_element): (
            o.lfn_count_to_write,
            o.lfn_size_to_write,
            o.lfn_count_to_free,
            o.lfn_size_to_free,
            o.lfn_count_net,
            o.lfn_size_net,
        )
        for o in outlooks
    }


async def test_storage_summary_of_every_transformation(stub: Stub, world: World) -> None:
    replicate = id_to_str(world.ids["replicate"])
    reply = await stub.GetStorageSummary(accounting_pb2.GetStorageSummaryRequest())
    expected = {
        (status, se): tuple(delta) for status, by_se in DATA.items() for se, delta in by_se.items()
    }
    assert usage_rows(reply.usage) == {
        (replicate, se, status): quantities for (status, se), quantities in expected.items()
    }
    assert usage_rows(reply.totals) == {
        ("", se, status): quantities for (status, se), quantities in expected.items()
    }
    # Not yet ended: the Unassigned and Assigned parcels (the Done one is history).
    assert outlook_rows(reply.outlook) == {
        (replicate, "SE-A"): (3, 300, 0, 0, 3, 300),
        (replicate, "SE-B"): (0, 0, 1, 50, -1, -50),
    }
    assert outlook_rows(reply.outlook_totals) == {
        ("", "SE-A"): (3, 300, 0, 0, 3, 300),
        ("", "SE-B"): (0, 0, 1, 50, -1, -50),
    }


async def test_storage_summary_narrowed(stub: Stub, world: World) -> None:
    replicate = id_to_str(world.ids["replicate"])
    reply = await stub.GetStorageSummary(
        accounting_pb2.GetStorageSummaryRequest(
            transformation_ids=[replicate], storage_elements=["SE-B", "SE-C"]
        )
    )
    assert usage_rows(reply.usage) == {
        (replicate, "SE-B", "Unassigned"): (0, 0, 1, 50),
        (replicate, "SE-C", "Done"): (0, 0, 2, 20),
    }
    assert outlook_rows(reply.outlook_totals) == {("", "SE-B"): (0, 0, 1, 50, -1, -50)}
    other = await stub.GetStorageSummary(
        accounting_pb2.GetStorageSummaryRequest(
            transformation_ids=[id_to_str(world.ids["simulate"])]
        )
    )
    assert list(other.usage) == list(other.totals) == list(other.outlook) == []


async def test_storage_summary_bad_requests(stub: Stub) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await stub.GetStorageSummary(
            accounting_pb2.GetStorageSummaryRequest(
                transformation_ids=["nope"], storage_elements=["SE-A", "", "x" * 65]
            )
        )
    assert sorted(fields(caught.value)) == [
        "storage_elements[1]",
        "storage_elements[2]",
        "transformation_ids[0]",
    ]


# -- logs ---------------------------------------------------------------------------------------


async def all_pages(stub: Stub, request: accounting_pb2.ListLogRequest) -> list[list[Any]]:
    pages = []
    while True:
        reply = await stub.ListLog(request)
        pages.append(list(reply.entries))
        if not reply.next_page_token:
            return pages
        request.paging.page_token = reply.next_page_token


async def test_transformation_log_pages_oldest_first(stub: Stub, world: World) -> None:
    simulate = id_to_str(world.ids["simulate"])
    pages = await all_pages(
        stub,
        accounting_pb2.ListLogRequest(
            transformation_id=simulate, paging=common_pb2.Paging(page_size=10)
        ),
    )
    assert [len(page) for page in pages] == [10, 10, 5]
    entries = [entry for page in pages for entry in page]
    assert [json.loads(e.data_json)["n"] for e in entries] == list(range(25))
    assert len({e.log_id for e in entries}) == 25
    first = entries[0]
    assert (first.transformation_id, first.event_type, first.author, first.message) == (
        simulate,
        "Comment",
        "bob",
        "note 0",
    )
    assert first.WhichOneof("owner") == "transformation_id"
    assert first.WhichOneof("old_status") is None and first.WhichOneof("new_status") is None


async def test_transformation_log_newest_first_and_since(stub: Stub, world: World) -> None:
    simulate = id_to_str(world.ids["simulate"])
    pages = await all_pages(
        stub,
        accounting_pb2.ListLogRequest(
            transformation_id=simulate, newest_first=True, paging=common_pb2.Paging(page_size=7)
        ),
    )
    assert [len(page) for page in pages] == [7, 7, 7, 4]
    entries = [entry for page in pages for entry in page]
    assert [json.loads(e.data_json)["n"] for e in entries] == list(range(24, -1, -1))

    request = accounting_pb2.ListLogRequest(transformation_id=simulate)
    request.since.FromDatetime(world.log_times[1])
    recent = (await stub.ListLog(request)).entries
    assert [json.loads(e.data_json)["n"] for e in recent] == [20, 21, 22, 23, 24]
    assert all(
        from_timestamp(e.created_at).replace(tzinfo=None) >= world.log_times[1] for e in recent
    )


async def test_workgraph_log_carries_its_states(stub: Stub, world: World) -> None:
    reply = await stub.ListLog(
        accounting_pb2.ListLogRequest(workgraph_id=id_to_str(world.workgraph_id))
    )
    assert reply.next_page_token == ""
    created, started = reply.entries
    assert created.workgraph_id == id_to_str(world.workgraph_id)
    assert created.WhichOneof("old_status") is None
    assert created.new_workgraph_status == common_pb2.WORKGRAPH_STATUS_NEW
    assert started.old_workgraph_status == common_pb2.WORKGRAPH_STATUS_NEW
    assert started.new_workgraph_status == common_pb2.WORKGRAPH_STATUS_ACTIVE


async def test_a_log_nothing_was_logged_for_is_empty(stub: Stub) -> None:
    reply = await stub.ListLog(accounting_pb2.ListLogRequest(transformation_id=id_to_str(new_id())))
    assert list(reply.entries) == [] and reply.next_page_token == ""


async def test_page_tokens_are_bound_to_their_filters(stub: Stub, world: World) -> None:
    simulate = id_to_str(world.ids["simulate"])
    first = await stub.ListLog(
        accounting_pb2.ListLogRequest(
            transformation_id=simulate, paging=common_pb2.Paging(page_size=5)
        )
    )
    assert first.next_page_token
    for request in (
        accounting_pb2.ListLogRequest(
            transformation_id=simulate,
            newest_first=True,
            paging=common_pb2.Paging(page_token=first.next_page_token),
        ),
        accounting_pb2.ListLogRequest(
            transformation_id=simulate, paging=common_pb2.Paging(page_token="garbage!")
        ),
    ):
        with pytest.raises(InvalidArgument) as caught:
            await stub.ListLog(request)
        assert fields(caught.value) == ["paging.page_token"]


async def test_list_log_bad_requests(stub: Stub) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await stub.ListLog(accounting_pb2.ListLogRequest(paging=common_pb2.Paging(page_size=-1)))
    assert sorted(fields(caught.value)) == ["owner", "paging.page_size"]
    with pytest.raises(InvalidArgument) as caught:
        await stub.ListLog(accounting_pb2.ListLogRequest(transformation_id="42"))
    assert fields(caught.value) == ["transformation_id"]


# -- bad requests and rights --------------------------------------------------------------------


async def test_malformed_ids_are_named_by_their_path(stub: Stub) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await stub.GetCounts(
            accounting_pb2.GetCountsRequest(
                transformation_ids=[
                    "not-a-uuid",
                    id_to_str(new_id()),
                    "0190F1C2-7A4B-7C3D-8E9F-0123456789AB",
                ],
            )
        )
    assert sorted(fields(caught.value)) == [
        "entity",
        "transformation_ids[0]",
        "transformation_ids[2]",
    ]


async def test_too_many_transformations(stub: Stub) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await stub.GetCounts(
            accounting_pb2.GetCountsRequest(
                transformation_ids=[id_to_str(new_id()) for _ in range(1001)], entity=INPUT
            )
        )
    assert fields(caught.value) == ["transformation_ids"]


async def test_missing_token_is_unauthenticated(anonymous_stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await anonymous_stub.GetCounts(accounting_pb2.GetCountsRequest(entity=INPUT))
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
