"""The web pages against the services (no sweeps): sign-in, what each page shows, what another
VO sees, not-found pages, and steering — confirmed, protected against cross-site requests, and
refused exactly as the service refuses."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable

import httpx
import sqlalchemy as sa
from web_support import EDGES, EXAMPLES, STEPS, Browser, Dxts

from dxts.core.db import Database, Isolation, db_now
from dxts.core.ids import id_from_str, new_ids
from dxts.core.schema import execution
from dxts.web.sessions import COOKIE


async def submitted(dxts: Dxts, *, start: bool = False) -> tuple[str, dict[str, str]]:
    """A new example workgraph of VO `demo` and its members' ids by step."""
    result = await dxts("submit", str(EXAMPLES / "mc-demo.cwl"), "--label", "campaign=web")
    assert result.exit_code == 0, result.output
    workgraph = result.stdout.strip()
    if start:
        assert (await dxts("start", workgraph)).exit_code == 0
    shown = json.loads((await dxts("show", workgraph, "-o", "json")).stdout)
    steps = {
        m["transformation"]["step"]: m["transformation"]["transformation_id"]
        for m in shown["members"]
    }
    return workgraph, steps


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no cross-site request token"
    return found.group(1)


async def test_signing_in_needs_a_token_the_services_accept(
    anonymous: Callable[[], httpx.AsyncClient], token: Callable[[str, str], str]
) -> None:
    async with anonymous() as client:
        page = await client.get("/workgraphs/anything")
        assert page.status_code == 303
        assert page.headers["location"] == "/signin?next=/workgraphs/anything"
        refused = await client.post("/signin", data={"token": "not-a-token", "next": "/"})
        assert refused.status_code == 401 and 'id="error"' in refused.text
        signed = await client.post("/signin", data={"token": token("demo", "olivia")})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        assert token("demo", "olivia") not in cookie
        listed = await client.get("/workgraphs")
        assert listed.status_code == 200 and "olivia" in listed.text


