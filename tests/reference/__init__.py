"""Apache Kafka itself as the yardstick: the reference broker, Kafka's tools and Java clients, for any test.

``tests/reference/fixtures.py`` holds the pytest fixtures (made visible to every test by ``tests/conftest.py``):
``interop_brokers`` (sofakafka and Apache Kafka 2.6 with the same settings, shared by tests/interop for the
session), ``compared_brokers`` with ``reference_kafka`` and ``sofakafka_broker`` (a fresh pair for one
module), ``scenario_jvms`` (the Java scenario runner, one JVM per client version for the session) and
``kafka_tool`` (Kafka's command-line tools, run in one JVM per module). ``scenarios.py`` declares Java
scenarios on tests and starts a module's together; ``java.py`` and ``kafka.py`` are the plain helpers under
them.
"""
