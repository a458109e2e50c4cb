"""The web view marks what needs a person in red: a marker on the list's row, the items (what,
what to do, the command) on the workgraph's and the member's pages; nothing on a healthy one."""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from test_web_pages import submitted
from web_support import Browser, Dxts

from dxts.core.counters import journal_inputs
from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_from_str, input_hash, new_id
from dxts.core.schema import execution


async def quarantine(database: Database, transformation_id: str, count: int) -> None:
    """`count` Problematic inputs of the member, as HandleFailedInput leaves them."""
    tid = id_from_str(transformation_id)
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        now = await db_now(conn)
        rows = []
        for _ in range(count):
            input_id = new_id()
            lfn = f"/demo/{input_id.hex()}"
            rows.append(
                {
                    "TransformationID": tid,
                    "InputID": input_id,
                    "InputHash": input_hash(lfn, None),
                    "LFN": lfn,
                    "Status": "Problematic",
                    "UpdatedAt": now,
                }
            )
        await conn.execute(sa.insert(execution.inputs), rows)
        await journal_inputs(conn, {(tid, None, "Problematic"): count})


async def test_attention_is_red_on_the_list_and_the_pages(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    healthy, _ = await submitted(dxts, start=True)
    workgraph, steps = await submitted(dxts, start=True)
    await quarantine(database, steps["Simulation"], 2)
    client = await browser(token("demo", "olivia"))
    listed = (await client.get("/workgraphs?label=campaign%3Dweb")).text
    rows = {w: row for row in listed.split("<tr ")[1:] for w in (healthy, workgraph) if w in row}
    assert "needs attention" in rows[workgraph] and "st-failed attention" in rows[workgraph]
    assert "needs attention" not in rows[healthy]
    page = (await client.get(f"/workgraphs/{workgraph}")).text
    assert 'id="attention"' in page
    assert "2 Problematic inputs wait for a decision" in page
    assert f"dxts inputs {steps['Simulation']} --status Problematic" in page
    assert 'id="attention"' not in (await client.get(f"/workgraphs/{healthy}")).text
    member = (await client.get(f"/transformations/{steps['Simulation']}")).text
    assert 'data-kind="problematic-inputs"' in member
