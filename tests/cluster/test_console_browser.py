"""The web console in a real headless browser (Debian's chromium and chromium-driver, driven by selenium)
against a launcher-started cluster: real ZooKeeper, three broker processes, the console as its own process.

What an operator does: signs in (a stranger sees only the login form), creates a topic, finds a produced
record by offset, by key (a scan with a progress bar) and by time, sees a group's lag and resets it by time
(dry run first), sets a backlog alarm that turns the group red, traces a record to the groups that consumed
it, gets clear messages for bad input, and, after a broker is killed, sees it down and an under-replicated
partition while every page keeps working. One cluster, one console and one browser for the whole module.

Screenshots of each page go to docs/console/ (linked from docs/console.md); SOFAKAFKA_CONSOLE_SCREENSHOTS
names another directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition

from sofakafka.cli import cluster as cl
from sofakafka.console.auth import hash_password
from sofakafka.console.query import KEY_SCAN_LIMIT
from tests.cluster.test_failover import WAIT_S, ZK_TICK_MS, Cluster, _free_ports, wait_for
from tests.integration.conftest import free_port

selenium = pytest.importorskip("selenium")
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("SOFAKAFKA_CONSOLE_SCREENSHOTS", REPO / "docs" / "console"))
USER, PASSWORD = "operator", "correct horse battery staple"
HOUR_MS = 3_600_000
METRICS_TOKEN = "scrape-token"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("console-cluster")
    base, zk = _free_ports()
    state = cl.up(cl.ClusterSpec(3, directory, base, zk, racks=("rack-a", "rack-b", "rack-c"), overrides={
        "zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "6000",
        "auto.leader.rebalance.enable": "false", "offsets.topic.num.partitions": "3",
        # The brokers keep the produce audit, from which the trace names the producing client.
        "sofakafka.produce.audit.enable": "true",
    }, zk_tick_ms=ZK_TICK_MS))
    try:
        yield Cluster(state)
    finally:
        cl.stop_processes(cl.ClusterState.load(directory).processes, deadline_s=15)


@pytest.fixture(scope="module")
def console(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("console")
    users = home / "users"
    users.write_text(f"# console users\n{USER}:{hash_password(PASSWORD)}\n")
    port = free_port()
    log = open(home / "console.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sofakafka", "console", "--bootstrap-server", cluster.all_bootstrap,
         "--port", str(port), "--users-file", str(users), "--state-dir", str(home / "state"),
         "--alarm-interval", "1", "--request-timeout-ms", "4000", "--metrics-token", METRICS_TOKEN],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        def up() -> bool:
            with contextlib.suppress(OSError), urllib.request.urlopen(base + "/health", timeout=2) as r:
                return r.status == 200
            return False

        wait_for("the console to answer /health", up, 30)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()
        text = (home / "console.log").read_text(errors="replace")
        assert "Traceback" not in text, f"the console logged a traceback:\n{text[-4000:]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("chromium and chromium-driver missing: apt-get install chromium chromium-driver "
                    "(scripts/test.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="sofakafka-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


class Page:
    """The browser on the console: open a path, read the page, fill forms, take screenshots."""

    def __init__(self, driver: webdriver.Chrome, base: str) -> None:
        self.d = driver
        self.base = base

    def open(self, path: str) -> None:
        self.d.get(self.base + path)
        self.check_no_traceback()

    def check_no_traceback(self) -> None:
        source = self.d.page_source
        assert "Traceback" not in source and 'File "' not in source, source[:3000]

    def text(self, css: str = "body") -> str:
        return str(self.d.find_element(By.CSS_SELECTOR, css).text)

    def fill(self, css: str, value: str) -> None:
        element = self.d.find_element(By.CSS_SELECTOR, css)
        element.clear()
        element.send_keys(value)

    def click(self, target: str | WebElement) -> None:
        """Click an element (a CSS selector or one already found); a click that submits a form or follows a
        link returns before the browser has left the page, so wait (bounded by WAIT_S) until the page it was
        on is gone before anything looks at the answer: the old page may still show an earlier answer."""
        element = self.d.find_element(By.CSS_SELECTOR, target) if isinstance(target, str) else target
        navigates = element.get_attribute("type") == "submit" or (
            element.tag_name == "a" and bool(element.get_attribute("href")))
        before = self.d.find_element(By.TAG_NAME, "html")
        element.click()
        if navigates:
            WebDriverWait(self.d, WAIT_S).until(expected_conditions.staleness_of(before))
        self.check_no_traceback()

    def rows(self, css: str) -> list[list[str]]:
        """The table's cells as shown (one script call: a WebDriver round trip per cell costs minutes)."""
        rows = self.d.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr')).map("
            "tr => Array.from(tr.querySelectorAll(':scope > td')).map(td => td.innerText.trim()))", css)
        return [[str(c) for c in r] for r in rows]

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        height = self.d.execute_script("return document.body.scrollHeight")
        self.d.set_window_size(1280, max(700, min(int(height) + 40, 2400)))
        self.d.save_screenshot(str(SHOTS / f"{name}.png"))
        self.d.set_window_size(1280, 1000)

    def _first_text(self, css: str) -> str | None:
        """The text of the first element the page shows for css, once it shows one (bounded by WAIT_S): a
        click that submits a form returns before the browser has loaded the answer, so looking at once can
        see nothing yet, or an element of the page being left that is gone by the time its text is read."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                found = self.d.find_elements(By.CSS_SELECTOR, css)
                if found:
                    return str(found[0].text)
            except StaleElementReferenceException:
                pass
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def error(self) -> str:
        text = self._first_text(".error")
        assert text is not None, f"no error message on {self.d.current_url}:\n{self.text()}"
        return text

    def flash(self) -> str:
        text = self._first_text(".flash")
        assert text is not None, f"no confirmation on {self.d.current_url}:\n{self.text()}"
        return text


@pytest.fixture(scope="module")
def page(browser: webdriver.Chrome, console: str) -> Page:
    return Page(browser, console)


@pytest.fixture(scope="module")
def topic() -> str:
    return f"orders-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def produced(cluster: Cluster, topic: str, page: Page) -> dict[str, object]:
    """Creates the topic through the console (signed in), then produces through librdkafka: 300 old records
    (an hour ago) and 300 recent ones; keys customer-0..99, JSON values, a header; one binary record."""
    _sign_in(page)
    page.open("/topics")
    page.fill("#new-topic-name", topic)
    page.fill("#new-topic-partitions", "3")
    page.fill("#new-topic-rf", "3")
    page.fill("textarea[name=configs]", "min.insync.replicas=2")
    page.shot("topics-create")
    page.click("#create-topic-button")
    assert f"Created topic {topic}." in page.flash()
    old_ms = int(time.time() * 1000) - HOUR_MS
    producer = Producer({"bootstrap.servers": cluster.all_bootstrap, "acks": "all", "linger.ms": 5,
                         "client.id": "checkout-service", "enable.idempotence": True})
    delivered: dict[tuple[int, int], bytes] = {}

    def report(err: object, msg: object) -> None:
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = msg.key()  # type: ignore[attr-defined]

    for i in range(300):
        producer.produce(topic, key=f"customer-{i % 100}".encode(), value=json.dumps({"order": i, "old": True}),
                         headers=[("source", b"web")], timestamp=old_ms + i, on_delivery=report)
    producer.flush(30)
    recent_ms = int(time.time() * 1000)
    for i in range(300, 600):
        producer.produce(topic, key=f"customer-{i % 100}".encode(), value=json.dumps({"order": i, "old": False}),
                         headers=[("source", b"web")], on_delivery=report)
    producer.produce(topic, key=b"binary-key", value=bytes(range(48)), partition=0, on_delivery=report)
    assert producer.flush(30) == 0
    return {"old_ms": old_ms, "recent_ms": recent_ms, "delivered": delivered}


def _sign_in(page: Page) -> None:
    page.open("/login")
    if "Sign in" not in page.text("h1"):
        return
    page.fill("#user", USER)
    page.fill("#password", PASSWORD)
    page.click("#sign-in")


def test_a_stranger_sees_only_the_login_form(browser: webdriver.Chrome, console: str, cluster: Cluster) -> None:
    stranger = Page(browser, console)
    browser.delete_all_cookies()
    stranger.open("/brokers")
    assert "/login" in browser.current_url
    assert "Sign in to the console" in stranger.text()
    for broker in cluster.state.brokers.values():
        assert str(broker.external_port) not in browser.page_source
    stranger.shot("login")
    stranger.fill("#user", USER)
    stranger.fill("#password", "wrong")
    stranger.click("#sign-in")
    assert "Wrong user name or password." in stranger.text(".error")
    assert "/login" in browser.current_url
    stranger.open("/topics")
    assert "/login" in browser.current_url
    stranger.fill("#user", USER)
    stranger.fill("#password", PASSWORD)
    stranger.click("#sign-in")
    assert browser.current_url.endswith("/topics"), "signing in goes back to the page asked for"


def _under_replicated(cluster: Cluster) -> list[str]:
    """Partitions whose ISR lacks a replica, as a live broker's metadata tells."""
    with cluster.client() as c:
        topics = c.metadata(None).topics
    return [f"{t}-{p}" for t, info in topics.items() for p, i in info.partitions.items() if len(i.isr) < len(i.replicas)]


