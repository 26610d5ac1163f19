#!/usr/bin/env bash
# Installs everything the tests need (apt, pip, npm) on a fresh Debian 12 machine and runs them.
# README.md names this script as THE test command; .ci/run calls exactly it.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
# python3-venv: the venv below; kcat: Debian's librdkafka-based client, a peer in tests/integration;
# nodejs/npm run kafkajs there; zookeeper (it pulls a Java runtime) is the real ZooKeeper of tests/cluster;
# maven resolves Apache Kafka's jars (clients, Streams, tools, the reference broker) for tests/interop and
# tests/conformance, and openjdk-17-jdk-headless brings javac for our Java scenarios (interop/java);
# chromium and chromium-driver are the headless browser (driven by selenium) of the web console's tests;
# iproute2 (ip) makes the network namespaces of tests/chaos; util-linux (mount, prlimit) is in every Debian.
APT_PACKAGES=(python3-venv kcat nodejs zookeeper maven openjdk-17-jdk-headless chromium chromium-driver iproute2)
# npm is its own Debian package, but a nodejs from elsewhere bundles it and would conflict with Debian's.
command -v npm >/dev/null 2>&1 || APT_PACKAGES+=(npm)
if [ ${#APT_PACKAGES[@]} -gt 0 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test]'

# ---- spark (issue 17): pyspark, pyarrow and pandas (the `spark` extra, kept out of the broker's install) and
# Spark's Kafka connector with the jars it needs beyond pyspark's, resolved from Maven Central by
# interop/spark/pom.xml into a per-machine cache folder that sofakafka.pipelines.connector hands to Spark.
# Maven runs only when that folder was not filled from this very pom (a copy of it marks a complete fill).
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[spark]'
SPARK_JARS=$(.venv/bin/python -c 'from sofakafka.pipelines.connector import jars_dir; print(jars_dir())')
if ! cmp -s interop/spark/pom.xml "$SPARK_JARS/.resolved-from-pom.xml"; then
  mkdir -p "$SPARK_JARS"
  mvn -q -B -f interop/spark/pom.xml dependency:copy-dependencies -Dsofakafka.spark.jars="$SPARK_JARS"
  cp interop/spark/pom.xml "$SPARK_JARS/.resolved-from-pom.xml"
fi
# ---- end spark

# kafkajs for tests/integration, pinned by tests/js/package-lock.json; `npm ci` only when the lockfile
# changed since the last install, so a warm machine pays nothing.
if ! cmp -s tests/js/package-lock.json tests/js/node_modules/.sofakafka-installed-lock; then
  (cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/js/package-lock.json tests/js/node_modules/.sofakafka-installed-lock
fi

# Apache Kafka's jars from Maven Central, one folder per classpath under interop/java/target/lib/ (see
# interop/java/pom.xml). Maven fills its local repository once per machine; the stamp (a hash of every pom)
# makes a warm run skip Maven entirely.
stamp=interop/java/target/lib/.resolved
poms_hash=$(cat $(find interop/java -name pom.xml -not -path '*/target/*' | sort) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$poms_hash" ]; then
  rm -rf interop/java/target/lib
  mvn -q -B -Dstyle.color=never -f interop/java/pom.xml process-resources
  echo "$poms_hash" > "$stamp"
fi

# franz-go (the Go client) for tests/interop/test_other_clients.py: interop/go's module, from the Go module proxy
# (go.sum pins it), built once here; Go's own caches make a warm build a no-op. The machine's Go must be 1.26+
# (interop/go/go.mod); Debian 12's golang-go is older, so it is installed only where there is no Go at all, and
# the franz-go test then says why it cannot build.
command -v go >/dev/null 2>&1 || { $SUDO apt-get update -qq; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go; }
(cd interop/go && go build -o bin/franzgo .) || echo "warning: interop/go did not build (Go 1.26+ needed); tests/interop/test_other_clients.py will say so"

echo "== ruff";         .venv/bin/ruff check sofakafka tests bench tools
echo "== mypy";         .venv/bin/mypy
echo "== import-linter"; .venv/bin/lint-imports
echo "== pytest"
.venv/bin/python -m pytest -q "$@"
