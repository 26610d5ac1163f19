"""Broker start-up writes: top-level paths, the cluster id and the broker registration, in 2.6's shapes."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

from sofakafka.controller import zk_paths
from sofakafka.controller.embedded import EmbeddedMetadataServer, EmbeddedMetadataStore
from sofakafka.controller.registration import (
    BrokerIdInUseError,
    create_top_level_paths,
    get_or_create_cluster_id,
    live_brokers,
    make_registration,
    register_broker,
)
from sofakafka.controller.zk_data import BrokerEndpoint

from .conftest import plaintext


def test_top_level_paths_are_kafkas_and_creation_is_idempotent(store: EmbeddedMetadataStore) -> None:
    create_top_level_paths(store)
    create_top_level_paths(store)
    for path in zk_paths.PERSISTENT_ZK_PATHS:
        data, _ = store.get(path)
        assert data == b""
    assert store.exists("/config/brokers") is not None and store.exists("/admin/delete_topics") is not None


def test_cluster_id_is_22_url_safe_characters_and_stable(meta_dir: Path) -> None:
    store = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    cluster_id = get_or_create_cluster_id(store)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    assert json.loads(store.get("/cluster/id")[0]) == {"version": "1", "id": cluster_id}
    assert get_or_create_cluster_id(store, "ignored-once-set") == cluster_id
    store.close()
    store = EmbeddedMetadataStore.open(meta_dir, fsync=False)
    try:
        assert get_or_create_cluster_id(store) == cluster_id
    finally:
        store.close()


def test_a_fresh_tree_adopts_the_proposed_cluster_id(store: EmbeddedMetadataStore) -> None:
    assert get_or_create_cluster_id(store, "AAAAAAAAAAAAAAAAAAAAAA") == "AAAAAAAAAAAAAAAAAAAAAA"


def test_registration_is_an_ephemeral_version_4_znode(store: EmbeddedMetadataStore) -> None:
    endpoints = [
        BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
        BrokerEndpoint("INTERNAL", "broker-1.local", 9093, "SASL_SSL"),
    ]
    epoch = register_broker(store, make_registration(1, endpoints, rack="eu-1a", timestamp_ms=1596000000000))
    data, stat = store.get("/brokers/ids/1")
    assert json.loads(data) == {
        "version": 4,
        "host": "127.0.0.1",
        "port": 9092,
        "endpoints": ["PLAINTEXT://127.0.0.1:9092", "INTERNAL://broker-1.local:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SASL_SSL"},
        "jmx_port": -1,
        "timestamp": "1596000000000",
        "rack": "eu-1a",
    }
    assert stat.ephemeral_owner == store.session_id
    # The broker epoch is the registration's creation zxid.
    assert epoch == stat.czxid
    assert live_brokers(store)[1].endpoints == tuple(endpoints)


def test_registration_without_rack_has_no_rack_field(store: EmbeddedMetadataStore) -> None:
    register_broker(store, make_registration(3, plaintext()))
    assert "rack" not in json.loads(store.get("/brokers/ids/3")[0])


def test_a_duplicate_broker_id_is_refused_and_a_retry_by_the_same_session_is_not(tmp_path: Path) -> None:
    with EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False) as server:
        first, second = server.connect(), server.connect()
        epoch = register_broker(first, make_registration(1, plaintext()))
        assert register_broker(first, make_registration(1, plaintext())) == epoch
        with pytest.raises(BrokerIdInUseError, match="broker id 1 is already registered"):
            register_broker(second, make_registration(1, plaintext(9093)))
        # Once the first broker's session ends, the id is free again, with a new epoch.
        first.close()
        assert register_broker(second, make_registration(1, plaintext(9093))) > epoch


def test_a_registration_of_our_own_lost_session_is_waited_out_but_only_for_so_long(tmp_path: Path) -> None:
    # After a session renewal the old session's registration may linger until the server expires it. Ours is
    # waited out; if it outlasts the wait it is refused like any other (and the renewal tries again later).
    with EmbeddedMetadataServer.open(tmp_path / "meta", fsync=False) as server:
        old, new = server.connect(), server.connect()
        epoch = register_broker(old, make_registration(1, plaintext()))
        with pytest.raises(BrokerIdInUseError):
            register_broker(new, make_registration(1, plaintext()), stale_session_ids={old.session_id},
                            stale_wait_s=0.05)
        other = server.connect()
        with pytest.raises(BrokerIdInUseError):
            # Not one of our sessions: a duplicate broker id, whatever the wait.
            register_broker(new, make_registration(1, plaintext()), stale_session_ids={other.session_id},
                            stale_wait_s=60)
        closer = threading.Timer(0.2, old.close)
        closer.start()
        try:
            renewed = register_broker(new, make_registration(1, plaintext()), stale_session_ids={old.session_id},
                                      stale_wait_s=60)
        finally:
            closer.join()
        assert renewed > epoch
        stat = new.exists("/brokers/ids/1")
        assert stat is not None and stat.ephemeral_owner == new.session_id