def test_brokers_page_shows_every_broker_with_rack_and_disk_use(page: Page, cluster: Cluster,
                                                               produced: dict[str, object]) -> None:
    # The count is only 0 once every follower has caught up: on a loaded machine one can still be outside the
    # ISR (replica.lag.time.max.ms is 6 s here) just after the records went in.
    wait_for("every partition fully in sync", lambda: not _under_replicated(cluster))
    page.open("/brokers")
    rows = page.rows("#brokers")
    assert [r[0] for r in rows] == ["1", "2", "3"]
    assert [r[2] for r in rows] == ["rack-a", "rack-b", "rack-c"]
    assert all(r[3] == "up" for r in rows), rows
    assert sum(1 for r in rows if r[4] == "yes") == 1, "exactly one controller"
    assert all(r[7].endswith(("B", "KiB", "MiB")) for r in rows), rows
    assert "0 under-replicated" in page.text("#under-replicated-count")
    page.shot("brokers")


def test_topic_page_shows_partitions_replicas_isr_and_configs(page: Page, topic: str,
                                                               produced: dict[str, object]) -> None:
    page.open(f"/topics/{topic}")
    rows = page.rows("#partitions")
    assert len(rows) == 3
    delivered = produced["delivered"]
    assert isinstance(delivered, dict)
    for r in rows:
        partition = int(r[0])
        assert sorted(r[2].split(", ")) == ["1", "2", "3"] and sorted(r[3].split(", ")) == ["1", "2", "3"]
        assert int(r[5].replace(",", "")) == sum(1 for p, _ in delivered if p == partition)
    configs = {r[0]: r for r in page.rows("#configs")}
    assert configs["min.insync.replicas"][1] == "2" and configs["min.insync.replicas"][2] == "DYNAMIC_TOPIC_CONFIG"
    page.fill("#alter-config input[name=key]", "retention.ms")
    page.fill("#alter-config input[name=value]", "7200000")
    page.click("#alter-config button")
    assert "Set retention.ms=7200000" in page.flash()
    assert {r[0]: r[1] for r in page.rows("#configs")}["retention.ms"] == "7200000"
    page.shot("topic")


