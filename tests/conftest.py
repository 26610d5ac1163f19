import os

from hypothesis import HealthCheck, settings

# CI gets more examples than a developer's quick loop; both stay bounded.
settings.register_profile("ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Apache Kafka as the reference (issue 20): the reference broker, sofakafka with the same settings, the Java
# scenario JVMs and Kafka's tools, for any test that asks for them by name.
from tests.reference.fixtures import (  # noqa: E402, F401
    kafka_tool,
    reference_kafka,
    reference_zookeeper,
    scenario_jvms,
    sofakafka_broker,
)
