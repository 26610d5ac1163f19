"""Sans-IO Kafka wire protocol: primitives, headers, messages of every API, record formats."""