def test_find_a_record_by_offset(page: Page, topic: str, produced: dict[str, object]) -> None:
    page.open("/query?mode=offset")
    page.fill("#q-topic", topic)
    page.fill("#q-partition", "0")
    page.fill("#q-offset", "0")
    page.fill("#q-count", "5")
    page.click("#q-run")
    rows = page.rows("#records")
    assert [r[1] for r in rows] == ["0", "1", "2", "3", "4"]
    assert rows[0][3].startswith("customer-") and '"order"' in rows[0][4] and "source" in rows[0][5]
    page.shot("query-by-offset")
    delivered = produced["delivered"]
    assert isinstance(delivered, dict)
    binary_offset = next(o for (p, o), k in delivered.items() if p == 0 and k == b"binary-key")
    page.open(f"/query?mode=offset&topic={topic}&partition=0&offset={binary_offset}&count=1")
    value = page.text("#records tbody td.value")
    assert "00000000  00 01 02 03" in value, "a binary value is shown as hex"


def test_find_a_record_by_key_with_a_bounded_scan_and_progress(page: Page, topic: str,
                                                                produced: dict[str, object]) -> None:
    page.open("/query?mode=key")
    page.fill("#q-topic", topic)
    page.fill("#q-key", "customer-42")
    page.click("#q-run")
    assert page.d.find_elements(By.CSS_SELECTOR, "#scan-progress"), "a progress bar while it scans"
    wait_for("the key scan to finish", lambda: _scan_done(page), WAIT_S)
    rows = page.rows("#records")
    assert len(rows) == 6, rows  # orders 42, 142, ..., 542
    assert all(r[3] == "customer-42" for r in rows)
    assert int(page.d.find_element(By.ID, "scan-progress").get_attribute("value") or 0) == 100
    assert "scanned all 601 records" in page.text("#scan-outcome")
    page.shot("query-by-key")
    page.open("/query?mode=key")
    page.fill("#q-topic", topic)
    page.fill("#q-key", "customer-7")
    page.fill("#q-max", "50")
    page.click("#q-run")
    wait_for("the bounded scan to stop", lambda: _scan_done(page), WAIT_S)
    assert "stopped at the bound of 50 records" in page.text("#scan-outcome")


