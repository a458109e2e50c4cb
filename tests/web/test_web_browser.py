"""The web view in a real browser (Debian's chromium through chromedriver, installed by
scripts/browser) against a running `dxts up`: the example production followed on its page to
Completed without a reload, a member paused with the button, another VO's user shown no page,
a bad id a clear 404, and `dxts open` giving a URL chromium shows signed in.

With DXTS_WEB_SCREENSHOTS=DIR the browser's screenshots of every page (list, workgraph, member,
a member with failures, file lineage, errors, parcel, jobs) are written to DIR (docs/images holds
those the docs show)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait
from web_support import EDGES, EXAMPLES, STEPS

from dxts.core.grpc import DevKeys

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DXTS = [sys.executable, "-c", "import sys; from dxts.cli.main import app; sys.exit(app())"]
START_TIMEOUT_S = 90
RUN_TIMEOUT_S = 300
POLL_S = 0.5


@dataclass
class Up:
    data_dir: Path
    process: subprocess.Popen[bytes]
    web: str
    sign_in_link: str

    def dxts(self, *args: str) -> str:
        done = subprocess.run(
            [*DXTS, "--data-dir", str(self.data_dir), *args],
            env={k: v for k, v in os.environ.items() if not k.startswith("DXTS_")},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


def small_example(directory: Path) -> Path:
    """mc-demo with two seeds: two simulations, one reconstruction, one merge, one
    replication — all four members work, in a minute or two."""
    document = yaml.safe_load((EXAMPLES / "mc-demo.cwl").read_text())
    document["inputs"]["events"]["dirac:Feeder"]["args"].update(
        target_events=4000, events_per_seed=2000, batch=2, max_in_flight=4000
    )
    workgraph = document["hints"]["dirac:Workgraph"]
    workgraph["target"]["files"] = 1
    workgraph["hooks"]["Active"]["args"]["target_events"] = 4000
    path = directory / "small-demo.cwl"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    # A copy, not a symlink: a bundle never follows a link out of its directory.
    shutil.copytree(EXAMPLES / "tools", directory / "tools")
    return path


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """`dxts up` as a process of its own, in a fresh data directory."""
    data_dir = tmp_path_factory.mktemp("dxts-up")
    errors = data_dir / "up.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DXTS_")}
    process = subprocess.Popen(
        [*DXTS, "up", "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors.open("wb"),
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (data_dir / "connection.json").exists():
            assert process.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, "dxts up did not come up"
            time.sleep(0.2)
        connection = json.loads((data_dir / "connection.json").read_text())
        link = re.search(r"sign in once with (\S+)", errors.read_text())
        assert link is not None, errors.read_text()
        assert connection["web"] in errors.read_text()  # printed with the others
        yield Up(data_dir, process, connection["web"], link.group(1))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


@pytest.fixture(scope="module")
def chrome() -> Iterator[WebDriver]:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "no chromium: run scripts/browser"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def workgraph(up: Up, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The small example production, submitted and started."""
    document = small_example(tmp_path_factory.mktemp("example"))
    submitted = up.dxts("submit", str(document), "--label", "origin=web-test")
    up.dxts("start", submitted)
    return submitted


def screenshot(driver: WebDriver, name: str) -> None:
    folder = os.environ.get("DXTS_WEB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"web-{name}.png"))


def redirected_to(driver: WebDriver, url: str, patience_s: float = 30.0) -> bool:
    """Whether the browser reaches `url`: a form's POST and its redirect finish after the click
    that sent them returns."""
    try:
        return bool(WebDriverWait(driver, patience_s).until(expected_conditions.url_to_be(url)))
    except TimeoutException:
        return False


def text_of(driver: WebDriver, css: str, patience_s: float = 30.0) -> str:
    """The element's text once the page shows it (after a form's redirect, the next page may
    still be loading on a busy machine)."""
    try:
        element = WebDriverWait(driver, patience_s).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
        )
        return str(element.text)
    except StaleElementReferenceException:  # replaced by the live update meanwhile
        return ""


def follow(driver: WebDriver, css: str, patience_s: float = 30.0) -> None:
    """Open the link `css` names. The steering buttons are part of the live fragment, so the
    element found may be replaced before it is read: read it again then."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            href = driver.find_element(By.CSS_SELECTOR, css).get_attribute("href")
            break
        except StaleElementReferenceException:
            assert time.monotonic() < deadline, f"{css} kept changing"
    assert href, css
    driver.get(href)


def graph_state(driver: WebDriver) -> tuple[tuple[str, ...], ...]:
    """Each drawn member's step, status and input counts, as the page shows them now."""
    return tuple(
        driver.execute_script(
            "return [...document.querySelectorAll('svg.graph a.node')].map(n => "
            "[n.dataset.step, n.dataset.status, n.dataset.processed || '0', "
            "n.dataset.assigned || '0', n.dataset.unassigned || '0'].join(' '))"
        )
    )


