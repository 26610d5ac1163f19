"""docker/ without a Docker engine: the files are what the launcher's template generates, the compose file
hangs together (ports, listeners, volumes, depends_on), our own config parser accepts every broker's
properties, and the Dockerfile's instructions are the ones a broker image needs."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from sofakafka.broker.config import KafkaConfig, load_properties
from sofakafka.cli import cluster as cl

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
BROKERS = 3


def compose() -> dict[str, object]:
    doc = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())
    assert isinstance(doc, dict)
    return doc


def test_files_on_disk_are_what_emit_compose_writes() -> None:
    # One source of truth: regenerate with `sofakafka cluster up --emit-compose docker/` after a template change.
    for rel, text in cl.compose_files(BROKERS).items():
        assert (DOCKER / rel).read_text() == text, f"docker/{rel} drifted from the launcher's template"


def test_emit_compose_writes_the_same_files(tmp_path: Path) -> None:
    assert cl.main(["up", "--emit-compose", str(tmp_path)]) == 0
    for rel in cl.compose_files(BROKERS):
        assert (tmp_path / rel).read_text() == (DOCKER / rel).read_text()


def test_yaml_parses_to_the_document_the_launcher_builds() -> None:
    assert compose() == json.loads(json.dumps(cl.compose_document(BROKERS)))


def test_docker_brokers_differ_from_loopback_brokers_only_in_addresses_and_paths() -> None:
    where = {"listeners", "advertised.listeners", "zookeeper.connect", "log.dirs", "metrics.listener"}
    for broker_id in range(1, BROKERS + 1):
        docker = load_properties((DOCKER / f"broker-{broker_id}" / "server.properties").read_text())
        loopback = cl.broker_properties(broker_id, BROKERS, cl.loopback_address(broker_id, 29091),
                                        zookeeper_connect="127.0.0.1:2181", log_dir="/tmp/x")
        assert docker.keys() == loopback.keys()
        assert {k: v for k, v in docker.items() if k not in where} == \
               {k: v for k, v in loopback.items() if k not in where}
        assert docker["broker.id"] == str(broker_id)


def test_every_broker_config_loads_and_advertises_both_sides() -> None:
    doc = compose()
    services = doc["services"]
    assert isinstance(services, dict)
    ids = set()
    for broker_id in range(1, BROKERS + 1):
        name = f"broker-{broker_id}"
        service = services[name]
        config = KafkaConfig.load(DOCKER / name / "server.properties")
        ids.add(config.get_int("broker.id"))
        advertised = {e.listener_name: e for e in config.advertised_listeners}
        bound = {e.listener_name: e for e in config.listeners}
        assert advertised.keys() == bound.keys() == {"INTERNAL", "EXTERNAL"}
        # Brokers talk to each other over INTERNAL, advertised under the compose service name.
        assert config.inter_broker_listener_name == "INTERNAL"
        assert advertised["INTERNAL"].host == name and name in services
        assert service["hostname"] == name
        # The host reaches EXTERNAL at localhost on a port published 1:1, unique per broker.
        assert advertised["EXTERNAL"].host == "localhost"
        port = advertised["EXTERNAL"].port
        # ... and its /metrics (9308 in every container) on a host port of its own.
        assert service["ports"] == [f"{port}:{port}", f"{cl.docker_metrics_host_port(broker_id)}:9308"]
        assert config.get("metrics.listener") == "http://0.0.0.0:9308"
        assert bound["EXTERNAL"].port == port and bound["INTERNAL"].port == advertised["INTERNAL"].port
        # Containers bind every interface (loopback alone would refuse the other containers).
        assert bound["EXTERNAL"].host in ("", "0.0.0.0") and bound["INTERNAL"].host in ("", "0.0.0.0")
        # ZooKeeper by service name, and the broker starts only once it is healthy.
        zk_host, zk_port = (config.zookeeper_connect or "").split(":")
        assert zk_host in services and zk_port == "2181"
        assert service["depends_on"][zk_host]["condition"] == "service_healthy"
        assert "healthcheck" in services[zk_host]
        # The properties file is mounted where the image's entrypoint reads it; data goes to a named volume.
        mounts = dict(v.rsplit(":", 1)[0].split(":", 1) if v.endswith(":ro") else v.split(":", 1)
                      for v in service["volumes"])
        assert mounts[f"./{name}/server.properties"] == cl.DOCKER_PROPERTIES_PATH
        assert (DOCKER / name / "server.properties").exists()
        named = [src for src, dst in mounts.items() if dst == config.log_dirs[0]]
        assert len(named) == 1 and named[0] in doc["volumes"]
        assert (REPO / "docker" / service["build"]["context"] / service["build"]["dockerfile"]).resolve() \
            == DOCKER / "Dockerfile"
    assert ids == set(range(1, BROKERS + 1))
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert len(published) == len(set(published))


def test_every_named_volume_is_declared() -> None:
    doc = compose()
    used = {v.split(":", 1)[0] for s in doc["services"].values() for v in s.get("volumes", [])
            if not v.startswith(("./", "/"))}
    assert used == set(doc["volumes"])


def dockerfile_instructions() -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in (DOCKER / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "Dockerfile ends in a line continuation"
    return out


def test_dockerfile_builds_a_broker_image() -> None:
    instructions = dockerfile_instructions()
    known = {"FROM", "WORKDIR", "COPY", "RUN", "USER", "VOLUME", "EXPOSE", "STOPSIGNAL", "ENTRYPOINT",
             "ENV", "ARG", "LABEL", "CMD", "HEALTHCHECK"}
    assert all(k in known for k, _ in instructions), instructions
    assert instructions[0] == ("FROM", "python:3.11-slim-bookworm")
    # Exec form (JSON), so the broker is PID 1 and receives docker stop's SIGTERM.
    entrypoints = [json.loads(rest) for k, rest in instructions if k == "ENTRYPOINT"]
    assert entrypoints == [["sofakafka", "serve", cl.DOCKER_PROPERTIES_PATH]]
    assert ("STOPSIGNAL", "SIGTERM") in instructions
    # Every COPY source exists relative to the build context compose uses (the repository root).
    for k, rest in instructions:
        if k == "COPY":
            *sources, _dest = shlex.split(rest)
            for src in sources:
                assert (REPO / src).exists(), f"COPY {src}: not in the build context"
    runs = " ".join(rest for k, rest in instructions if k == "RUN")
    assert "pip install" in runs and " . " in f"{runs} "
    # The data directory is a volume owned by the user the broker runs as (not root).
    users = [rest for k, rest in instructions if k == "USER"]
    assert users and users[-1] not in ("root", "0")
    assert any(cl.DOCKER_DATA_DIR in rest for k, rest in instructions if k == "VOLUME")
    assert f"chown {users[-1]}:{users[-1]} {cl.DOCKER_DATA_DIR}" in runs
    exposed = {int(p) for k, rest in instructions if k == "EXPOSE" for p in rest.split()}
    for broker_id in range(1, BROKERS + 1):
        advertised = cl.docker_broker_properties(broker_id)["advertised.listeners"]
        for endpoint in advertised.split(","):
            assert int(endpoint.rsplit(":", 1)[1]) in exposed
    # The entrypoint's command is the one pyproject installs.
    assert 'sofakafka = "sofakafka.cli:main"' in (REPO / "pyproject.toml").read_text()


def test_the_sasl_ssl_overlay_loads_with_the_certificates_make_test_certs_writes(tmp_path: Path) -> None:
    """docker-compose.sasl-ssl.yml: every broker's SASL_SSL properties are accepted by the broker's own config
    and security set-up (TLS contexts from the certificates the script makes, SASL, the authorizer), and the
    overlay mounts exactly those files."""
    import runpy

    from sofakafka.broker.listener_security import BrokerSecurity

    certs = tmp_path / "certs"
    runpy.run_path(str(DOCKER / "make-test-certs.py"), run_name="make_test_certs")["main"](["x", str(certs)])
    assert {p.name for p in certs.iterdir()} == {"ca.pem", "broker-1.pem", "broker-2.pem", "broker-3.pem",
                                                 "client.properties"}
    overlay = yaml.safe_load((DOCKER / "docker-compose.sasl-ssl.yml").read_text())
    for broker_id in range(1, BROKERS + 1):
        volumes = overlay["services"][f"broker-{broker_id}"]["volumes"]
        assert f"./sasl-ssl/broker-{broker_id}.properties:/etc/sofakafka/server.properties:ro" in volumes
        assert "./sasl-ssl/certs:/etc/sofakafka/certs:ro" in volumes
        text = (DOCKER / "sasl-ssl" / f"broker-{broker_id}.properties").read_text()
        props = load_properties(text.replace("/etc/sofakafka/certs", str(certs)))
        config = KafkaConfig.from_properties(props)
        assert {e.security_protocol.value for e in config.listeners} == {"SASL_SSL"}
        security = BrokerSecurity(config)
        security.configure()
        assert security.authorizer is not None and security.inter_broker is not None
        assert security.inter_broker.protocol == "SASL_SSL" and security.inter_broker.username == "admin"
