"""What :meth:`KafkaController.rewrite_state` answers: the outcome of a read-decide-write of a partition state znode.

Leaders change the ISR in ``/brokers/topics/<t>/partitions/<p>/state`` themselves, so a controller duty that
rewrites it (a requested election, a controlled shutdown moving a broker's work away, a reassignment starting or
completing) reads the znode, decides on what it read, and writes conditioned on the version read; a lost race
means a leader wrote meanwhile, and the duty decides again on what it wrote. These types live apart from
:mod:`sofakafka.controller.kafka_controller` because the duty modules it imports (controlled_shutdown,
reassignment) compare against them at run time.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sofakafka.controller.zk_data import PartitionState

STATE_WRITE_ATTEMPTS = 5
"""A state that keeps changing under the controller (leaders writing ISR changes) is decided again this many times
before the duty gives up with :attr:`NotRewritten.KEPT_CHANGING`; whoever asked retries, or the next change of
the znode brings the duty back."""


@dataclass(frozen=True)
class StateRewrite:
    """The write went through: ``old`` is the state it was decided on, ``new`` the one that replaced it."""

    old: PartitionState
    new: PartitionState


class NotRewritten(enum.Enum):
    """Why nothing was decided: each duty answers these differently (an error code, a log line, a retry later)."""

    NO_STATE = enum.auto()
    """The partition has no state znode yet (never elected)."""
    KEPT_CHANGING = enum.auto()
    """Every attempt lost its race with another writer."""