def test_the_example_production_is_followed_on_its_page_to_completed(
    up: Up, chrome: WebDriver, workgraph: str
) -> None:
    chrome.get(up.sign_in_link)
    assert chrome.current_url == f"{up.web}/workgraphs"
    chrome.get(f"{up.web}/workgraphs/{workgraph}")
    nodes = chrome.find_elements(By.CSS_SELECTOR, "svg.graph a.node")
    steps = [n.get_attribute("data-step") for n in nodes]
    assert len(steps) == 4 and set(steps) == STEPS
    edges = {
        (e.get_attribute("data-from"), e.get_attribute("data-to"))
        for e in chrome.find_elements(By.CSS_SELECTOR, "svg.graph path.edge")
    }
    assert edges == EDGES
    chrome.execute_script("window.notReloaded = true")
    seen = [graph_state(chrome)]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while text_of(chrome, "#workgraph-status") != "Completed":
        assert time.monotonic() < deadline, f"not Completed: {seen[-1]}"
        state = graph_state(chrome)
        if state and state != seen[-1]:
            seen.append(state)
        time.sleep(POLL_S)
    assert chrome.execute_script("return window.notReloaded") is True
    assert len(seen) >= 3, seen  # the counts moved while it ran, on the same page
    final = graph_state(chrome)
    assert all(" Completed " in member for member in final), final
    assert "It has finished" in text_of(chrome, "#reasons")
    screenshot(chrome, "workgraph")

    chrome.find_element(By.CSS_SELECTOR, 'svg.graph a.node[data-step="Simulation"]').click()
    assert text_of(chrome, "#member-status") == "Completed"
    assert "Processed 2" in text_of(chrome, "#input-counts")
    assert chrome.find_elements(By.CSS_SELECTOR, "#progress polyline.series.processed")
    assert len(chrome.find_elements(By.CSS_SELECTOR, "#parcels tr[data-parcel]")) == 2
    screenshot(chrome, "member")
    # One of the member's outputs, followed to its lineage: the parcel that made it, from its input.
    # (read in one script: the live update may replace the table between two calls)
    lfn, href = chrome.execute_script(
        "const a = document.querySelector('#parcels tr[data-parcel] a[href^=\"/files?lfn=\"]');"
        "return [a.textContent, a.getAttribute('href')];"
    )
    chrome.get(f"{up.web}{href}")
    assert text_of(chrome, "section.provenance h3").startswith(lfn)
    assert "Done" in text_of(chrome, "section.provenance")
    # Named as a person names them: the parcel by its handle, the member as WG/STEP.
    assert re.search(
        r"made by parcel p-\d+ Done of member wg-\d+/Simulation ",
        text_of(chrome, "section.provenance"),
    )
    screenshot(chrome, "files")
    chrome.get(f"{up.web}/workgraphs")
    text_of(chrome, "#workgraphs")
    assert chrome.find_elements(By.CSS_SELECTOR, f'#workgraphs tr[data-workgraph="{workgraph}"]')


def test_a_paused_member_shows_paused_after_the_pause_button(
    up: Up, chrome: WebDriver, tmp_path: Path
) -> None:
    other = up.dxts("submit", str(small_example(tmp_path)))
    member = json.loads(up.dxts("show", other, "-o", "json"))["members"][0]["transformation"]
    page = f"{up.web}/transformations/{member['transformation_id']}"
    chrome.get(page)
    if "/signin" in chrome.current_url:  # a module run on its own starts signed out
        chrome.get(up.dxts("open", member["transformation_id"], "--no-browser"))
    # A New member offers no Pause; asked anyway (a stale page), the service refuses it.
    assert not chrome.find_elements(By.ID, "steer-pause")
    chrome.get(f"{page}/steer/pause")
    chrome.find_element(By.ID, "confirm").click()
    refused = text_of(chrome, "#refused")
    assert "New" in refused  # a member of a workgraph not started cannot be paused
    chrome.get(f"{up.web}/workgraphs/{other}")
    follow(chrome, "#steer-start")
    chrome.find_element(By.ID, "confirm").click()
    assert text_of(chrome, "#workgraph-status") in ("Active", "Scouting")
    chrome.get(page)
    follow(chrome, "#steer-pause")
    chrome.find_element(By.ID, "reason").send_keys("looking at it")
    chrome.find_element(By.ID, "confirm").click()
    assert redirected_to(chrome, page), (chrome.current_url, text_of(chrome, "body")[:500])
    assert text_of(chrome, "#member-status") == "Paused"
    chrome.get(f"{up.web}/workgraphs/{other}/steer/cancel")
    chrome.find_element(By.ID, "confirm").click()


