"""Cluster metadata: the MetadataStore (embedded or ZooKeeper) and, later, the controller on top of it."""
