"""The embedded store's own semantic tests, run unchanged against a ZooKeeper session.

Each test below is the embedded store's function itself, collected here with this module's ``store``
fixture, so both backends answer to one text. Left out, because real ZooKeeper differs and the difference
is reported rather than papered over: sequential names after a delete (ZooKeeper counts creations only,
see ``ZooKeeperStoreMachine._apply``) and the largest accepted znode (ZooKeeper's limit is on the whole
request, see ``test_data_the_server_would_drop_the_connection_for_is_refused_up_front``). Durability and
crash tests are about the embedded store's files and have no ZooKeeper counterpart here.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sofakafka.controller.zookeeper import ZooKeeperMetadataStore
from tests.cluster.conftest import ZooKeeperServer
from tests.unit.controller import test_embedded_store as embedded


@pytest.fixture
def store(zookeeper: ZooKeeperServer, zk_chroot: str) -> Iterator[ZooKeeperMetadataStore]:
    s = ZooKeeperMetadataStore.connect(zookeeper.hosts, zk_chroot, session_timeout=10)
    yield s
    s.close()


test_create_get_set_delete_with_versions = embedded.test_create_get_set_delete_with_versions
test_parent_stats_track_children = embedded.test_parent_stats_track_children
test_ephemeral_znodes_cannot_have_children = embedded.test_ephemeral_znodes_cannot_have_children
test_multi_is_all_or_nothing_and_names_the_failing_op = embedded.test_multi_is_all_or_nothing_and_names_the_failing_op
test_transaction_builder = embedded.test_transaction_builder
test_closed_session_refuses_calls = embedded.test_closed_session_refuses_calls
test_broker_epoch_is_the_registration_czxid_and_grows = embedded.test_broker_epoch_is_the_registration_czxid_and_grows
test_watches_are_one_shot_and_typed = embedded.test_watches_are_one_shot_and_typed
test_failed_reads_leave_no_watch = embedded.test_failed_reads_leave_no_watch
test_a_failing_multi_fires_nothing = embedded.test_a_failing_multi_fires_nothing
test_callbacks_run_off_the_caller_thread_and_may_call_the_store = (
    embedded.test_callbacks_run_off_the_caller_thread_and_may_call_the_store
)
test_a_raising_callback_does_not_stop_delivery = embedded.test_a_raising_callback_does_not_stop_delivery
