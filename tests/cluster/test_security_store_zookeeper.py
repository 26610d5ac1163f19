"""The security store's tests (tests/unit/security/test_store.py) run unchanged against a real ZooKeeper."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sofakafka.controller.store import MetadataStore
from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from tests.cluster.conftest import ZooKeeperServer
from tests.unit.security import test_store as embedded
from tests.unit.security import test_token_store as tokens


@pytest.fixture
def sessions(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[Callable[[], MetadataStore]]:
    opened: list[MetadataStore] = []

    def make() -> MetadataStore:
        s = ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


test_a_scram_user_written_through_one_broker_reaches_the_other = (
    embedded.test_a_scram_user_written_through_one_broker_reaches_the_other)
test_other_user_config_keys_are_kept = embedded.test_other_user_config_keys_are_kept
test_acls_are_stored_as_kafka_stores_them_and_reach_every_broker = (
    embedded.test_acls_are_stored_as_kafka_stores_them_and_reach_every_broker)
test_changes_written_by_kafkas_own_tools_are_picked_up = embedded.test_changes_written_by_kafkas_own_tools_are_picked_up
test_everything_is_loaded_at_start_and_old_notifications_are_purged = (
    embedded.test_everything_is_loaded_at_start_and_old_notifications_are_purged)
test_client_quotas_are_stored_as_kafka_stores_them_and_reach_every_broker = (
    embedded.test_client_quotas_are_stored_as_kafka_stores_them_and_reach_every_broker)
test_client_quotas_written_by_kafkas_own_tools_are_picked_up = (
    embedded.test_client_quotas_written_by_kafkas_own_tools_are_picked_up)

test_a_token_created_through_one_broker_is_known_to_the_other_at_once = (
    tokens.test_a_token_created_through_one_broker_is_known_to_the_other_at_once)
test_renew_and_expire_reach_every_broker_and_are_refused_as_kafka_refuses_them = (
    tokens.test_renew_and_expire_reach_every_broker_and_are_refused_as_kafka_refuses_them)
test_the_expiry_scan_removes_tokens_past_their_expiry_or_max_everywhere = (
    tokens.test_the_expiry_scan_removes_tokens_past_their_expiry_or_max_everywhere)
test_tokens_written_by_kafka_are_loaded_at_start_and_followed = (
    tokens.test_tokens_written_by_kafka_are_loaded_at_start_and_followed)
