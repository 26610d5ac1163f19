"""Apache Kafka itself as the yardstick: the reference broker, Kafka's tools and Java clients, for any test.

``tests/reference/fixtures.py`` holds the pytest fixtures (made visible to every test by ``tests/conftest.py``):
``reference_kafka`` (Apache Kafka 2.6, one per module), ``sofakafka_broker`` (sofakafka with the same
settings, one per module), ``scenario_jvms`` (the Java scenario runner, one JVM per client version per
module) and ``kafka_tool`` (run one of Kafka's command-line tools). ``java.py`` and ``kafka.py`` are the
plain helpers under them.
"""
