"""The web console on a secured cluster, in a real headless browser (Debian's chromium and chromium-driver).

A broker with SASL and TLS listeners and Kafka's ACL authorizer (tests/integration/security_setup.py); the
console runs as its own process, signed in to the cluster over SASL_SSL as the SCRAM user ``console`` through
``--command-config``, whose ACLs let it see the ``visible-`` topics only. What is checked: a stranger gets the
console's login form and nothing of the cluster; signed in, the pages show what the console's SASL user may see
(a topic it has no ACL for is not listed, and querying it is a clear refusal), the trace names the producing
SASL principal from the produce audit; the users page lists, adds and deletes SCRAM users (a real client then
logs in as the new user, and cannot once it is deleted); the ACLs page lists, adds and deletes ACLs (seen by
``sofakafka acls list``), bad forms are sentences; what the console's user may not do (delete a topic) is the
cluster's refusal as a sentence. One broker, one console, one browser for the module.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from sofakafka.client import KafkaClient
from sofakafka.client.errors import AuthenticationError
from sofakafka.console.auth import hash_password
from sofakafka.protocol.errors import ErrorCode
from sofakafka.protocol.produce_audit import AUDIT_TOPIC, AUDIT_WRITER_CLIENT_ID
from sofakafka.security.client_config import client_security_from_properties
from tests.integration.conftest import REPO, free_port
from tests.integration.security_setup import SecureBroker, start_secure_broker

pytest.importorskip("selenium")
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.cluster.test_console_browser import Page, browser  # noqa: F401  (the module's browser fixture)

WEB_USER, WEB_PASSWORD = "operator", "a long web password"
CONSOLE_SASL = ("console", "console-sasl-secret")
APP_SASL = ("app", "app-sasl-secret")
VISIBLE, HIDDEN = "visible-orders", "hidden-payroll"
WAIT_S = 60.0


def wait_for(what: str, condition: object, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def scram_jaas(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{password}";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    sb = start_secure_broker(tmp_path_factory.mktemp("console-secure"), {"sofakafka.produce.audit.enable": "true"})
    try:
        for user, password in (CONSOLE_SASL, APP_SASL):
            sb.sofakafka("users", "add", user, "--password", password, "--mechanism", "SCRAM-SHA-256")
        for args in (
            # The console's SASL user: the visible- topics and the audit topic, the cluster's ACLs and users.
            ["--allow-principal", "User:console", "--operation", "READ", "--operation", "DESCRIBE",
             "--operation", "DESCRIBE_CONFIGS", "--topic", "visible-", "--resource-pattern-type", "PREFIXED"],
            ["--allow-principal", "User:console", "--operation", "READ", "--operation", "DESCRIBE",
             "--topic", "__sofakafka_produce_audit"],
            ["--allow-principal", "User:console", "--operation", "DESCRIBE", "--operation", "ALTER",
             "--operation", "DESCRIBE_CONFIGS", "--operation", "ALTER_CONFIGS", "--cluster"],
            ["--allow-principal", "User:app", "--operation", "WRITE", "--operation", "DESCRIBE",
             "--topic", "visible-", "--resource-pattern-type", "PREFIXED"],
            # ... and WRITE on the audit topic, which still does not let it pose as the brokers' audit writer.
            ["--allow-principal", "User:app", "--operation", "WRITE", "--operation", "DESCRIBE",
             "--topic", AUDIT_TOPIC],
        ):
            sb.sofakafka("acls", "add", *args)
        for topic in (VISIBLE, HIDDEN):
            sb.sofakafka("topics", "create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
        yield sb
    finally:
        sb.broker.kill()


@pytest.fixture(scope="module")
def console(secured: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("console-home")
    (home / "users").write_text(f"{WEB_USER}:{hash_password(WEB_PASSWORD)}\n")
    (home / "console.properties").write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.jaas.config={scram_jaas(*CONSOLE_SASL)}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={secured.pki.ca}\n")
    port = free_port()
    log = open(home / "console.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sofakafka", "console", "--bootstrap-server", secured.address("SASL_SSL"),
         "--command-config", str(home / "console.properties"), "--port", str(port),
         "--users-file", str(home / "users"), "--state-dir", str(home / "state"), "--request-timeout-ms", "8000"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=REPO)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            assert proc.poll() is None, (home / "console.log").read_text(errors="replace")
            with contextlib.suppress(OSError), urllib.request.urlopen(base + "/ready", timeout=5) as r:
                return r.status == 200
            return False

        # /ready asks the cluster for metadata: true only once the console's SASL_SSL login works.
        wait_for("the console to log in to the cluster (/ready)", ready)
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
def page(browser: object, console: str) -> Page:  # noqa: F811
    p = Page(browser, console)  # type: ignore[arg-type]
    p.open("/login")
    p.fill("#user", WEB_USER)
    p.fill("#password", WEB_PASSWORD)
    p.click("#sign-in")
    return p


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _raw(base: str, path: str, data: bytes | None = None) -> tuple[int, str, str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(base + path, data=data), timeout=10) as r:
            return r.status, r.headers.get("Location", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", ""), e.read().decode()


def test_a_stranger_gets_the_login_form_and_nothing_of_the_cluster(console: str) -> None:
    for path in ("/users", "/acls", "/topics", f"/query?mode=offset&topic={VISIBLE}&partition=0&offset=0"):
        status, location, body = _raw(console, path)
        assert status == 302 and location.startswith("/login?next="), (path, status, location)
        assert VISIBLE not in body and "User:console" not in body
    for path, form in (("/users", b"name=intruder&password=x&mechanism=SCRAM-SHA-256"),
                       ("/acls", b"principal=User:intruder&operation=ALL&permission=ALLOW&resource_type=CLUSTER"
                                 b"&pattern_type=LITERAL")):
        status, _, body = _raw(console, path, form)
        assert status == 401 and "sign in first" in body, (path, status, body)


def _app_producer(sb: SecureBroker, client_id: str) -> Producer:
    return Producer({"bootstrap.servers": sb.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": APP_SASL[0],
                     "sasl.password": APP_SASL[1], "client.id": client_id, "message.send.max.retries": 0})


def _produce_as_app(sb: SecureBroker, n: int) -> None:
    producer = _app_producer(sb, "billing-app")
    for i in range(n):
        producer.produce(VISIBLE, key=f"k-{i}".encode(), value=f"order {i}".encode())
    assert producer.flush(30) == 0


def test_the_console_shows_what_its_sasl_users_acls_allow(page: Page, secured: SecureBroker) -> None:
    _produce_as_app(secured, 5)
    page.open("/topics")
    names = {r[0].split()[0] for r in page.rows("#topics")}
    assert VISIBLE in names and HIDDEN not in names, names
    page.shot("topics-secured")
    page.open(f"/query?mode=offset&topic={VISIBLE}&partition=0&offset=0&count=10")
    assert "order 0" in page.text("#records") and "order 4" in page.text("#records")
    page.open(f"/query?mode=offset&topic={HIDDEN}&partition=0&offset=0&count=10")
    assert "TOPIC_AUTHORIZATION_FAILED" in page.error(), page.error()

    def audited() -> bool:
        page.open(f"/trace?topic={VISIBLE}&partition=0&offset=2")
        return bool(page.d.find_elements(By.ID, "producer-principal"))

    # The broker writes the audit in the background (over its own SASL inter-broker login), a moment later.
    wait_for("the trace to find the produce audit entry", audited)
    assert page.text("#producer-principal") == "User:app"
    assert page.text("#producer-client-id") == "billing-app"


def test_a_client_with_write_on_the_audit_topic_cannot_pose_as_the_audit_writer(secured: SecureBroker) -> None:
    # The broker creates the audit topic with the first audited produce; until then a produce to it is refused
    # for want of CREATE (TOPIC_AUTHORIZATION_FAILED), whoever sends it. So this test does not rely on an
    # earlier one having produced: it produces, and waits for the topic.
    _produce_as_app(secured, 1)
    wait_for("the broker to create the produce audit topic",
             lambda: secured.sofakafka("topics", "describe", "--topic", AUDIT_TOPIC, check=False).returncode == 0)
    producer = _app_producer(secured, AUDIT_WRITER_CLIENT_ID)
    errors: list[object] = []
    producer.produce(AUDIT_TOPIC, key=b"forged", value=b"{}", partition=0,
                     on_delivery=lambda err, msg: errors.append(err.code() if err else "delivered"))
    producer.flush(30)
    del producer
    # librdkafka names Kafka's INVALID_TOPIC_EXCEPTION (17) TOPIC_EXCEPTION.
    assert errors == [ErrorCode.INVALID_TOPIC_EXCEPTION.value], errors


def test_what_the_console_user_may_not_do_is_the_clusters_refusal_in_a_sentence(page: Page) -> None:
    page.open(f"/topics/{VISIBLE}")
    page.fill("#delete-topic input[name=confirm]", VISIBLE)
    page.click("#delete-topic button")
    assert "TOPIC_AUTHORIZATION_FAILED" in page.error()
    page.open("/topics")
    assert VISIBLE in {r[0].split()[0] for r in page.rows("#topics")}


def _login(sb: SecureBroker, user: str, password: str) -> None:
    security = client_security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": scram_jaas(user, password)})
    with KafkaClient(sb.address("SASL_PLAINTEXT"), client_id="login-probe", request_timeout_ms=10_000,
                     security=security) as client:
        client.metadata([])


def test_users_page_lists_adds_and_deletes_scram_users(page: Page, secured: SecureBroker) -> None:
    page.open("/users")
    users = {r[0]: r[1] for r in page.rows("#users")}
    assert "SCRAM-SHA-256" in users["console"] and "SCRAM-SHA-256" in users["app"], users
    page.fill("#new-user-name", "reader")
    page.fill("#new-user-password", "reader-secret")
    page.fill("#new-user-iterations", "100")
    page.click("#add-user-button")
    assert "iterations" in page.error()
    page.open("/users")
    page.fill("#new-user-name", "reader")
    page.fill("#new-user-password", "reader-secret")
    page.click("#add-user-button")
    assert page.flash() == "Set the SCRAM-SHA-256 credential of user reader."
    assert "reader" in {r[0] for r in page.rows("#users")}
    page.shot("users")
    _login(secured, "reader", "reader-secret")
    page.click("tr[data-user=reader] button.delete-user")
    assert page.flash() == "Deleted user reader (SCRAM-SHA-256)."
    assert "reader" not in {r[0] for r in page.rows("#users")}

    def refused() -> bool:
        try:
            _login(secured, "reader", "reader-secret")
        except AuthenticationError:
            return True
        return False

    wait_for("the deleted user's login to be refused", refused)


def test_acls_page_lists_adds_and_deletes_acls(page: Page, secured: SecureBroker) -> None:
    page.open("/acls")
    principals = {r[0] for r in page.rows("#acls")}
    assert {"User:console", "User:app"} <= principals, principals

    def add(principal: str, operation: str, resource_type: str, name: str) -> None:
        page.open("/acls")
        page.fill("#acl-principal", principal)
        Select(page.d.find_element(By.ID, "acl-operation")).select_by_visible_text(operation)
        Select(page.d.find_element(By.ID, "acl-resource-type")).select_by_visible_text(resource_type)
        page.fill("#acl-resource-name", name)
        page.click("#add-acl-button")

    add("reader", "READ", "TOPIC", VISIBLE)
    assert "a principal is TYPE:NAME" in page.error()
    add("User:reader", "WRITE", "GROUP", "readers")
    assert "WRITE is not an operation on a GROUP" in page.error()
    add("User:reader", "READ", "TOPIC", VISIBLE)
    assert page.flash() == f"Added ACL: ALLOW User:reader READ from * on TOPIC LITERAL {VISIBLE}."
    rows = [r for r in page.rows("#acls") if r[0] == "User:reader"]
    assert rows and rows[0][1:7] == ["*", "READ", "ALLOW", "TOPIC", VISIBLE, "LITERAL"], rows
    page.shot("acls")
    listed = secured.sofakafka("acls", "list", "--topic", VISIBLE).stdout
    assert "principal=User:reader" in listed and "operation=READ" in listed, listed
    page.click(page.d.find_element(By.XPATH, "//table[@id='acls']//tr[td[1]='User:reader']//button"))
    assert page.flash() == f"Deleted ACL: ALLOW User:reader READ from * on TOPIC LITERAL {VISIBLE}."
    assert "User:reader" not in {r[0] for r in page.rows("#acls")}
    assert "User:reader" not in secured.sofakafka("acls", "list", "--topic", VISIBLE).stdout
