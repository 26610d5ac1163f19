"""The web console: a client of the cluster (over ``sofakafka.client``) serving pages for brokers, topics,
consumer groups, message query, message trace and backlog alarms. See docs/console.md."""
