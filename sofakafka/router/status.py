"""``sofakafka router status``: each rule's lag and the router processes sharing the rules, from the cluster.

The lag of a rule is the lag of the router group on the rule's source topic: for every partition, the log
end offset minus the offset the routers committed (the whole partition when nothing is committed yet), as
``kafka-consumer-groups.sh --describe`` counts it. Rules on the same source topic share one consumption and
so one lag. The processes are the members of the router group.
"""

from __future__ import annotations

from dataclasses import dataclass

from sofakafka.client.client import LATEST_TIMESTAMP, KafkaClient
from sofakafka.client.groups import GroupAdmin
from sofakafka.ldc import LdcModel, RoutingRules
from sofakafka.protocol.errors import ErrorCode


@dataclass(frozen=True)
class RuleStatus:
    name: str
    source: str
    targets: tuple[str, ...]
    lag: int | None
    """None when the source topic does not exist."""
    partitions: int


@dataclass(frozen=True)
class RouterStatus:
    group: str
    state: str
    members: tuple[tuple[str, str, str], ...]
    """(member id, client id, host) of each router process."""
    rules: tuple[RuleStatus, ...]


def router_status(client: KafkaClient, model: LdcModel, rules: RoutingRules, group: str) -> RouterStatus:
    admin = GroupAdmin(client)
    description = admin.describe_group(group)
    committed = admin.fetch_offsets(group) if description.error == ErrorCode.NONE else {}
    lags: dict[str, tuple[int | None, int]] = {}
    out: list[RuleStatus] = []
    for rule in rules.rules:
        source = rule.source_physical(model)
        if source not in lags:
            info = client.metadata([source]).topics.get(source)
            if info is None or info.error != ErrorCode.NONE:
                lags[source] = (None, 0)
            else:
                ends = client.list_offsets(source, {p: LATEST_TIMESTAMP for p in info.partitions})
                lag = 0
                for p, end in ends.items():
                    done = committed.get((source, p))
                    lag += max(0, end.offset - (done.offset if done is not None and done.offset >= 0 else 0))
                lags[source] = (lag, len(info.partitions))
        lag_value, partitions = lags[source]
        out.append(RuleStatus(rule.name, source, tuple(rule.target_physical(model, c) for c in rule.target_cells),
                              lag_value, partitions))
    members = tuple((m.member_id, m.client_id, m.client_host) for m in description.members)
    return RouterStatus(group, description.state, members, tuple(out))
