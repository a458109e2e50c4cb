"""A shifter's first two clicks: the list puts trouble first and searches, filters, sorts and
pages; the errors page groups failures across productions exactly as `dxts errors` does (one
GroupFailures), with the tool's own words and links to example parcels; another VO sees none
of it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from test_web_attention import quarantine
from test_web_pages import submitted
from web_support import Browser, Dxts

from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_from_str, new_ids
from dxts.core.schema import execution
from dxts.web import workgraphs


async def failed_parcels(database: Database, transformation_id: str, count: int) -> None:
    """`count` failed parcels of the member, their tool's line naming each one's seed."""
    tid = id_from_str(transformation_id, field="member")
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels),
            [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": tid,
                    "Kind": "Compute",
                    "Status": "Failed",
                    "Backend": "null",
                    "UpdatedAt": now,
                    "CompletedAt": now,
                    "Annotations": {
                        "outcome": {
                            "result": "OUTCOME_RESULT_FAILED",
                            "message": "the CWL runner exited with 1",
                            "exit_code": 3,
                            "failure": {
                                "class": "application-error",
                                "tool_message": f"ERROR: seed {n} is out of range",
                            },
                        }
                    },
                }
                for n, parcel_id in enumerate(new_ids(count))
            ],
        )


def rows_of(page: str) -> list[str]:
    """The workgraph ids of the list's rows, in order."""
    return re.findall(r'<tr data-workgraph="([^"]+)"', page)


async def test_the_list_puts_trouble_first_and_searches_filters_and_sorts(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    troubled, steps = await submitted(dxts, start=True)
    healthy, _ = await submitted(dxts, start=True)  # the most recent activity
    await quarantine(database, steps["Simulation"], 3)
    client = await browser(token("demo", "olivia"))

    listed = (await client.get("/workgraphs")).text
    order = rows_of(listed)
    assert order.index(troubled) < order.index(healthy)
    row = listed.split(f'<tr data-workgraph="{troubled}"')[1].split("</tr>")[0]
    assert 'data-trouble="0"' in row and "needs attention" in row
    assert "3 Problematic inputs wait for a decision" in row  # its first reason, in words
    assert "3 failed" in row

    shown = json.loads((await dxts("show", troubled, "-o", "json")).stdout)
    handle = shown["workgraph"]["handle"]
    assert rows_of((await client.get("/workgraphs", params={"q": handle})).text) == [troubled]
    assert rows_of((await client.get("/workgraphs", params={"q": "olivia"})).text)
    attention = rows_of((await client.get("/workgraphs", params={"attention": "yes"})).text)
    assert troubled in attention and healthy not in attention
    calm = rows_of((await client.get("/workgraphs", params={"attention": "no"})).text)
    assert healthy in calm and troubled not in calm
    assert not rows_of((await client.get("/workgraphs", params={"vo": "other-vo"})).text)
    by_activity = rows_of((await client.get("/workgraphs", params={"sort": "activity"})).text)
    assert set(by_activity) == set(order)
    fragment = await client.get("/workgraphs", params={"q": handle, "fragment": "1"})
    assert "<html" not in fragment.text and rows_of(fragment.text) == [troubled]
    nonsense = await client.get("/workgraphs", params={"sort": "x';", "page": "-3"})
    assert nonsense.status_code == 200 and set(rows_of(nonsense.text)) == set(order)


async def test_the_errors_page_groups_failures_as_dxts_errors_does(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    workgraph, steps = await submitted(dxts, start=True)
    await failed_parcels(database, steps["Simulation"], 12)
    client = await browser(token("demo", "olivia"))

    cli = json.loads((await dxts("errors", workgraph, "--examples", "5", "-o", "json")).stdout)
    page = await client.get("/errors", params={"wg": workgraph})
    assert page.status_code == 200
    rows = re.findall(r'<tr class="failure-group" data-count="(\d+)">(.*?)</tr>', page.text, re.S)
    assert [int(count) for count, _ in rows] == [g["count"] for g in cli] == [12]
    row = rows[0][1]
    assert "application-error" in row and "(exit code 3)" in row
    assert re.search(r"<code>ERROR: seed \d+ is out of range</code>", row)
    assert f'href="/transformations/{steps["Simulation"]}"' in row
    examples = re.findall(r'href="/parcels/([^"]+)"', row)
    assert examples == cli[0]["example_parcel_ids"]
    # Named by handle, not id: the workgraph in the title and beside each member hit.
    (handle,) = re.findall(r"<h1>Errors of workgraph <a [^>]*><code>(wg-\d+)</code>", page.text)
    assert f">of {handle}</a>" in row
    # Over time: the sparkline's spans count the 12, the earliest first.
    (spans,) = re.findall(r'aria-label="failures over time: ([0-9, ]+)"', row)
    assert sum(int(n) for n in spans.split(", ")) == 12 and len(spans.split(", ")) == 24

    panel = (await client.get(f"/workgraphs/{workgraph}")).text
    shown = r'id="failures">.*data-count="12".*ERROR: seed \d+ is out of range'
    assert re.search(shown, panel, re.S)

    everywhere = (await client.get("/errors")).text
    assert "ERROR: seed" in everywhere  # across productions: every member of the VO
    recent = (await client.get("/errors", params={"since": "1h", "wg": workgraph})).text
    assert "ERROR: seed" in recent and "--since 1h" in recent

    stranger = await browser(token("other-vo", "mallory"))
    theirs = await stranger.get("/errors")
    assert theirs.status_code == 200 and "ERROR: seed" not in theirs.text
    assert (await stranger.get("/errors", params={"wg": workgraph})).status_code == 404


async def test_a_slow_failure_grouping_never_takes_the_workgraph_page_down(
    dxts: Dxts,
    browser: Browser,
    token: Callable[[str, str], str],
    database: Database,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workgraph, steps = await submitted(dxts, start=True)
    await failed_parcels(database, steps["Simulation"], 2)
    monkeypatch.setattr(workgraphs, "FAILURES_BUDGET_S", 0.0)
    client = await browser(token("demo", "olivia"))
    page = await client.get(f"/workgraphs/{workgraph}")
    assert page.status_code == 200 and 'id="workgraph-status">Active<' in page.text
    assert "Not shown: grouping its failures took longer than 0 s" in page.text
    assert f'href="/errors?wg={workgraph}"' in page.text
