"""Spark's Kafka connector for sofakafka: which release, where its jars are, and a SparkSession that has them.

The connector is Spark's own ``org.apache.spark:spark-sql-kafka-0-10_2.13``, at exactly the version of the
installed pyspark (:data:`SPARK_VERSION`, pinned in pyproject.toml's ``spark`` extra). Its jars come from
Maven Central in one of two ways:

- resolved once per machine by ``interop/spark/pom.xml`` into a cache folder (``scripts/test.sh`` does it;
  :func:`jars_dir` says where), and handed to Spark as ``spark.jars``: no network at job time;
- or, on a machine that reaches Maven Central, by Spark itself: ``spark.jars.packages`` set to
  :data:`CONNECTOR_PACKAGE` (what ``spark-submit --packages`` does), used when the cache folder is empty.

Under ``spark-submit`` the user's ``--master``, ``--jars`` and ``--packages`` rule and :func:`spark_session`
adds none of its own. Nothing here imports pyspark at module level: the broker installs without it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_VERSION = "4.2.0"
SCALA_BINARY_VERSION = "2.13"
CONNECTOR_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{SPARK_VERSION}"
CONNECTOR_JAR = f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}-{SPARK_VERSION}.jar"
JARS_ENV = "SOFAKAFKA_SPARK_JARS"
DEFAULT_LOCAL_MASTER = "local[2]"
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")

log = logging.getLogger(__name__)


def jars_dir() -> Path:
    """``$SOFAKAFKA_SPARK_JARS`` if set, else ``~/.cache/sofakafka/spark-kafka-<version>`` (XDG_CACHE_HOME
    honoured): the folder ``scripts/test.sh`` fills from interop/spark/pom.xml."""
    explicit = os.environ.get(JARS_ENV)
    if explicit:
        return Path(explicit).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sofakafka" / f"spark-kafka-{SPARK_VERSION}"


def connector_jars(directory: Path | None = None) -> list[Path]:
    """The jars of the cache folder, or [] when the connector's own jar is not there (not resolved yet)."""
    directory = jars_dir() if directory is None else directory
    if not (directory / CONNECTOR_JAR).is_file():
        return []
    return sorted(directory.glob("*.jar"))


def resolve_command(directory: Path | None = None) -> str:
    """The shell command that fills the cache folder (what scripts/test.sh runs), for error messages."""
    directory = jars_dir() if directory is None else directory
    return f"mvn -q -B -f interop/spark/pom.xml dependency:copy-dependencies -Dsofakafka.spark.jars={directory}"


def under_spark_submit() -> bool:
    """True when this Python process was started by ``spark-submit`` (the JVM is up and chose the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_conf(*, master: str | None = None, jars: str = "auto", ui: bool = False,
                 shuffle_partitions: int = 4) -> dict[str, str]:
    """The settings :func:`spark_session` applies, as a plain dict (tests and docs read it).

    ``jars``: ``"auto"`` uses the cache folder when it holds the connector and ``spark.jars.packages``
    otherwise; ``"cache"`` insists on the cache folder (FileNotFoundError naming the command that fills it);
    ``"packages"`` always lets Spark fetch :data:`CONNECTOR_PACKAGE`; ``"none"`` adds nothing (the caller's
    spark-submit did)."""
    conf: dict[str, str] = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "true" if ui else "false",
        # Kafka sink and source: the session's time zone decides how window boundaries print, so pin it.
        "spark.sql.session.timeZone": "UTC",
    }
    if under_spark_submit():
        return conf
    conf["spark.master"] = master or DEFAULT_LOCAL_MASTER
    java_opts = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"
    conf["spark.driver.extraJavaOptions"] = java_opts
    conf["spark.executor.extraJavaOptions"] = java_opts
    if jars == "none":
        return conf
    found = connector_jars() if jars in ("auto", "cache") else []
    if found:
        conf["spark.jars"] = ",".join(str(p) for p in found)
    elif jars == "cache":
        raise FileNotFoundError(
            f"Spark's Kafka connector {CONNECTOR_PACKAGE} is not in {jars_dir()}: run "
            f"`{resolve_command()}` from the repository root (scripts/test.sh does), or set {JARS_ENV}")
    else:
        conf["spark.jars.packages"] = CONNECTOR_PACKAGE
    return conf


def spark_session(app_name: str, *, master: str | None = None, jars: str = "auto", ui: bool = False,
                  shuffle_partitions: int = 4, conf: Mapping[str, str] | None = None,
                  log_level: str = "WARN") -> SparkSession:
    """A SparkSession that can ``format("kafka")``: local[2] by default, quiet, the connector on its classpath.

    Under spark-submit the master and the jars come from spark-submit's command line instead. A SparkSession
    already running in this process is returned as it is (Spark allows one per JVM; its jars cannot change)."""
    from pyspark.sql import SparkSession

    settings = session_conf(master=master, jars=jars, ui=ui, shuffle_partitions=shuffle_partitions)
    settings.update(conf or {})
    if not under_spark_submit() and settings.get("spark.master", "").startswith("local"):
        # Spark otherwise warns that the host name resolves to loopback and picks another interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if "spark.jars.packages" in settings:
        log.info("connector jars not in %s: Spark fetches %s from Maven Central", jars_dir(), CONNECTOR_PACKAGE)
    builder = SparkSession.builder.appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
