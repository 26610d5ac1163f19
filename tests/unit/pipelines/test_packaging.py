"""Spark stays an extra: the broker's modules never import pyspark, pandas or pyarrow, the pipelines' own
modules only lazily, and the three places that name Spark's version agree."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from sofakafka.pipelines import connector

REPO = Path(__file__).resolve().parents[3]
HEAVY = ("pyspark", "pandas", "pyarrow")


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at module level) for every import in a file."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno, id(node) in top))
    return found


def test_only_pipelines_imports_spark_pandas_or_pyarrow_and_only_inside_functions() -> None:
    offenders = []
    for path in sorted((REPO / "sofakafka").rglob("*.py")):
        inside_pipelines = "pipelines" in path.relative_to(REPO / "sofakafka").parts
        for module, line, at_top in _imports(path):
            if module.split(".")[0] not in HEAVY:
                continue
            if not inside_pipelines or at_top:
                offenders.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    # `if TYPE_CHECKING:` blocks are at module level in the AST but never run: allow exactly those.
    offenders = [o for o in offenders if not _under_type_checking(o)]
    assert not offenders, offenders


def _under_type_checking(offender: str) -> bool:
    path, line = offender.split(" ")[0].rsplit(":", 1)
    tree = ast.parse((REPO / path).read_text())
    for node in tree.body:
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                and node.lineno <= int(line) <= (node.end_lineno or node.lineno)):
            return True
    return False


def test_the_broker_the_cli_and_the_pipelines_modules_import_without_spark_installed() -> None:
    code = (
        "import sys\n"
        "for name in ('pyspark', 'pandas', 'pyarrow'): sys.modules[name] = None\n"
        "import sofakafka.cli, sofakafka.broker.broker, sofakafka.client\n"
        "import sofakafka.pipelines, sofakafka.pipelines.__main__, sofakafka.pipelines.connector\n"
        "import sofakafka.pipelines.naming, sofakafka.pipelines.generator, sofakafka.pipelines.common\n"
        "import sofakafka.pipelines.log_analytics, sofakafka.pipelines.stream_analytics, sofakafka.pipelines.demo\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_pyspark_pin_connector_version_and_pom_agree() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    pins = [e for e in extras if e.startswith("pyspark")]
    assert pins == [f"pyspark=={connector.SPARK_VERSION}"]
    pom = (REPO / "interop" / "spark" / "pom.xml").read_text()
    assert re.search(r"<spark\.version>([^<]+)</spark\.version>", pom)[1] == connector.SPARK_VERSION  # type: ignore[index]
    assert re.search(r"<scala\.binary\.version>([^<]+)<", pom)[1] == connector.SCALA_BINARY_VERSION  # type: ignore[index]
    assert connector.CONNECTOR_PACKAGE == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{connector.SPARK_VERSION}"


def test_the_jar_folder_is_the_env_override_or_a_versioned_cache_folder() -> None:
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv(connector.JARS_ENV, "/opt/jars")
        assert connector.jars_dir() == Path("/opt/jars")
        mp.delenv(connector.JARS_ENV)
        mp.setenv("XDG_CACHE_HOME", "/var/cache/me")
        assert connector.jars_dir() == Path(f"/var/cache/me/sofakafka/spark-kafka-{connector.SPARK_VERSION}")
    finally:
        mp.undo()


def test_session_settings_use_the_cache_when_filled_and_packages_otherwise(tmp_path: Path) -> None:
    mp = pytest.MonkeyPatch()
    try:
        mp.delenv("PYSPARK_GATEWAY_PORT", raising=False)
        mp.setenv(connector.JARS_ENV, str(tmp_path))
        conf = connector.session_conf()
        assert conf["spark.jars.packages"] == connector.CONNECTOR_PACKAGE and "spark.jars" not in conf
        assert conf["spark.master"] == "local[2]" and conf["spark.ui.showConsoleProgress"] == "false"
        with pytest.raises(FileNotFoundError, match="dependency:copy-dependencies"):
            connector.session_conf(jars="cache")
        for name in (connector.CONNECTOR_JAR, "kafka-clients-3.9.2.jar"):
            (tmp_path / name).write_bytes(b"")
        conf = connector.session_conf(master="spark://h:7077")
        assert conf["spark.jars"].split(",") == sorted(str(p) for p in tmp_path.glob("*.jar"))
        assert conf["spark.master"] == "spark://h:7077" and "spark.jars.packages" not in conf
        # Under spark-submit, its command line decides master and jars.
        mp.setenv("PYSPARK_GATEWAY_PORT", "12345")
        conf = connector.session_conf()
        assert "spark.master" not in conf and "spark.jars" not in conf and "spark.jars.packages" not in conf
    finally:
        mp.undo()
