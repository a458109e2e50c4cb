"""Acting where you look: a parcel's page (its failure in the tool's words, where and when it
ran, its job logs through the dispatcher or why there are none), a member's failed inputs
written off or reset from its page behind a confirmation, and only the verbs a state allows
offered. Another VO gets none of it."""

from __future__ import annotations

import re
from collections.abc import Callable

from test_web_attention import quarantine
from test_web_pages import csrf_of, submitted
from test_web_triage import failed_parcels
from web_support import EXAMPLES, Browser, Dxts

from dxts.core.db import Database


def steer_buttons(page: str) -> set[str]:
    return set(re.findall(r'id="steer-([a-z-]+)"', page))


async def test_a_parcel_page_shows_its_failure_history_and_why_no_logs(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    workgraph, steps = await submitted(dxts, start=True)
    await failed_parcels(database, steps["Simulation"], 1)
    client = await browser(token("demo", "olivia"))
    member = (await client.get(f"/transformations/{steps['Simulation']}")).text
    (parcel,) = re.findall(r'<tr data-parcel="([^"]+)">', member)
    assert f'href="/parcels/{parcel}"' in member

    page = await client.get(f"/parcels/{parcel}")
    assert page.status_code == 200
    assert 'id="parcel-status">Failed<' in page.text
    failure = re.search(r'<code class="tool">([^<]+)</code>', page.text)
    assert failure is not None
    assert re.fullmatch(
        r"application-error \(exit code 3\): ERROR: seed \d+ is out of range", failure.group(1)
    )
    assert f'href="/transformations/{steps["Simulation"]}"' in page.text
    assert f'href="/workgraphs/{workgraph}"' in page.text
    assert "<th>created</th>" in page.text and "<th>completed</th>" in page.text
    # The dispatcher has no identifier of it: the page says so in the dispatcher's words.
    missing = re.search(r'id="logs-missing">No logs: ([^<]+)<', page.text)
    assert missing is not None and "null" in missing.group(1)
    full = await client.get(f"/parcels/{parcel}/logs/stderr")
    assert full.status_code == 409 and full.text.startswith("no logs: ")
    assert (await client.get(f"/parcels/{parcel}/logs/environ")).status_code == 404

    stranger = await browser(token("other-vo", "mallory"))
    for path in (f"/parcels/{parcel}", f"/parcels/{parcel}/logs/stderr", "/parcels/p-1"):
        assert (await stranger.get(path)).status_code == 404, path
    assert (await client.get("/parcels/not-a-parcel")).status_code == 404


async def test_only_the_verbs_a_state_allows_are_offered(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    new, steps = await submitted(dxts)
    client = await browser(token("demo", "olivia"))
    assert steer_buttons((await client.get(f"/workgraphs/{new}")).text) == {"start", "cancel"}
    member = (await client.get(f"/transformations/{steps['Simulation']}")).text
    assert "pause" not in steer_buttons(member) and "resume" not in steer_buttons(member)
    assert (await dxts("start", new)).exit_code == 0
    assert steer_buttons((await client.get(f"/workgraphs/{new}")).text) == {
        "drain",
        "halt",
        "cancel",
    }
    member = (await client.get(f"/transformations/{steps['Reconstruction']}")).text
    assert {"pause", "flush"} <= steer_buttons(member) and "resume" not in steer_buttons(member)
    assert (await dxts("pause", steps["Reconstruction"])).exit_code == 0
    paused = steer_buttons((await client.get(f"/transformations/{steps['Reconstruction']}")).text)
    assert "resume" in paused and "pause" not in paused


async def test_failed_inputs_are_written_off_and_reset_from_the_member_page(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str], database: Database
) -> None:
    _, steps = await submitted(dxts, start=True)
    simulation = steps["Simulation"]
    await quarantine(database, simulation, 3)
    client = await browser(token("demo", "olivia"))
    member = (await client.get(f"/transformations/{simulation}")).text
    ticked = re.findall(r'name="input" value="([^"]+)"', member)
    assert len(ticked) == 3 and 'id="write-off-all"' in member

    one = await client.get(
        f"/transformations/{simulation}/inputs/reset", params={"input": ticked[0]}
    )
    assert one.status_code == 200 and 'id="confirm"' in one.text
    csrf = csrf_of(one.text)
    assert (
        await client.post(f"/transformations/{simulation}/inputs/reset", data={"input": ticked[0]})
    ).status_code == 403  # no token: a cross-site request
    reset = await client.post(
        f"/transformations/{simulation}/inputs/reset",
        data={"csrf": csrf, "input": ticked[0], "reason": "calibration fixed"},
    )
    assert (reset.status_code, reset.headers["location"]) == (303, f"/transformations/{simulation}")

    bad = await client.get(
        f"/transformations/{simulation}/inputs/write-off", params={"status": "Processed"}
    )
    assert bad.status_code == 400 and "not Processed" in bad.text
    assert (await client.get(f"/transformations/{simulation}/inputs/write-off")).status_code == 400

    stranger = await browser(token("other-vo", "mallory"))
    stolen = await stranger.post(
        f"/transformations/{simulation}/inputs/write-off",
        data={"csrf": csrf_of((await stranger.get("/workgraphs")).text), "status": "Problematic"},
    )
    assert stolen.status_code == 404

    confirm = await client.get(
        f"/transformations/{simulation}/inputs/write-off", params={"status": "Problematic"}
    )
    assert "every Problematic input" in confirm.text
    done = await client.post(
        f"/transformations/{simulation}/inputs/write-off",
        data={"csrf": csrf, "status": "Problematic", "reason": "bad calibration"},
    )
    assert done.status_code == 303
    after = (await client.get(f"/transformations/{simulation}")).text
    assert 'data-status="NotProcessed" data-count="2"' in after
    assert 'data-status="Unassigned"' in after and 'data-status="Problematic"' not in after
    assert 'id="write-off-all"' not in after


async def test_user_jobs_are_listed_with_their_owner_and_the_parcel_page(
    dxts: Dxts, browser: Browser, token: Callable[[str, str], str]
) -> None:
    submitted_job = await dxts(
        "job",
        "submit",
        str(EXAMPLES / "simulate-job.cwl"),
        "--inputs",
        str(EXAMPLES / "simulate-job.yaml"),
    )
    assert submitted_job.exit_code == 0, submitted_job.output
    job = submitted_job.stdout.strip()
    client = await browser(token("demo", "olivia"))
    page = await client.get("/jobs")
    assert page.status_code == 200
    row = page.text.split(f'<tr data-job="{job}">')[1].split("</tr>")[0]
    assert "olivia" in row and "Unassigned" in row and f'href="/parcels/{job}"' in row
    assert job not in (await client.get("/jobs", params={"status": "Done"})).text
    parcel = (await client.get(f"/parcels/{job}")).text
    assert "a user job of olivia (demo)" in parcel
    assert "it has not reached a backend yet (it is Unassigned)" in parcel
    stranger = await browser(token("other-vo", "mallory"))
    assert job not in (await stranger.get("/jobs")).text
    assert (await stranger.get(f"/parcels/{job}")).status_code == 404
