"""The web console: an aiohttp app of server-rendered pages over :mod:`sofakafka.console.cluster`.

The console is a client of the cluster like any other: it speaks the Kafka protocol through
``sofakafka.client`` (never a broker's internals), from a small pool of clients whose blocking calls run in
worker threads, so a slow or dead broker holds up one page, not the event loop. Templates, CSS and the one
small script ship in the package (no CDN). Failures are shown as sentences; an unexpected exception is
logged with its traceback and the page says only that it happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import queue
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from sofakafka.client import ClientError, ConfigSource, KafkaClient
from sofakafka.console import access as ac
from sofakafka.console import cluster as cl
from sofakafka.console import offsets as off
from sofakafka.console import query as q
from sofakafka.console.alarms import AlarmStore
from sofakafka.console.auth import SESSION_COOKIE, SESSION_TTL_S, Authenticator, Session
from sofakafka.console.jobs import Job, JobRegistry
from sofakafka.console.records import format_timestamp
from sofakafka.console.trace import trace as trace_record
from sofakafka.protocol.errors import KafkaError

log = logging.getLogger("sofakafka.console")
T = TypeVar("T")
PACKAGE_DIR = Path(__file__).parent
POOL_SIZE = 4


@dataclass
class ConsoleSettings:
    bootstrap: str
    host: str = "127.0.0.1"
    port: int = 9000
    request_timeout_ms: int = 5000
    users: dict[str, str] | None = None
    """None: no login (``--no-login``)."""
    state_dir: Path | None = None
    alarm_interval_s: float = 30.0
    client_id: str = "sofakafka-console"
    client_options: Mapping[str, Any] = field(default_factory=dict)
    """Extra KafkaClient keyword arguments (from ``--command-config``: retry backoff, TLS and SASL)."""
    metrics_token: str | None = None
    """A bearer token that lets Prometheus read /metrics without signing in."""


class ClientPool:
    """``size`` KafkaClients (not thread-safe each), lent one at a time to calls run in worker threads."""

    def __init__(self, make: Callable[[], KafkaClient], size: int = POOL_SIZE) -> None:
        self._make = make
        self._idle: queue.SimpleQueue[KafkaClient] = queue.SimpleQueue()
        self._sem = asyncio.Semaphore(size)
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="console-client")
        self._all: list[KafkaClient] = []

    def _take(self) -> KafkaClient:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            client = self._make()
            self._all.append(client)
            return client

    async def run(self, fn: Callable[[KafkaClient], T]) -> T:
        async with self._sem:
            client = self._take()
            try:
                return await asyncio.get_running_loop().run_in_executor(self._executor, fn, client)
            finally:
                self._idle.put(client)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        for client in self._all:
            with contextlib.suppress(Exception):
                client.close()


def _human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _num(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


class Console:
    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.auth = Authenticator(settings.users)
        self.memory = cl.BrokerMemory()
        self.jobs = JobRegistry()
        self.alarms = AlarmStore(settings.state_dir / "alarms.json" if settings.state_dir else None)
        self.pool: ClientPool | None = None
        self.last_ok: float | None = None
        self.env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(PACKAGE_DIR / "templates")),
                                      autoescape=True, undefined=jinja2.StrictUndefined,
                                      trim_blocks=True, lstrip_blocks=True)
        self.env.filters["bytes"] = _human_bytes
        self.env.filters["num"] = _num
        self.env.filters["ts"] = format_timestamp
        self.env.filters["q"] = lambda s: quote(str(s), safe="")
        self.env.globals["ConfigSource"] = ConfigSource
        self._alarm_task: asyncio.Task[None] | None = None

    def new_client(self) -> KafkaClient:
        return KafkaClient(self.settings.bootstrap, client_id=self.settings.client_id,
                           request_timeout_ms=self.settings.request_timeout_ms, **self.settings.client_options)

    async def call(self, fn: Callable[[KafkaClient], T]) -> T:
        assert self.pool is not None
        result = await self.pool.run(fn)
        self.last_ok = time.monotonic()
        return result

    # -- app ---------------------------------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors, self._login_required], client_max_size=1 << 20)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/ready", self.ready)
        r.add_get("/login", self.login_page)
        r.add_post("/login", self.login)
        r.add_post("/logout", self.logout)
        r.add_get("/", self.root)
        r.add_get("/brokers", self.brokers)
        r.add_get("/topics", self.topics)
        r.add_post("/topics", self.create_topic)
        r.add_get("/topics/{topic}", self.topic)
        r.add_post("/topics/{topic}/config", self.alter_config)
        r.add_post("/topics/{topic}/partitions", self.add_partitions)
        r.add_post("/topics/{topic}/delete", self.delete_topic)
        r.add_get("/groups", self.groups)
        r.add_get("/groups/{group}", self.group)
        r.add_post("/groups/{group}/reset", self.reset_group)
        r.add_post("/groups/{group}/threshold", self.set_threshold)
        r.add_get("/query", self.query)
        r.add_get("/query/download", self.query_download)
        r.add_post("/query/scan", self.start_scan)
        r.add_get("/query/scan/{job}", self.scan_page)
        r.add_get("/query/scan/{job}/download", self.scan_download)
        r.add_post("/query/scan/{job}/cancel", self.cancel_scan)
        r.add_get("/api/jobs/{job}", self.job_status)
        r.add_get("/trace", self.trace)
        r.add_get("/users", self.users)
        r.add_post("/users", self.add_user)
        r.add_post("/users/delete", self.delete_user)
        r.add_get("/acls", self.acls)
        r.add_post("/acls", self.add_acl)
        r.add_post("/acls/delete", self.delete_acl)
        r.add_get("/metrics", self.metrics)
        r.add_static("/static", PACKAGE_DIR / "static", append_version=True)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        return app

    async def _on_startup(self, app: web.Application) -> None:
        self.pool = ClientPool(self.new_client)
        self._alarm_task = asyncio.create_task(self._alarm_loop())

    async def _on_cleanup(self, app: web.Application) -> None:
        self.jobs.cancel_all()
        if self._alarm_task is not None:
            self._alarm_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._alarm_task
        if self.pool is not None:
            self.pool.close()

    async def _alarm_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.alarm_interval_s)
            for group in self.alarms.thresholds():
                try:
                    lag = await self.call(lambda c, g=group: cl.group_lag(c, g))  # type: ignore[misc]
                except (KafkaError, ClientError) as exc:
                    log.warning("backlog alarm: lag of group %s unavailable: %s", group, cl.describe_failure(exc))
                    continue
                self.alarms.observe(group, lag)

    # -- middlewares -------------------------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except cl.ConsoleError as exc:
            return self._error_page(request, str(exc), 400)
        except (KafkaError, ClientError) as exc:
            return self._error_page(request, cl.describe_failure(exc), 502)
        except Exception:
            log.exception("console page %s failed", request.path)
            return self._error_page(request, "the console failed to show this page; the reason is in its log", 500)

    def _error_page(self, request: web.Request, message: str, status: int) -> web.Response:
        if request.path.startswith("/api/") or request.path.endswith("/download"):
            return web.json_response({"error": message}, status=status)
        return self.render(request, "error.html", {"message": message}, status=status)

    @web.middleware
    async def _login_required(self, request: web.Request,
                              handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.path in ("/health", "/ready", "/login") or request.path.startswith("/static/"):
            return await handler(request)
        token = self.settings.metrics_token
        if request.path == "/metrics" and token and hmac.compare_digest(
                request.headers.get("Authorization", ""), f"Bearer {token}"):
            return await handler(request)
        session = self.session(request)
        if session is None:
            if request.path.startswith("/api/") or request.method != "GET":
                return web.json_response({"error": "sign in first"}, status=401)
            target = request.path_qs
            raise web.HTTPFound("/login?" + urlencode({"next": target}))
        if request.method == "POST":
            form = await request.post()
            if form.get("csrf") != session.csrf:
                return self._error_page(request, "the form is stale (or came from another site): reload the page "
                                                 "and try again", 403)
        request["session"] = session
        return await handler(request)

    def session(self, request: web.Request) -> Session | None:
        if not self.auth.enabled:
            return Session("anonymous", "no-login", float("inf"))
        return self.auth.session(request.cookies.get(SESSION_COOKIE))

    # -- rendering ---------------------------------------------------------------------------------------

    def render(self, request: web.Request, template: str, context: dict[str, Any], status: int = 200
               ) -> web.Response:
        session: Session | None = request.get("session") or self.session(request)
        page = self.env.get_template(template).render(
            session=session, login_enabled=self.auth.enabled, path=request.path,
            bootstrap=self.settings.bootstrap, flash=request.query.get("flash"),
            static=lambda name: f"/static/{name}", **context)
        return web.Response(text=page, content_type="text/html", status=status,
                            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                     "Content-Security-Policy": "default-src 'self'; style-src 'self'; "
                                                                "img-src 'self' data:; frame-ancestors 'none'"})

    @staticmethod
    def _redirect(location: str, flash: str | None = None) -> NoReturn:
        if flash:
            location += ("&" if "?" in location else "?") + urlencode({"flash": flash})
        raise web.HTTPSeeOther(location)

    # -- health and login --------------------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        self._redirect("/brokers")

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def ready(self, request: web.Request) -> web.Response:
        try:
            await asyncio.wait_for(self.call(lambda c: c.metadata([])), self.settings.request_timeout_ms / 1000 + 1)
        except (KafkaError, ClientError, TimeoutError) as exc:
            return web.Response(text=f"not ready: {cl.describe_failure(exc)}\n", status=503)
        return web.Response(text="ready\n")

    async def login_page(self, request: web.Request) -> web.Response:
        return self.render(request, "login.html", {"next": _safe_next(request.query.get("next")), "failed": False})

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        user, password = str(form.get("user", "")), str(form.get("password", ""))
        target = _safe_next(str(form.get("next", "")))
        if not self.auth.enabled:
            raise web.HTTPSeeOther(target)
        ok = await asyncio.get_running_loop().run_in_executor(None, self.auth.check, user, password)
        if not ok:
            await asyncio.sleep(0.5)
            log.warning("console login failed for user %r from %s", user, request.remote)
            return self.render(request, "login.html", {"next": target, "failed": True}, status=401)
        response = web.HTTPSeeOther(target)
        response.set_cookie(SESSION_COOKIE, self.auth.open_session(user), httponly=True, samesite="Strict",
                            max_age=SESSION_TTL_S, path="/")
        raise response

    async def logout(self, request: web.Request) -> web.Response:
        self.auth.close_session(request.cookies.get(SESSION_COOKIE))
        response = web.HTTPSeeOther("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        raise response

    # -- brokers -----------------------------------------------------------------------------------------

    async def brokers(self, request: web.Request) -> web.Response:
        overview = await self.call(lambda c: cl.cluster_overview(c, self.memory))
        return self.render(request, "brokers.html", {"o": overview})

    # -- topics ------------------------------------------------------------------------------------------

    async def topics(self, request: web.Request) -> web.Response:
        def load(c: KafkaClient) -> tuple[cl.ClusterOverview, list[cl.TopicRow]]:
            overview = cl.cluster_overview(c, self.memory)
            return overview, cl.topic_rows(overview, c.cluster())

        overview, rows = await self.call(load)
        show_internal = request.query.get("internal") == "1"
        return self.render(request, "topics.html", {
            "rows": [r for r in rows if show_internal or not r.internal], "show_internal": show_internal,
            "o": overview})

    async def create_topic(self, request: web.Request) -> web.Response:
        form = await request.post()
        name = str(form.get("name", "")).strip()
        partitions = q.parse_int(str(form.get("partitions", "")), "partition count", -1)
        rf = q.parse_int(str(form.get("replication_factor", "")), "replication factor", -1)
        configs = _parse_configs(str(form.get("configs", "")))
        message = await self.call(lambda c: cl.create_topic(c, name, partitions, rf, configs))
        self._redirect(f"/topics/{quote(name, safe='')}", message)

    async def topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]

        def load(c: KafkaClient) -> cl.TopicDetail:
            return cl.topic_detail(c, name, cl.cluster_overview(c, self.memory))

        detail = await self.call(load)
        return self.render(request, "topic.html", {"t": detail, "is_dynamic": cl.is_dynamic})

    async def alter_config(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = await request.post()
        key = str(form.get("key", ""))
        value = None if form.get("action") == "delete" else str(form.get("value", ""))
        message = await self.call(lambda c: cl.alter_topic_config(c, name, key, value))
        self._redirect(f"/topics/{quote(name, safe='')}", message)

    async def add_partitions(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = await request.post()
        total = q.parse_int(str(form.get("total", "")), "partition count")
        message = await self.call(lambda c: cl.add_partitions(c, name, total))
        self._redirect(f"/topics/{quote(name, safe='')}", message)

    async def delete_topic(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        form = await request.post()
        if str(form.get("confirm", "")) != name:
            raise cl.ConsoleError(f"type the topic's name ({name}) to confirm its deletion")
        message = await self.call(lambda c: cl.delete_topic(c, name))
        self._redirect("/topics", message)

    # -- groups ------------------------------------------------------------------------------------------

    async def groups(self, request: web.Request) -> web.Response:
        rows = await self.call(cl.group_rows)
        for r in rows:
            self.alarms.observe(r.group_id, r.total_lag if r.error is None else None)
        return self.render(request, "groups.html", {
            "rows": rows, "thresholds": self.alarms.thresholds(),
            "alarming": {r.group_id for r in rows if self.alarms.alarming(r.group_id, r.total_lag)}})

    async def group(self, request: web.Request, plan: off.ResetPlan | None = None,
                    form: Mapping[str, str] | None = None) -> web.Response:
        group_id = request.match_info["group"]
        detail = await self.call(lambda c: cl.group_detail(c, group_id))
        self.alarms.observe(group_id, detail.total_lag)
        topics = sorted({r.topic for r in detail.lags})
        return self.render(request, "group.html", {
            "g": detail, "chart": _lag_chart(detail.lags), "threshold": self.alarms.threshold(group_id),
            "alarming": self.alarms.alarming(group_id, detail.total_lag), "plan": plan, "topics": topics,
            "form": form or {}, "scenarios": off.SCENARIOS})

    async def reset_group(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        form = await request.post()
        fields = {k: str(form.get(k, "")) for k in ("scenario", "value", "topic", "action")}
        topic = fields["topic"] or None

        def run(c: KafkaClient) -> off.ResetPlan:
            plan = off.plan_reset(c, group_id, fields["scenario"], fields["value"], topic)
            return off.execute_reset(c, plan) if fields["action"] == "execute" else plan

        plan = await self.call(run)
        if plan.executed:
            log.info("console: %s reset group %s (%s %s)", request["session"].user, group_id, fields["scenario"],
                     fields["value"])
        return await self.group(request, plan, fields)

    async def set_threshold(self, request: web.Request) -> web.Response:
        group_id = request.match_info["group"]
        form = await request.post()
        text = str(form.get("threshold", "")).strip()
        threshold = None if form.get("action") == "remove" or not text else q.parse_int(text, "lag threshold")
        if threshold is not None and threshold < 0:
            raise cl.ConsoleError("a lag threshold must not be negative")
        self.alarms.set_threshold(group_id, threshold)
        self._redirect(f"/groups/{quote(group_id, safe='')}",
                       f"Backlog alarm above {threshold:,} records set." if threshold is not None
                       else "Backlog alarm removed.")

    # -- message query -----------------------------------------------------------------------------------

    def _run_query(self, c: KafkaClient, params: Mapping[str, str]) -> q.QueryResult:
        mode = params.get("mode", "offset")
        topic = params.get("topic", "").strip()
        partition = q.parse_partition(params.get("partition"))
        count = q.parse_int(params.get("count"), "record count", 20)
        if mode == "offset":
            if partition is None:
                raise cl.ConsoleError("a query by offset needs one partition")
            return q.by_offset(c, topic, partition, q.parse_int(params.get("offset"), "offset"), count)
        if mode == "time":
            from_ms = off.parse_time_ms(params.get("from", ""))
            to_text = params.get("to", "").strip()
            return q.by_time(c, topic, partition, from_ms, off.parse_time_ms(to_text) if to_text else None, count)
        raise cl.ConsoleError(f"unknown query mode {mode!r}")

    async def query(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        result: q.QueryResult | None = None
        if params.get("topic") and params.get("mode", "offset") in ("offset", "time"):
            result = await self.call(lambda c: self._run_query(c, params))
        topics = await self.call(lambda c: sorted(c.metadata().topics))
        return self.render(request, "query.html", {
            "params": params, "mode": params.get("mode", "offset"), "result": result, "topics": topics,
            "view": params.get("view", "auto"), "download": "/query/download?" + urlencode(params),
            "view_base": "/query?" + urlencode({k: v for k, v in params.items() if k != "view"}),
            "key_scan_default": q.KEY_SCAN_DEFAULT, "key_scan_limit": q.KEY_SCAN_LIMIT})

    async def query_download(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        result = await self.call(lambda c: self._run_query(c, params))
        name = f"{params.get('topic', 'records')}-{params.get('mode', 'offset')}.json"
        return _json_download(name, {"query": params, "notes": list(result.notes),
                                     "records": q.views_to_json(result.records)})

    async def start_scan(self, request: web.Request) -> web.Response:
        form = await request.post()
        topic = str(form.get("topic", "")).strip()
        key = q.parse_key(str(form.get("key", "")))
        partition = q.parse_partition(str(form.get("partition", "")))
        bound = q.check_scan_bound(q.parse_int(str(form.get("max_records", "")), "scan bound", q.KEY_SCAN_DEFAULT))
        from_text = str(form.get("from", "")).strip()
        from_ms = off.parse_time_ms(from_text) if from_text else None
        default_partitioner = form.get("default_partitioner") == "on"
        state, ranges = await self.call(lambda c: q.plan_scan(
            c, topic, key, partition, default_partitioner=default_partitioner, from_ms=from_ms, max_records=bound))

        def run(job: Job) -> None:
            client = self.new_client()
            try:
                q.scan_for_key(client, job.state, ranges, job.cancel.is_set)
            finally:
                client.close()

        job = self.jobs.start(request["session"].user, f"key {str(form.get('key', ''))!r} in {topic}", state, run)
        self._redirect(f"/query/scan/{job.id}")

    async def scan_page(self, request: web.Request) -> web.Response:
        job = self.jobs.get(request.match_info["job"], request["session"].user)
        return self.render(request, "scan.html", {"job": job, "s": job.state, "view": request.query.get("view", "auto")})

    async def job_status(self, request: web.Request) -> web.Response:
        job = self.jobs.get(request.match_info["job"], request["session"].user)
        s = job.state
        return web.json_response({"scanned": s.scanned, "total": s.total, "percent": s.percent,
                                  "matches": len(s.matches), "done": s.done, "outcome": s.outcome,
                                  "failure": job.failure, "errors": s.errors})

    async def cancel_scan(self, request: web.Request) -> web.Response:
        job = self.jobs.get(request.match_info["job"], request["session"].user)
        job.cancel.set()
        self._redirect(f"/query/scan/{job.id}")

    async def scan_download(self, request: web.Request) -> web.Response:
        job = self.jobs.get(request.match_info["job"], request["session"].user)
        s = job.state
        return _json_download(f"{s.topic}-key-scan.json", {
            "topic": s.topic, "key": s.key.decode(errors="replace"), "scanned": s.scanned, "outcome": s.outcome,
            "records": q.views_to_json(s.matches)})

    # -- trace -------------------------------------------------------------------------------------------

    async def trace(self, request: web.Request) -> web.Response:
        params = dict(request.query)
        result = None
        if params.get("topic"):
            topic = params["topic"].strip()
            partition = q.parse_partition(params.get("partition"))
            if partition is None:
                raise cl.ConsoleError("a trace needs one partition")
            offset = q.parse_int(params.get("offset"), "offset")
            result = await self.call(lambda c: trace_record(c, topic, partition, offset))
        topics = await self.call(lambda c: sorted(c.metadata().topics))
        return self.render(request, "trace.html", {"params": params, "r": result, "topics": topics,
                                                   "view": params.get("view", "auto")})

    # -- the console's own metrics -----------------------------------------------------------------------

    # -- users and ACLs (security) ------------------------------------------------------------------------

    async def _load_or_error(self, load: Callable[[KafkaClient], T]) -> tuple[T | None, str | None]:
        """A listing, or the sentence saying why the cluster would not give it (no authorizer, or the console's
        own SASL user lacks DESCRIBE on the cluster): the page still shows its forms."""
        try:
            return await self.call(load), None
        except (KafkaError, ClientError) as exc:
            return None, cl.describe_failure(exc)

    async def users(self, request: web.Request) -> web.Response:
        rows, error = await self._load_or_error(ac.user_rows)
        return self.render(request, "users.html", {"rows": rows or [], "error": error,
                                                   "mechanisms": ac.SCRAM_MECHANISMS,
                                                   "min_iterations": ac.SCRAM_MIN_ITERATIONS})

    async def add_user(self, request: web.Request) -> web.Response:
        form = await request.post()
        iterations_text = str(form.get("iterations", "")).strip()
        iterations = q.parse_int(iterations_text, "iterations") if iterations_text else None
        message = await self.call(lambda c: ac.add_user(c, str(form.get("name", "")), str(form.get("mechanism", "")),
                                                        str(form.get("password", "")), iterations))
        self._redirect("/users", message)

    async def delete_user(self, request: web.Request) -> web.Response:
        form = await request.post()
        message = await self.call(lambda c: ac.delete_user(c, str(form.get("name", ""))))
        self._redirect("/users", message)

    async def acls(self, request: web.Request) -> web.Response:
        rows, error = await self._load_or_error(ac.acl_rows)
        return self.render(request, "acls.html", {
            "rows": rows or [], "error": error, "resource_types": ac.RESOURCE_TYPES, "pattern_types": ac.PATTERN_TYPES,
            "operations": ac.OPERATIONS, "permissions": ac.PERMISSIONS})

    async def add_acl(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        message = await self.call(lambda c: ac.add_acl(c, form))
        self._redirect("/acls", message)

    async def delete_acl(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        message = await self.call(lambda c: ac.delete_acl(c, form))
        self._redirect("/acls", message)

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.alarms.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})


def _safe_next(target: str | None) -> str:
    """Only a path of this site (not ``//elsewhere``) is followed after signing in."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/brokers"
    return target


def _parse_configs(text: str) -> dict[str, str]:
    out = {}
    for line in text.replace(",", "\n").splitlines():
        line = line.strip()
        if not line:
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise cl.ConsoleError(f"config {line!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


def _json_download(name: str, payload: object) -> web.Response:
    return web.Response(body=json.dumps(payload, indent=2, ensure_ascii=False).encode(),
                        content_type="application/json",
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})


@dataclass(frozen=True)
class ChartBar:
    label: str
    lag: int
    y: int
    width: float


@dataclass(frozen=True)
class LagChart:
    bars: tuple[ChartBar, ...]
    height: int
    max_lag: int
    label_width: int = 160
    bar_area: int = 420


def _lag_chart(rows: tuple[cl.LagRow, ...]) -> LagChart:
    """A horizontal bar per partition, lengths relative to the largest lag (an inline SVG in the page)."""
    lagging = [r for r in rows if r.lag is not None]
    max_lag = max((r.lag or 0 for r in lagging), default=0)
    bars = tuple(ChartBar(f"{r.topic}-{r.partition}", r.lag or 0, 10 + i * 24,
                          (r.lag or 0) / max_lag * 420 if max_lag else 0.0)
                 for i, r in enumerate(lagging))
    return LagChart(bars, 20 + 24 * len(bars), max_lag)