def test_another_vo_gets_no_page_and_a_bad_id_a_404(
    up: Up, chrome: WebDriver, workgraph: str
) -> None:
    stranger = DevKeys.load_or_create(up.data_dir).issue("other-vo", "mallory", ["operator"])
    chrome.delete_all_cookies()
    chrome.get(f"{up.web}/workgraphs/{workgraph}")
    assert "/signin" in chrome.current_url
    chrome.find_element(By.ID, "token").send_keys(stranger)
    chrome.find_element(By.CSS_SELECTOR, "form.signin button").click()
    assert text_of(chrome, "#not-found") == "Not found"
    assert not chrome.find_elements(By.CSS_SELECTOR, "svg.graph")
    chrome.get(f"{up.web}/workgraphs")
    assert workgraph not in chrome.page_source
    for bad in ("not-an-id", str(uuid.uuid4())):
        chrome.get(f"{up.web}/workgraphs/{bad}")
        assert text_of(chrome, "#not-found") == "Not found"
        assert text_of(chrome, ".refused")


def dump_dom(url: str) -> str:
    """The page at `url` as chromium renders it, from the command line."""
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_dxts_open_gives_a_url_chromium_shows_signed_in(up: Up, workgraph: str) -> None:
    url = up.dxts("open", workgraph, "--no-browser")
    assert url.startswith(f"{up.web}/signin/")
    dumped = dump_dom(url)
    assert workgraph in dumped
    assert set(re.findall(r'data-step="([^"]+)"', dumped)) == STEPS
    assert "used already" in dump_dom(url)  # the link is for one sign-in only


TOOL_LINE = "ERROR: seed {} cannot be simulated: calibration missing"
FAILING_SEEDS = (1, 3)


def failing_example(directory: Path) -> Path:
    """One Simulation step over four listed seeds whose tool fails on the odd ones: fifty lines
    of chatter on stderr around its own ERROR line, exit code 3. A failed input goes straight
    to Problematic (one error allowed), so the production waits for a person."""
    document = yaml.safe_load((EXAMPLES / "mc-demo.cwl").read_text())
    hints = document["hints"]["dirac:Workgraph"]
    for key in ("hooks", "data_management", "target"):
        hints.pop(key, None)
    document["inputs"]["events"]["dirac:Feeder"] = {
        "name": "List",
        "args": {"inputs": [{"descriptor": {"seed": n}} for n in range(4)]},
    }
    simulation = document["steps"]["Simulation"]
    simulation["hints"]["dirac:Transformation"]["hooks"] = {
        "HandleFailedInput": {"hook": "RetryUntilMaxErrors", "args": {"max_errors": 1}}
    }
    document["steps"] = {"Simulation": simulation}
    document["outputs"] = {
        "simulated": {
            "outputSource": "Simulation/sim-files",
            "type": {"type": "array", "items": "File"},
        }
    }
    document["label"] = "Failing simulation (web test)"
    shutil.copytree(EXAMPLES / "tools", directory / "tools")
    tool = directory / "tools" / "simulate.cwl"
    failing = (
        "        for seed in map(seed_of, args.seeds):\n"
        "            if seed % 2:\n"
        "                import sys\n"
        "                for n in range(25):\n"
        "                    print(f'INFO step {n}: reading events', file=sys.stderr)\n"
        f"                print({TOOL_LINE!r}.format(seed), file=sys.stderr)\n"
        "                for n in range(25):\n"
        "                    print(f'INFO cleanup {n}', file=sys.stderr)\n"
        "                raise SystemExit(3)\n"
    )
    text = tool.read_text()
    loop = "        for seed in map(seed_of, args.seeds):\n"
    assert text.count(loop) == 1
    tool.write_text(text.replace(loop, failing + loop, 1))
    path = directory / "failing.cwl"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def until(check: object, patience_s: float = RUN_TIMEOUT_S) -> None:
    """Wait for `check()` to be true (a busy machine runs jobs slowly)."""
    deadline = time.monotonic() + patience_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(POLL_S)


