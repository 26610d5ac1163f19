"""The faults of a chaos run, each recorded in the history (``invoke`` when it starts, ``ok`` when the cluster
is whole again) and each followed by a wait until every replica is back in every ISR, so that faults never
overlap beyond what RF=3 / min.insync.replicas=2 promises to survive (one broker at a time).

Faults: ``kill-leader`` (kill -9 of a partition's leader, restarted once another leader is elected),
``pause-broker`` (SIGSTOP past the ZooKeeper session timeout, then SIGCONT), ``kill-zookeeper`` and
``pause-zookeeper``, ``partition-leader`` (a leader cut off from the other brokers, ZooKeeper still reachable),
``partition-zookeeper`` (a broker cut off from ZooKeeper, the other brokers still reachable), ``isolate``
(a broker cut off from everyone, clients included), ``clock-skew`` (a broker restarted with its wall clock
``sofakafka.test.clock.offset.ms`` ahead or behind, then restarted on the system's clock), ``disk-full``
(a broker whose log dirs are small tmpfs filled up: it stops itself, as Kafka halts with every log dir offline,
and is restarted with space again) and ``fail-log-dir`` (one of the two log dirs of a partition's leader fails
under it, its tmpfs filled while the workload writes: the broker takes that dir offline and keeps running with
the other, the controller leads that dir's partitions elsewhere, as Kafka's log dir failure handling does; the
broker is restarted with the dir usable again).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from sofakafka.protocol.errors import ErrorCode
from tests.chaos.cluster import ChaosCluster, wait_for
from tests.chaos.history import History

SETTLE_S = 180.0


class Nemesis:
    def __init__(self, cluster: ChaosCluster, history: History, topic: str, rng: random.Random,
                 session_timeout_s: float, internal_topics: tuple[str, ...] = ()) -> None:
        self.cluster = cluster
        self.history = history
        self.topic = topic
        # Also waited for after every fault: ``__transaction_state`` under transactional load, so a fault never
        # meets a coordinator partition that still misses the replica the previous fault took away.
        self.internal_topics = internal_topics
        self.rng = rng
        self.session_timeout_s = session_timeout_s

    # -- helpers ---------------------------------------------------------------------------------------------
    def _run(self, f: str, action: Callable[[], dict[str, object]]) -> None:
        self.history.record("nemesis", "invoke", f)
        details = action()
        self.settle()
        self.history.record("nemesis", "ok", f, **details)

    def settle(self) -> None:
        """Every broker up, registered, and in every ISR of the topic (and of the internal topics)."""
        self.cluster.wait_for_brokers(SETTLE_S)
        self.cluster.wait_full_isr([self.topic, *self.internal_topics], SETTLE_S)

    def _leader(self) -> tuple[int, int]:
        partitions = self.cluster.partitions(self.topic)
        p = self.rng.choice(sorted(partitions))
        return p, partitions[p][0]

    def _new_leader_elected(self, p: int, old: int) -> None:
        wait_for(f"a new leader of partition {p} after broker {old}",
                 lambda: self.cluster.leader(self.topic, p) not in (old, -1), SETTLE_S, 0.2)

    # -- faults ----------------------------------------------------------------------------------------------
    def kill_leader(self) -> None:
        def act() -> dict[str, object]:
            p, leader = self._leader()
            self.cluster.brokers[leader].kill()
            self._new_leader_elected(p, leader)
            self.cluster.restart_broker(leader)
            return {"partition": p, "broker": leader}

        self._run("kill-leader", act)

    def pause_broker(self) -> None:
        def act() -> dict[str, object]:
            b = self.rng.choice(self.cluster.broker_ids)
            self.cluster.brokers[b].pause()
            time.sleep(self.session_timeout_s + 2)
            self.cluster.brokers[b].resume()
            return {"broker": b}

        self._run("pause-broker", act)

    def kill_zookeeper(self) -> None:
        def act() -> dict[str, object]:
            assert self.cluster.zk is not None
            self.cluster.zk.kill()
            time.sleep(2)
            self.cluster.start_zookeeper()
            return {}

        self._run("kill-zookeeper", act)

    def pause_zookeeper(self) -> None:
        def act() -> dict[str, object]:
            assert self.cluster.zk is not None
            self.cluster.zk.pause()
            time.sleep(self.session_timeout_s / 2)
            self.cluster.zk.resume()
            return {}

        self._run("pause-zookeeper", act)

    def partition_leader(self) -> None:
        def act() -> dict[str, object]:
            p, leader = self._leader()
            for b in self.cluster.broker_ids:
                if b != leader:
                    self.cluster.net.partition(f"b{leader}", f"b{b}")
            time.sleep(self.session_timeout_s)
            self.cluster.net.heal()
            return {"partition": p, "broker": leader}

        self._run("partition-leader", act)

    def partition_zookeeper(self) -> None:
        def act() -> dict[str, object]:
            b = self.rng.choice(self.cluster.broker_ids)
            self.cluster.net.partition(f"b{b}", "zk")
            time.sleep(self.session_timeout_s + 2)
            self.cluster.net.heal()
            return {"broker": b}

        self._run("partition-zookeeper", act)

    def isolate(self) -> None:
        def act() -> dict[str, object]:
            b = self.rng.choice(self.cluster.broker_ids)
            self.cluster.net.isolate(f"b{b}")
            time.sleep(self.session_timeout_s + 2)
            self.cluster.net.heal()
            return {"broker": b}

        self._run("isolate", act)

    def clock_skew(self) -> None:
        def act() -> dict[str, object]:
            b = self.rng.choice(self.cluster.broker_ids)
            offset = self.rng.choice([-1, 1]) * self.rng.randrange(60_000, 3_600_000)
            self.cluster.brokers[b].stop()
            self.cluster.restart_broker(b, {"sofakafka.test.clock.offset.ms": str(offset)})
            self.settle()
            time.sleep(2)  # traffic through the skewed broker
            self.cluster.brokers[b].stop()
            self.cluster.restart_broker(b, {})
            return {"broker": b, "offset_ms": offset}

        self._run("clock-skew", act)

    def disk_full(self) -> None:
        def act() -> dict[str, object]:
            b = self.rng.choice(self.cluster.broker_ids)
            data, second = self.cluster.data_dirs(b)
            process = self.cluster.brokers[b]
            process.stop()
            used_mb = sum(f.stat().st_size for f in data.rglob("*") if f.is_file()) // (1 << 20)
            with small_log_dir(data, size_mb=used_mb + 32) as filler:
                self.cluster.wait_unregistered(b)
                process.start()
                self.settle()
                # Both dirs full, none left: the broker stops itself. The second to the last byte, so that the
                # few partitions there, written slowly, fail at their next write rather than after 128 KiB.
                fill(second / "filler", leave=0)
                fill(filler, leave=128 * 1024)
                wait_for(f"broker {b} to stop itself with its log dirs full", lambda: not process.alive(),
                         SETTLE_S, 0.5)
            (second / "filler").unlink()
            self.cluster.restart_broker(b)
            return {"broker": b}

        self._run("disk-full", act)

    def fail_log_dir(self) -> None:
        def act() -> dict[str, object]:
            leaders = {p: info[0] for p, info in self.cluster.partitions(self.topic).items()}
            in_second: list[tuple[int, int]] = []  # (partition, its leader) whose log is in the leader's tmpfs dir
            with self.cluster.client() as c:
                for p, b in sorted(leaders.items()):
                    second = str(self.cluster.data_dirs(b)[1].resolve())
                    if any(d.log_dir == second and any(x.topic == self.topic and x.partition == p and not x.is_future
                                                       for x in d.partitions) for d in c.describe_log_dirs(b)):
                        in_second.append((p, b))
            moved = False
            if in_second:
                p, b = self.rng.choice(in_second)
            else:
                # None is there: move one (AlterReplicaLogDirs, KIP-113) while it leads and takes writes.
                p = self.rng.choice(sorted(leaders))
                b = leaders[p]
                second = str(self.cluster.data_dirs(b)[1].resolve())
                with self.cluster.client() as c:
                    assert c.alter_replica_log_dirs(b, {(self.topic, p): second}) == {(self.topic, p): ErrorCode.NONE}

                def there() -> bool:
                    with self.cluster.client(5000) as c:
                        return any(d.log_dir == second and any(x.topic == self.topic and x.partition == p
                                                               and not x.is_future for x in d.partitions)
                                   for d in c.describe_log_dirs(b))

                wait_for(f"partition {p} moved into broker {b}'s second log dir", there, SETTLE_S, 0.5)
                moved = True
            second_dir = self.cluster.data_dirs(b)[1]
            process = self.cluster.brokers[b]
            fill(second_dir / "filler", leave=0)  # the next write there needs space: ENOSPC, the dir goes offline

            def offline() -> bool:
                with self.cluster.client(5000) as c:
                    return any(d.log_dir == str(second_dir.resolve()) and d.error == ErrorCode.KAFKA_STORAGE_ERROR
                               for d in c.describe_log_dirs(b))

            wait_for(f"broker {b} to take {second_dir} offline", offline, SETTLE_S, 0.5)
            self._new_leader_elected(p, b)
            assert process.alive(), f"broker {b} stopped with one of its two log dirs offline"
            process.stop()
            (second_dir / "filler").unlink()
            self.cluster.restart_broker(b)
            return {"partition": p, "broker": b, "moved_first": moved}

        self._run("fail-log-dir", act)


class small_log_dir:
    """Mount a tmpfs of ``size_mb`` over a broker's (stopped) log dir with its data copied in; at the end copy
    the data back (the broker is stopped again by then) and unmount. Yields the path of a filler file."""

    def __init__(self, data: Path, size_mb: int) -> None:
        self.data = data
        self.size_mb = size_mb
        self.saved = data.with_name(data.name + ".saved")

    def __enter__(self) -> Path:
        os.replace(self.data, self.saved)
        self.data.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.data)], check=True)
        subprocess.run(["cp", "-a", f"{self.saved}/.", str(self.data)], check=True)
        return self.data / "filler"  # a file in a log dir is not a partition: the broker leaves it alone

    def __exit__(self, *exc: object) -> None:
        for leftover in self.data.glob("filler*"):
            leftover.unlink()
        tmp = self.data.with_name(self.data.name + ".back")
        subprocess.run(["cp", "-a", str(self.data), str(tmp)], check=True)
        subprocess.run(["umount", "-l", str(self.data)], check=False)
        self.data.rmdir()
        os.replace(tmp, self.data)
        subprocess.run(["rm", "-rf", str(self.saved)], check=False)


def fill(path: Path, leave: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            st = os.statvfs(path.parent)
            free = st.f_bavail * st.f_frsize
            if free <= leave:
                return
            os.write(fd, b"\0" * min(1 << 20, free - leave))
    except OSError:
        return
    finally:
        os.close(fd)