def _scan_done(page: Page) -> bool:
    page.d.refresh()
    return page.d.find_element(By.ID, "scan").get_attribute("data-done") == "true"


def test_find_records_by_time(page: Page, topic: str, produced: dict[str, object]) -> None:
    recent = produced["recent_ms"]
    assert isinstance(recent, int)
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((recent - 60_000) / 1000))
    page.open("/query?mode=time")
    page.fill("#q-topic", topic)
    page.fill("#q-from", since)
    page.fill("#q-count", "500")
    page.click("#q-run")
    rows = page.rows("#records")
    orders = [json.loads(r[4])["order"] for r in rows if r[3].startswith("customer-")]
    assert sorted(orders) == list(range(300, 600)), "exactly the recent records, none of the hour-old ones"
    page.shot("query-by-time")


def test_group_lag_chart_alarm_and_reset_by_time(page: Page, cluster: Cluster, topic: str,
                                                 produced: dict[str, object]) -> None:
    group = f"billing-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": cluster.all_bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    # Commit 100 records into each partition: the lag is the rest.
    consumer.assign([CKTopicPartition(topic, p, 0) for p in range(3)])
    consumer.commit(offsets=[CKTopicPartition(topic, p, 100) for p in range(3)], asynchronous=False)
    consumer.close()
    page.open(f"/topics/{topic}")
    ends = {int(r[0]): int(r[5].replace(",", "")) for r in page.rows("#partitions")}
    expected = sum(ends.values()) - 300
    page.open(f"/groups/{group}")
    lags = {r[1]: int(r[4].replace(",", "")) for r in page.rows("#lag")}
    assert lags == {str(p): ends[p] - 100 for p in range(3)}
    assert int(page.text("#total-lag").replace(",", "")) == expected
    assert page.d.find_elements(By.CSS_SELECTOR, "#lag-chart rect"), "the lag chart"
    page.fill("#threshold-value", str(expected - 1))
    page.click("#threshold button[value=set]")
    assert "ALARM" in page.text("#alarm")
    page.open("/groups")
    row = page.d.find_element(By.CSS_SELECTOR, f"#groups tr[data-group='{group}']")
    assert "alarm" in (row.get_attribute("class") or "")
    page.shot("groups")
    page.open(f"/groups/{group}")
    page.shot("group")
    # Reset by time: to the first recent record of each partition.
    recent = produced["recent_ms"]
    assert isinstance(recent, int)
    at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((recent - 60_000) / 1000))
    Select(page.d.find_element(By.ID, "reset-scenario")).select_by_value("datetime")
    page.fill("#reset-value", at)
    page.click("#reset-dry-run")
    assert "Dry run: nothing was changed." in page.text("#reset-result")
    planned = {r[1]: int(r[3].replace(",", "")) for r in page.rows("#reset-plan")}
    with cluster.client() as c:
        firsts = {str(p): r.offset for p, r in c.list_offsets(topic, {p: recent - 60_000 for p in range(3)}).items()}
    assert planned == firsts
    lags = {r[1]: int(r[4].replace(",", "")) for r in page.rows("#lag")}
    assert lags == {str(p): ends[p] - 100 for p in range(3)}, "a dry run changes nothing"
    page.click("#reset-execute")
    assert "Offsets reset." in page.text("#reset-result")
    page.shot("group-reset")
    page.open(f"/groups/{group}")
    assert {r[1]: int(r[2].replace(",", "")) for r in page.rows("#lag")} == firsts
    # The alarm fires above the threshold only: a lag equal to it is fine.
    total = int(page.text("#total-lag").replace(",", ""))
    page.fill("#threshold-value", str(total))
    page.click("#threshold button[value=set]")
    assert not page.d.find_elements(By.ID, "alarm"), "a lag equal to the threshold raises no alarm"
    # Prometheus reads the alarm with the console's bearer token; a stranger gets the login page.
    import urllib.request

    request = urllib.request.Request(page.base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        metrics = r.read().decode()
    assert f'sofakafka_console_group_lag_alarm{{group="{group}"}} 0.0' in metrics
    assert f'sofakafka_console_group_lag_threshold{{group="{group}"}} {float(total)}' in metrics
    with urllib.request.urlopen(page.base + "/metrics", timeout=10) as r:
        assert "/login" in r.url and "sofakafka_console" not in r.read().decode()


def test_trace_names_the_producer_and_the_groups_past_the_record(page: Page, cluster: Cluster, topic: str,
                                                                 produced: dict[str, object]) -> None:
    group = f"audit-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": cluster.all_bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.assign([CKTopicPartition(topic, 1, 0)])
    consumer.commit(offsets=[CKTopicPartition(topic, 1, 10)], asynchronous=False)
    consumer.close()
    def audited() -> bool:
        page.open(f"/trace?topic={topic}&partition=1&offset=5")
        return bool(page.d.find_elements(By.ID, "producer-client-id"))

    # The brokers write the audit in the background, a moment after the append.
    wait_for("the trace to find the record's produce audit entry", audited, WAIT_S)
    assert page.text("#records tbody td.offset") == "5"
    assert page.text("#producer-client-id") == "checkout-service"
    assert page.text("#audit-note") == "from the produce audit"
    assert "/" in page.text("#producer-id"), "librdkafka's idempotent producer has a producer id"
    positions = {r[0]: r for r in page.rows("#consumers")}
    assert positions[group][3] == "yes"
    page.open(f"/trace?topic={topic}&partition=1&offset=10")
    assert {r[0]: r for r in page.rows("#consumers")}[group][3] == "not yet"
    page.shot("trace")


@pytest.mark.parametrize(("path", "message"), [
    ("/query?mode=offset&topic=no-such-topic&partition=0&offset=0", "topic 'no-such-topic' does not exist"),
    ("/query?mode=offset&topic={topic}&partition=0&offset=999999", "offset 999999 is out of range"),
    ("/query?mode=offset&topic={topic}&partition=7&offset=0", "has no partition 7"),
    ("/query?mode=time&topic={topic}&from=2999-01-01T00:00:00", "is in the future"),
    ("/query?mode=time&topic={topic}&from=yesterday", "is not a time"),
    ("/trace?topic={topic}&partition=0&offset=-5", "out of range"),
    ("/groups/no-such-group", "does not exist"),
])
def test_bad_input_gets_a_clear_message(page: Page, topic: str, produced: dict[str, object], path: str,
                                        message: str) -> None:
    page.open(path.format(topic=topic))
    assert message in page.error()


def test_a_huge_key_scan_is_refused_with_a_message(page: Page, topic: str, produced: dict[str, object]) -> None:
    page.open("/query?mode=key")
    page.fill("#q-topic", topic)
    page.fill("#q-key", "customer-1")
    page.d.execute_script("document.getElementById('q-max').removeAttribute('max')")
    page.fill("#q-max", str(KEY_SCAN_LIMIT + 1))
    page.click("#q-run")
    assert "a key scan reads at most" in page.error()
    page.shot("bad-input")


def test_a_killed_broker_shows_down_and_its_partitions_under_replicated(page: Page, cluster: Cluster, topic: str,
                                                                         produced: dict[str, object]) -> None:
    victim = next(b for b in sorted(cluster.state.brokers) if b != cluster.controller())
    cluster.kill(victim)

    def shows_it() -> bool:
        page.open("/brokers")
        status = {r[0]: r[3] for r in page.rows("#brokers")}
        return status.get(str(victim)) == "down" and "0 under-replicated" not in page.text("#under-replicated-count")

    wait_for("the console to show the killed broker down and under-replicated partitions", shows_it, WAIT_S)
    assert page.d.find_elements(By.CSS_SELECTOR, "#under-replicated tbody tr")
    page.shot("brokers-broker-down")
    page.open(f"/topics/{topic}")
    assert page.d.find_elements(By.CSS_SELECTOR, "#partitions tr.under-replicated")
    page.shot("topic-under-replicated")
    # Every page keeps working with the broker down.
    for path in ("/topics", "/groups", f"/query?mode=offset&topic={topic}&partition=0&offset=0&count=3"):
        page.open(path)
        assert not page.d.find_elements(By.CSS_SELECTOR, ".error"), (path, page.text())