def test_a_shifter_finds_a_failing_production_reads_its_stderr_and_writes_it_off(
    up: Up, chrome: WebDriver, tmp_path: Path
) -> None:
    """The issue's walk: the failing production at the top of the list, needing attention; its
    error group in the tool's own words with the right count; the parcel page's stderr tail;
    its inputs written off from the page, the workgraph then "Completed with 2 written off";
    and, the server stopped, the page's banner stale within 10 s."""
    failing = up.dxts("submit", str(failing_example(tmp_path)), "--label", "origin=web-test")
    up.dxts("start", failing)
    job = up.dxts(
        "job",
        "submit",
        str(EXAMPLES / "simulate-job.cwl"),
        "--inputs",
        str(EXAMPLES / "simulate-job.yaml"),
    )
    chrome.get(up.dxts("open", failing, "--no-browser"))  # signed in as the operator
    chrome.get(f"{up.web}/workgraphs")

    def first_row_needs_attention() -> bool:
        chrome.refresh()
        rows = chrome.find_elements(By.CSS_SELECTOR, "#workgraphs tbody tr")
        return (
            bool(rows)
            and rows[0].get_attribute("data-workgraph") == failing
            and ("needs attention" in rows[0].text)
        )

    until(first_row_needs_attention)
    screenshot(chrome, "list")

    chrome.get(f"{up.web}/errors?wg={failing}")

    def problematic_written() -> bool:
        shown = json.loads(up.dxts("show", failing, "-o", "json"))
        return shown["members"][0]["input_counts"].get("Problematic", 0) == len(FAILING_SEEDS)

    until(problematic_written)
    chrome.refresh()
    (group,) = chrome.find_elements(By.CSS_SELECTOR, "#error-groups tr.failure-group")
    assert group.get_attribute("data-count") == str(len(FAILING_SEEDS))
    assert re.search(r"ERROR: seed \d cannot be simulated: calibration missing", group.text)
    screenshot(chrome, "errors")

    follow(chrome, "#error-groups tr.failure-group td a[href^='/parcels/']")
    stderr = text_of(chrome, "#stderr")
    assert re.search(r"ERROR: seed \d cannot be simulated", stderr), stderr[-2000:]
    assert "application-error (exit code 3)" in text_of(chrome, "#failure")
    screenshot(chrome, "parcel")

    chrome.get(f"{up.web}/errors?wg={failing}")
    follow(chrome, "a.write-off-group")
    chrome.find_element(By.ID, "reason").send_keys("calibration for odd seeds is lost")
    chrome.find_element(By.ID, "confirm").click()
    assert redirected_to(chrome, f"{up.web}/errors"), chrome.current_url

    chrome.get(f"{up.web}/workgraphs/{failing}")
    until(lambda: text_of(chrome, "#workgraph-status") == "Completed")
    until(lambda: "with 2 written off" in text_of(chrome, "#live"), 60)

    # Its member's failure rate over time: the 2 failed parcels of the 4 that ended, per span.
    member = json.loads(up.dxts("show", failing, "-o", "json"))["members"][0]["transformation"]
    chrome.get(f"{up.web}/transformations/{member['transformation_id']}")
    text_of(chrome, "#failure-rate")
    rate = chrome.find_element(By.CSS_SELECTOR, "svg#failure-rate")
    assert (rate.get_attribute("data-failed"), rate.get_attribute("data-ended")) == ("2", "4")
    assert "2 failed of 4 ended (50%)" in rate.find_element(By.XPATH, "..").text
    bars = chrome.execute_script(
        "return [...document.querySelectorAll('#failure-rate rect.bin')].map(b =>"
        " [+b.dataset.failed, +b.dataset.ended, b.getBBox().height])"
    )
    assert sum(b[0] for b in bars) == 2 and sum(b[1] for b in bars) == 4, bars
    full = max(h * e / f for f, e, h in bars if f)  # the height of a 100% bar on this axis
    for failed, ended, height in bars:  # each bar as tall as its span's rate
        assert abs(height - full * failed / ended) <= 2 or (failed == 0 and height == 1), bars
    chrome.execute_script(
        "document.getElementById('failure-rate').closest('section').scrollIntoView()"
    )
    screenshot(chrome, "member-failures")
    chrome.get(f"{up.web}/workgraphs/{failing}")  # the verbs are the page's, not its live part
    text_of(chrome, "#workgraph-status")
    assert not chrome.find_elements(By.CSS_SELECTOR, ".steer a.button")  # nothing to steer

    chrome.get(f"{up.web}/jobs")
    assert chrome.find_elements(By.CSS_SELECTOR, f'#jobs tr[data-job="{job}"]')
    screenshot(chrome, "jobs")

    chrome.get(f"{up.web}/workgraphs/{failing}")
    until(lambda: chrome.find_element(By.ID, "freshness").text.startswith("updated"), 30)
    assert chrome.find_element(By.ID, "stale").is_displayed() is False
    up.process.send_signal(signal.SIGTERM)
    up.process.wait(timeout=60)
    stopped = time.monotonic()
    until(lambda: chrome.find_element(By.ID, "stale").is_displayed(), 10)
    assert time.monotonic() - stopped <= 10
    assert "Not updating" in chrome.find_element(By.ID, "stale").text
