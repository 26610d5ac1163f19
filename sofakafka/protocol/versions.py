"""Which versions of each API every Kafka release from 0.10.0 to 2.6 advertised in ApiVersions.

Written the way franz-go's kversion writes it: the first release lists its APIs, and every later release is
the previous one plus the handful of keys it added or bumped. A reviewer checks a release by reading one
small dict, and a mistake in one release cannot silently disagree with its neighbours.

Public API:

- ``RELEASES``: release names, oldest first (``"0.10.0"`` ... ``"2.6"``; one per minor line, because every
  patch release of a line advertises the same ranges as its ``.0``).
- ``versions_for(release) -> dict[int, tuple[int, int]]``: api key -> (min, max) as that release's broker
  advertised it. A key the release lacks is absent.
- ``changes(release) -> dict[int, tuple[int, int]]``: only the keys whose range that release changed.
- ``BROKER_2_6``: ``versions_for("2.6")``, what a 2.6 broker accepts.

Keys are plain ints (the wire's api key); names live in ``sofakafka.protocol.api.ApiKey``. This module
imports nothing from the codec so the broker can consult it before any message class is loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# A delta value is the new max version (min unchanged, 0 for a key new in the release), or an explicit
# (min, max) where the minimum moves too.
_Delta = Mapping[int, int | tuple[int, int]]

_DELTAS: tuple[tuple[str, _Delta], ...] = (
    (
        "0.10.0",
        {
            0: 2,  # Produce
            1: 2,  # Fetch
            2: 0,  # ListOffsets (then called Offsets)
            3: 1,  # Metadata
            4: 0,  # LeaderAndIsr
            5: 0,  # StopReplica
            6: 2,  # UpdateMetadata
            # ControlledShutdown v0 was never advertised by these releases: its slot in Protocol.java was null.
            7: (1, 1),
            8: 2,  # OffsetCommit
            9: 1,  # OffsetFetch
            10: 0,  # FindCoordinator (then called GroupCoordinator)
            11: 0,  # JoinGroup
            12: 0,  # Heartbeat
            13: 0,  # LeaveGroup
            14: 0,  # SyncGroup
            15: 0,  # DescribeGroups
            16: 0,  # ListGroups
            17: 0,  # SaslHandshake
            18: 0,  # ApiVersions
        },
    ),
    (
        "0.10.1",
        {
            1: 3,  # Fetch: response-level max bytes (KIP-74)
            2: 1,  # ListOffsets: timestamp lookup (KIP-79)
            3: 2,  # Metadata: cluster id (KIP-78)
            11: 1,  # JoinGroup: rebalance timeout (KIP-62)
            19: 0,  # CreateTopics (KIP-4)
            20: 0,  # DeleteTopics (KIP-4)
        },
    ),
    (
        "0.10.2",
        {
            6: 3,  # UpdateMetadata: listener names
            9: 2,  # OffsetFetch: all partitions, top-level error
            19: 1,  # CreateTopics: validate_only
        },
    ),
    (
        # Exactly-once (KIP-98) and admin ACL/config APIs (KIP-133, KIP-140): record batch v2 arrives.
        "0.11.0",
        {
            0: 3,  # Produce
            1: 5,  # Fetch
            2: 2,  # ListOffsets
            3: 4,  # Metadata
            8: 3,  # OffsetCommit
            9: 3,  # OffsetFetch
            10: 1,  # FindCoordinator
            11: 2,  # JoinGroup
            12: 1,  # Heartbeat
            13: 1,  # LeaveGroup
            14: 1,  # SyncGroup
            15: 1,  # DescribeGroups
            16: 1,  # ListGroups
            18: 1,  # ApiVersions
            19: 2,  # CreateTopics
            20: 1,  # DeleteTopics
            21: 0,  # DeleteRecords
            22: 0,  # InitProducerId
            23: 0,  # OffsetForLeaderEpoch
            24: 0,  # AddPartitionsToTxn
            25: 0,  # AddOffsetsToTxn
            26: 0,  # EndTxn
            27: 0,  # WriteTxnMarkers
            28: 0,  # TxnOffsetCommit
            29: 0,  # DescribeAcls
            30: 0,  # CreateAcls
            31: 0,  # DeleteAcls
            32: 0,  # DescribeConfigs
            33: 0,  # AlterConfigs
        },
    ),
    (
        "1.0",
        {
            0: 5,  # Produce
            1: 6,  # Fetch
            3: 5,  # Metadata: offline replicas
            4: 1,  # LeaderAndIsr
            6: 4,  # UpdateMetadata
            7: (0, 1),  # ControlledShutdown: v0 advertised from 1.0 on
            17: 1,  # SaslHandshake: SaslAuthenticate framing (KIP-152)
            34: 0,  # AlterReplicaLogDirs (KIP-113)
            35: 0,  # DescribeLogDirs (KIP-113)
            36: 0,  # SaslAuthenticate (KIP-152)
            37: 0,  # CreatePartitions (KIP-195)
        },
    ),
    (
        "1.1",
        {
            1: 7,  # Fetch: incremental fetch sessions (KIP-227)
            32: 1,  # DescribeConfigs: synonyms
            38: 0,  # CreateDelegationToken (KIP-48)
            39: 0,  # RenewDelegationToken
            40: 0,  # ExpireDelegationToken
            41: 0,  # DescribeDelegationToken
            42: 0,  # DeleteGroups (KIP-229)
        },
    ),
    (
        # KIP-219: throttle time moves ahead of the response so almost every API gains a version.
        "2.0",
        {
            0: 6,  # Produce
            1: 8,  # Fetch
            2: 3,  # ListOffsets
            3: 6,  # Metadata
            8: 4,  # OffsetCommit
            9: 4,  # OffsetFetch
            10: 2,  # FindCoordinator
            11: 3,  # JoinGroup
            12: 2,  # Heartbeat
            13: 2,  # LeaveGroup
            14: 2,  # SyncGroup
            15: 2,  # DescribeGroups
            16: 2,  # ListGroups
            18: 2,  # ApiVersions
            19: 3,  # CreateTopics
            20: 2,  # DeleteTopics
            21: 1,  # DeleteRecords
            22: 1,  # InitProducerId
            23: 1,  # OffsetForLeaderEpoch
            24: 1,  # AddPartitionsToTxn
            25: 1,  # AddOffsetsToTxn
            26: 1,  # EndTxn
            28: 1,  # TxnOffsetCommit
            29: 1,  # DescribeAcls: prefixed patterns (KIP-290)
            30: 1,  # CreateAcls
            31: 1,  # DeleteAcls
            32: 2,  # DescribeConfigs
            33: 1,  # AlterConfigs
            34: 1,  # AlterReplicaLogDirs
            35: 1,  # DescribeLogDirs
            37: 1,  # CreatePartitions
            38: 1,  # CreateDelegationToken
            39: 1,  # RenewDelegationToken
            40: 1,  # ExpireDelegationToken
            41: 1,  # DescribeDelegationToken
            42: 1,  # DeleteGroups
        },
    ),
    (
        # Leader epochs reach clients (KIP-320) and zstd arrives (KIP-110).
        "2.1",
        {
            0: 7,  # Produce
            1: 10,  # Fetch
            2: 4,  # ListOffsets
            3: 7,  # Metadata
            8: 6,  # OffsetCommit
            9: 5,  # OffsetFetch
            20: 3,  # DeleteTopics
            23: 2,  # OffsetForLeaderEpoch
            28: 2,  # TxnOffsetCommit
        },
    ),
    (
        "2.2",
        {
            2: 5,  # ListOffsets
            4: 2,  # LeaderAndIsr: broker epoch (KIP-380)
            5: 1,  # StopReplica
            6: 5,  # UpdateMetadata
            7: 2,  # ControlledShutdown
            11: 4,  # JoinGroup: MEMBER_ID_REQUIRED (KIP-394)
            36: 1,  # SaslAuthenticate: session lifetime (KIP-368)
            43: 0,  # ElectLeaders (then ElectPreferredLeaders, KIP-183)
        },
    ),
    (
        # Static membership (KIP-345).
        "2.3",
        {
            1: 11,  # Fetch: rack id (KIP-392)
            3: 8,  # Metadata
            8: 7,  # OffsetCommit
            11: 5,  # JoinGroup
            12: 3,  # Heartbeat
            14: 3,  # SyncGroup
            15: 3,  # DescribeGroups
            23: 3,  # OffsetForLeaderEpoch
            44: 0,  # IncrementalAlterConfigs (KIP-339)
        },
    ),
    (
        # Flexible versions (KIP-482) for most generated messages, and ApiVersions v3 (KIP-511).
        "2.4",
        {
            0: 8,  # Produce
            3: 9,  # Metadata
            4: 4,  # LeaderAndIsr
            5: 2,  # StopReplica
            6: 6,  # UpdateMetadata
            7: 3,  # ControlledShutdown
            8: 8,  # OffsetCommit
            9: 6,  # OffsetFetch
            10: 3,  # FindCoordinator
            11: 6,  # JoinGroup
            12: 4,  # Heartbeat
            13: 4,  # LeaveGroup
            14: 4,  # SyncGroup
            15: 5,  # DescribeGroups
            16: 3,  # ListGroups
            18: 3,  # ApiVersions
            19: 5,  # CreateTopics
            20: 4,  # DeleteTopics
            22: 2,  # InitProducerId
            38: 2,  # CreateDelegationToken
            42: 2,  # DeleteGroups
            43: 2,  # ElectLeaders
            44: 1,  # IncrementalAlterConfigs
            45: 0,  # AlterPartitionReassignments (KIP-455)
            46: 0,  # ListPartitionReassignments (KIP-455)
            47: 0,  # OffsetDelete (KIP-496)
        },
    ),
    (
        "2.5",
        {
            9: 7,  # OffsetFetch: require stable (KIP-447)
            11: 7,  # JoinGroup: protocol type/name (KIP-559)
            14: 5,  # SyncGroup
            22: 3,  # InitProducerId: epoch bump (KIP-360)
            28: 3,  # TxnOffsetCommit: group metadata (KIP-447)
            29: 2,  # DescribeAcls
            30: 2,  # CreateAcls
            31: 2,  # DeleteAcls
            36: 2,  # SaslAuthenticate
            37: 2,  # CreatePartitions
            39: 2,  # RenewDelegationToken
            40: 2,  # ExpireDelegationToken
            41: 2,  # DescribeDelegationToken
        },
    ),
    (
        "2.6",
        {
            5: 3,  # StopReplica: per-partition leader epoch
            16: 4,  # ListGroups: states filter (KIP-518)
            21: 2,  # DeleteRecords
            32: 3,  # DescribeConfigs: documentation and types (KIP-569)
            35: 2,  # DescribeLogDirs
            48: 0,  # DescribeClientQuotas (KIP-546)
            49: 0,  # AlterClientQuotas (KIP-546)
        },
    ),
)


def _build() -> dict[str, Mapping[int, tuple[int, int]]]:
    tables: dict[str, Mapping[int, tuple[int, int]]] = {}
    current: dict[int, tuple[int, int]] = {}
    for release, delta in _DELTAS:
        for api_key, change in delta.items():
            if isinstance(change, tuple):
                current[api_key] = change
            else:
                low = current[api_key][0] if api_key in current else 0
                current[api_key] = (low, change)
        tables[release] = MappingProxyType(dict(sorted(current.items())))
    return tables


_TABLES = _build()
_CHANGES = {
    release: MappingProxyType({api_key: _TABLES[release][api_key] for api_key in sorted(delta)})
    for release, delta in _DELTAS
}

RELEASES: tuple[str, ...] = tuple(release for release, _ in _DELTAS)


def versions_for(release: str) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) advertised by ``release`` (a name from ``RELEASES``); a fresh dict each call."""
    try:
        return dict(_TABLES[release])
    except KeyError:
        raise ValueError(f"unknown Kafka release {release!r}; known: {', '.join(RELEASES)}") from None


def changes(release: str) -> dict[int, tuple[int, int]]:
    """Only the keys whose advertised range ``release`` changed relative to the release before it."""
    try:
        return dict(_CHANGES[release])
    except KeyError:
        raise ValueError(f"unknown Kafka release {release!r}; known: {', '.join(RELEASES)}") from None


BROKER_2_6: Mapping[int, tuple[int, int]] = _TABLES["2.6"]
