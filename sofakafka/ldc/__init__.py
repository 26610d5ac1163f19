"""LDC (logical data centre) as data: cells and names, unit headers, subscription filters, routing rules.

Pure and sans-IO, like ``protocol/``: nothing here opens a socket, a file handle it was not given, or the
metadata store. Three layers use it, which is why it sits below all of them:

* ``broker/`` validates what an admin writes (the model and rules kept as cluster-wide dynamic configs, a
  group's filter kept as its config) and applies a group's :class:`~sofakafka.ldc.filters.RecordFilter` to
  the records a member fetches;
* ``router/`` (a client of the cluster) maps logical names to physical ones, sets the unit headers and
  copies records between cells by :mod:`~sofakafka.ldc.rules`;
* ``cli/`` loads files (TOML or JSON) and shows what is stored.

See docs/ldc.md for the model and the brief's bill example.
"""

from sofakafka.ldc.filters import FilterError, RecordFilter
from sofakafka.ldc.model import (
    UNIT_ORIUNIT,
    UNIT_TARGET_C,
    UNIT_TARGET_G,
    UNIT_TARGET_R,
    Cell,
    LdcError,
    LdcModel,
    PhysicalName,
    SubscriptionMode,
    Zone,
)
from sofakafka.ldc.rules import ROUTER_PATH_HEADER, RoutingRule, RoutingRules

__all__ = [
    "ROUTER_PATH_HEADER",
    "UNIT_ORIUNIT",
    "UNIT_TARGET_C",
    "UNIT_TARGET_G",
    "UNIT_TARGET_R",
    "Cell",
    "FilterError",
    "LdcError",
    "LdcModel",
    "PhysicalName",
    "RecordFilter",
    "RoutingRule",
    "RoutingRules",
    "SubscriptionMode",
    "Zone",
]
