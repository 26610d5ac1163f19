"""The broker's HTTP endpoint (``metrics.listener``): ``/metrics`` in Prometheus text format, ``/health``
(the broker's event loop answers) and ``/ready`` (the broker serves clients: started, registered, and its
metadata names a controller; 503 with the reason otherwise).

It runs on the broker's own event loop (aiohttp), so a scrape reads the broker's state where that state
lives, without locks; the text is written by prometheus_client. Off unless ``metrics.listener`` is set.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

Readiness = Callable[[], str | None]
"""None when ready, else why not."""


class MetricsServer:
    def __init__(self, host: str, port: int, registry: CollectorRegistry, readiness: Readiness) -> None:
        self.host = host
        self.port = port
        self.registry = registry
        self.readiness = readiness
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/health", self._health)
        app.router.add_get("/ready", self._ready)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host or None, self.port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        addresses = runner.addresses
        self.bound_port = int(addresses[0][1]) if addresses else self.port
        log.info("metrics on http://%s:%d/metrics", self.host or "0.0.0.0", self.bound_port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _ready(self, request: web.Request) -> web.Response:
        reason = self.readiness()
        if reason is None:
            return web.Response(text="ready\n")
        return web.Response(text=f"not ready: {reason}\n", status=503)