async def test_a_sign_in_link_works_once(
    anonymous: Callable[[], httpx.AsyncClient], token: Callable[[str, str], str]
) -> None:
    async with anonymous() as client:
        assert (await client.post("/api/sign-in-links")).status_code == 401
        bad = await client.post("/api/sign-in-links", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        issued = await client.post(
            "/api/sign-in-links", headers={"Authorization": f"Bearer {token('demo', 'olivia')}"}
        )
        path = issued.json()["path"]
    async with anonymous() as first, anonymous() as second:
        used = await first.get(f"{path}?next=/workgraphs")
        assert (used.status_code, used.headers["location"]) == (303, "/workgraphs")
        assert (await first.get("/workgraphs")).status_code == 200
        again = await second.get(f"{path}?next=/workgraphs")
        assert again.status_code == 401 and "used already" in again.text
        away = await second.get("/signin/x?next=https://elsewhere.example/")
        assert "elsewhere" not in away.headers.get("location", "")


async def test_the_workgraph_page_shows_its_members_edges_and_why_it_has_not_finished(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    workgraph, steps = await submitted(dxts)
    client = await browser(token("demo", "olivia"))
    page = await client.get(f"/workgraphs/{workgraph}")
    assert page.status_code == 200
    drawn = re.findall(r'data-step="([^"]+)"', page.text)
    assert sorted(drawn) == sorted(steps) and set(steps) == STEPS
    assert set(re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', page.text)) == EDGES
    assert "it has not been started" in page.text
    fragment = await client.get(f"/workgraphs/{workgraph}?fragment=1")
    assert fragment.status_code == 200 and "<html" not in fragment.text
    assert 'id="workgraph-status">New<' in fragment.text
    listed = await client.get("/workgraphs?label=campaign%3Dweb&status=New")
    assert workgraph in listed.text
    assert workgraph not in (await client.get("/workgraphs?status=Completed")).text
    member = await client.get(f"/transformations/{steps['Simulation']}")
    assert member.status_code == 200 and 'id="member-status">New<' in member.text
    unknown = await client.get("/files?lfn=/no/such/file")
    assert unknown.status_code == 404 and "/no/such/file" in unknown.text
    assert (await client.get("/files")).status_code == 200
    opened = await client.get(f"/open/{steps['Merge']}")
    assert opened.headers["location"] == f"/transformations/{steps['Merge']}"


async def test_a_member_page_groups_its_failures_as_dxts_errors_does(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    _, steps = await submitted(dxts)
    simulation = id_from_str(steps["Simulation"], field="step")
    async with database.transaction(Isolation.READ_COMMITTED) as conn:
        now = await db_now(conn)
        await conn.execute(
            sa.insert(execution.parcels),
            [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": simulation,
                    "Kind": "Compute",
                    "Status": "Failed",
                    "Backend": "null",
                    "UpdatedAt": now,
                    "CompletedAt": now,
                    "Annotations": {
                        "outcome": {
                            "result": "OUTCOME_RESULT_FAILED",
                            "message": f"the CWL runner exited with 1: INFO -c 3.3.{n}",
                            "exit_code": 3,
                            "failure": {
                                "class": "application-error",
                                "tool_message": f"ERROR: seed {n} is out of range",
                            },
                        }
                    },
                }
                for n, parcel_id in enumerate(new_ids(12))
            ]
            + [
                {
                    "ParcelID": parcel_id,
                    "TransformationID": simulation,
                    "Kind": "Compute",
                    "Status": "Done",
                    "Backend": "null",
                    "UpdatedAt": now,
                    "CompletedAt": now,
                    "Annotations": {"outcome": {"result": "OUTCOME_RESULT_SUCCEEDED"}},
                }
                for parcel_id in new_ids(4)
            ],
        )
    client = await browser(token("demo", "olivia"))
    page = await client.get(f"/transformations/{steps['Simulation']}")
    assert page.status_code == 200
    # Named by handle (its id beside), its workgraph too.
    (workgraph,) = re.findall(r"<h1>Simulation <code>(wg-\d+)/Simulation</code>", page.text)
    assert "of workgraph <a href=" in page.text and f"<code>{workgraph}</code></a>" in page.text
    rows = re.findall(r'<tr class="failure-group"[^>]*>(.*?)</tr>', page.text, re.S)
    (row,) = rows  # the errors page's table, without the members column
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[0] == "12"
    assert cells[1] == 'application-error <span class="muted">(exit code 3)</span>'
    assert cells[3].startswith("<code>ERROR: seed ")
    assert 'title="ERROR: seed # is out of range"' in row
    # Its failures over time: a sparkline whose bars count the 12.
    (label,) = re.findall(r'aria-label="failures over time: ([0-9, ]+)"', row)
    assert sum(int(n) for n in label.split(", ")) == 12
    # Its parcels over time (CountParcelsOverTime), saying what they are derived from.
    plot = re.search(r'<svg class="plot" id="parcels-over-time".*?</svg>', page.text, re.S)
    assert plot is not None
    drawn = re.findall(r'<polyline class="series ([a-z-]+)"', plot[0])
    assert drawn == ["in-flight", "done", "failed"]
    assert "created (its id's time) and not yet ended (its completion time)" in page.text
    # Its failure rate over time, from the same counts: 12 failed of the 16 that ended.
    rate = re.search(r'<svg class="plot" id="failure-rate".*?</svg>', page.text, re.S)
    assert rate is not None
    assert 'data-failed="12" data-ended="16"' in rate[0]
    assert "12 failed of 16 ended (75%)" in page.text
    bars = re.findall(
        r'<rect x="\d+" y="(\d+)" width="\d+" height="(\d+)" class="bin failed" '
        r'data-failed="(\d+)" data-ended="(\d+)"',
        rate[0],
    )
    assert sum(int(b[2]) for b in bars) == 12 and sum(int(b[3]) for b in bars) == 16
    (top_label,) = re.findall(r'class="tick">(\d+)%</text>', rate[0])[-1:]
    axis_bottom = max(int(y) + int(h) for y, h, _, _ in bars)
    (top_y,) = re.findall(rf'y="(\d+)" text-anchor="end" class="tick">{top_label}%', rate[0])
    for _, height, failed, ended in bars:  # each bar's height is its span's rate on the axis
        share = int(failed) / int(ended) / (int(top_label) / 100)
        assert abs(int(height) - share * (axis_bottom - int(top_y) + 4)) <= 2 or (
            failed == "0" and height == "1"
        )


async def test_the_list_says_when_each_workgraph_was_started_and_sorts_by_it(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    """ "started" is the workgraph's first move out of New in its log; a New one says it is not
    started, and when it was submitted (its id's time) in the cell's title."""
    new, _ = await submitted(dxts)
    started, _ = await submitted(dxts, start=True)
    client = await browser(token("demo", "olivia"))
    page = await client.get("/workgraphs?sort=started")
    assert page.status_code == 200 and '<a href="/workgraphs?sort=started" class="sorted">' in (
        page.text
    )
    rows = {
        w: re.search(rf'<tr data-workgraph="{w}".*?</tr>', page.text, re.S) for w in (new, started)
    }
    assert rows[new] is not None and rows[started] is not None
    assert rows[started].start() < rows[new].start()  # the latest started first
    assert re.search(
        r'<td class="started" title="submitted [0-9-]+ [0-9:]+ UTC">not started</td>', rows[new][0]
    )
    assert re.search(
        r'<td class="started" title="started [0-9-]+ [0-9:]+ UTC, submitted [0-9-]+ [0-9:]+ UTC">'
        r"[^<]+ ago</td>",
        rows[started][0],
    )


async def test_another_vo_gets_no_page_and_a_bad_id_a_clear_404(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    workgraph, steps = await submitted(dxts)
    stranger = await browser(token("other-vo", "mallory"))
    for path in (f"/workgraphs/{workgraph}", f"/transformations/{steps['Merge']}"):
        page = await stranger.get(path)
        assert page.status_code == 404 and 'id="not-found"' in page.text
    assert workgraph not in (await stranger.get("/workgraphs")).text
    owner = await browser(token("demo", "olivia"))
    for path in ("/workgraphs/not-an-id", f"/workgraphs/{uuid.uuid4()}", "/transformations/x"):
        page = await owner.get(path)
        assert page.status_code == 404 and 'id="not-found"' in page.text, path
    assert (await owner.get("/nowhere")).status_code == 404


async def test_steering_is_confirmed_and_refused_as_the_service_refuses(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    workgraph, steps = await submitted(dxts)
    client = await browser(token("demo", "olivia"))
    confirm = await client.get(f"/workgraphs/{workgraph}/steer/start")
    assert confirm.status_code == 200 and 'id="confirm"' in confirm.text
    csrf = csrf_of(confirm.text)

    forged = await client.post(f"/workgraphs/{workgraph}/steer/start", data={"reason": "x"})
    assert forged.status_code == 403
    elsewhere = await client.post(
        f"/workgraphs/{workgraph}/steer/start",
        data={"csrf": csrf},
        headers={"Origin": "https://elsewhere.example"},
    )
    assert elsewhere.status_code == 403
    assert 'id="workgraph-status">New<' in (await client.get(f"/workgraphs/{workgraph}")).text

    started = await client.post(
        f"/workgraphs/{workgraph}/steer/start", data={"csrf": csrf, "reason": "from the web"}
    )
    assert (started.status_code, started.headers["location"]) == (303, f"/workgraphs/{workgraph}")
    assert 'id="workgraph-status">Active<' in (await client.get(f"/workgraphs/{workgraph}")).text

    member = steps["Reconstruction"]
    paused = await client.post(f"/transformations/{member}/steer/pause", data={"csrf": csrf})
    assert paused.status_code == 303
    page = await client.get(f"/transformations/{member}")
    assert 'id="member-status">Paused<' in page.text

    cli = await dxts("pause", member)
    refused = await client.post(f"/transformations/{member}/steer/pause", data={"csrf": csrf})
    assert cli.exit_code == 1 and refused.status_code == 409
    shown = re.search(r'id="refused">Refused: ([^<]+)<', refused.text)
    assert shown is not None
    assert cli.stderr.strip() == f"error: {shown.group(1)}".replace("&#39;", "'")

    stranger = await browser(token("other-vo", "mallory"))
    stolen = await stranger.post(
        f"/workgraphs/{workgraph}/steer/cancel",
        data={"csrf": csrf_of((await stranger.get(f"/workgraphs/{workgraph}/steer/cancel")).text)},
    )
    assert stolen.status_code == 404
    assert 'id="workgraph-status">Active<' in (await client.get(f"/workgraphs/{workgraph}")).text


async def test_an_unknown_verb_is_not_found(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    workgraph, _ = await submitted(dxts)
    client = await browser(token("demo", "olivia"))
    assert (await client.get(f"/workgraphs/{workgraph}/steer/nonsense")).status_code == 404
    assert (await client.get("/actions/not-a-number/steer/reset")).status_code == 404


async def test_signing_in_and_out_from_another_site_is_refused(
    anonymous: Callable[[], httpx.AsyncClient],
    browser: Browser,
    token: Callable[[str, str], str],
) -> None:
    elsewhere = {"Origin": "https://evil.example"}
    async with anonymous() as client:
        forced = await client.post(
            "/signin", data={"token": token("demo", "mallory"), "next": "/"}, headers=elsewhere
        )
        assert forced.status_code == 403 and "set-cookie" not in forced.headers
        by_referer = await client.post(
            "/signin",
            data={"token": token("demo", "mallory")},
            headers={"Referer": "https://evil.example/page"},
        )
        assert by_referer.status_code == 403

    client = await browser(token("demo", "olivia"))
    page = await client.get("/workgraphs")
    csrf = csrf_of(page.text)
    for forged in (
        {"data": {"csrf": csrf}, "headers": elsewhere},  # the token, from another site
        {"data": {}, "headers": {}},  # this site, without the token
    ):
        refused = await client.post("/signout", **forged)  # type: ignore[arg-type]
        assert refused.status_code == 403 and "set-cookie" not in refused.headers
        assert (await client.get("/workgraphs")).status_code == 200  # still signed in
    out = await client.post("/signout", data={"csrf": csrf})
    assert out.status_code == 303
    assert (await client.get("/workgraphs")).status_code == 303


async def test_back_links_and_next_stay_on_this_site(
    dxts: Dxts,
    browser: Browser,
    anonymous: Callable[[], httpx.AsyncClient],
    token: Callable[[str, str], str],
) -> None:
    workgraph, _ = await submitted(dxts)
    client = await browser(token("demo", "olivia"))
    for away in (
        "/\\evil.example",
        "//evil.example",
        "https://evil.example/",
        "/\t/evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
    ):
        page = await client.get(f"/workgraphs/{workgraph}/steer/start", params={"back": away})
        assert page.status_code == 200
        assert "evil" not in page.text and "javascript:" not in page.text, away
        async with anonymous() as stranger:
            form = await stranger.get("/signin", params={"next": away})
            assert "evil" not in form.text and "javascript:" not in form.text, away
    fine = await client.get(
        f"/workgraphs/{workgraph}/steer/start", params={"back": "/workgraphs?status=Active"}
    )
    assert "/workgraphs?status=Active" in fine.text.replace("&amp;", "&")


async def test_every_response_carries_the_security_headers(
    anonymous: Callable[[], httpx.AsyncClient],
    browser: Browser,
    token: Callable[[str, str], str],
) -> None:
    client = await browser(token("demo", "olivia"))
    async with anonymous() as stranger:
        responses = [
            await client.get("/workgraphs"),
            await client.get("/workgraphs?fragment=1"),
            await client.get("/nowhere"),
            await client.get("/static/web.css"),
            await stranger.get("/workgraphs"),  # a redirect to sign in
            await stranger.get("/signin"),
            await stranger.get("/healthz"),
        ]
    for response in responses:
        headers = response.headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], response.url
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"
