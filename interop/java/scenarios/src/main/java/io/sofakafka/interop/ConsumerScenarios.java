package io.sofakafka.interop;

import static io.sofakafka.interop.AdminScenarios.createAndWait;
import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.waitUntil;
import static io.sofakafka.interop.ProducerScenarios.partitions;
import static io.sofakafka.interop.ProducerScenarios.str;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;

/** The consumer: assign, subscribe with each assignor, static membership, commits, seeks, times, pause. */
final class ConsumerScenarios {
    private ConsumerScenarios() {
    }

    static final Map<String, String> ASSIGNORS = Map.of(
        "range", "org.apache.kafka.clients.consumer.RangeAssignor",
        "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        "sticky", "org.apache.kafka.clients.consumer.StickyAssignor",
        "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");

    static void register() {
        Scenarios.register("consumer.assign", ConsumerScenarios::assign);
        Scenarios.register("consumer.subscribe", ConsumerScenarios::subscribe);
        Scenarios.register("consumer.static_membership", ConsumerScenarios::staticMembership);
        Scenarios.register("consumer.commit", ConsumerScenarios::commit);
        Scenarios.register("consumer.offsets_for_times", ConsumerScenarios::offsetsForTimes);
        Scenarios.register("consumer.pause_resume", ConsumerScenarios::pauseResume);
        Scenarios.register("consumer.rebalance_under_load", ConsumerScenarios::rebalanceUnderLoad);
    }

    static void produce(Ctx ctx, String topic, int partitions, int perPartition, Long baseTimestamp) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("linger.ms", 5))) {
            for (int part = 0; part < partitions; part++) {
                for (int i = 0; i < perPartition; i++) {
                    Long ts = baseTimestamp == null ? null : baseTimestamp + i * 1000L;
                    p.send(new ProducerRecord<>(topic, part, ts, null, (part + ":" + i).getBytes(StandardCharsets.UTF_8)));
                }
            }
            p.flush();
        }
    }

    static Object assign(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 3, ctx.rf(), Map.of());
        }
        produce(ctx, topic, 3, 10, null);
        List<TopicPartition> tps = partitions(topic, 3);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of())) {
            c.assign(tps);
            eq(new HashSet<>(tps), c.assignment(), "assignment");
            c.seekToBeginning(tps);
            Map<Integer, List<String>> seen = new TreeMap<>();
            long deadline = System.currentTimeMillis() + 60_000;
            int total = 0;
            while (total < 30 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) {
                    seen.computeIfAbsent(rec.partition(), k -> new ArrayList<>()).add(str(rec.value()));
                    total++;
                }
            }
            eq(30, total, "records read from the beginning");
            for (int part = 0; part < 3; part++) {
                eq(10L, c.position(tps.get(part)), "position of partition " + part);
                eq(part + ":0", seen.get(part).get(0), "first record of partition " + part);
            }
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            for (TopicPartition tp : tps) {
                eq(0L, begin.get(tp), "beginning offset");
                eq(10L, end.get(tp), "end offset");
            }
            c.seekToEnd(tps);
            for (TopicPartition tp : tps) eq(10L, c.position(tp), "position after seekToEnd");
            c.seek(tps.get(1), 5);
            List<String> tail = new ArrayList<>();
            deadline = System.currentTimeMillis() + 30_000;
            while (tail.size() < 5 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) tail.add(str(rec.value()));
            }
            eq(List.of("1:5", "1:6", "1:7", "1:8", "1:9"), tail, "records after seek(5)");
            // Past the end: auto.offset.reset=earliest takes the consumer back to 0.
            c.seek(tps.get(2), 50);
            List<String> reset = new ArrayList<>();
            deadline = System.currentTimeMillis() + 30_000;
            while (reset.size() < 10 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) reset.add(str(rec.value()));
            }
            eq("2:0", reset.isEmpty() ? null : reset.get(0), "first record after an out-of-range seek with reset=earliest");
            r.put("records", total);
        }
        return r;
    }

    /** Consumers of one group, each polling in its own thread, recording what it sees. */
    static final class Member implements Runnable {
        final KafkaConsumer<byte[], byte[]> consumer;
        final AtomicBoolean stop = new AtomicBoolean();
        final Set<String> seen;
        final AtomicInteger polled = new AtomicInteger();
        final AtomicReference<Set<TopicPartition>> assignment = new AtomicReference<>(Set.of());
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final boolean commitEachPoll;
        final Thread thread;
        final String topic;

        Member(Ctx ctx, String name, String topic, Map<String, Object> conf, Set<String> seen, boolean commitEachPoll) {
            this.consumer = ctx.consumer(conf);
            this.seen = seen;
            this.commitEachPoll = commitEachPoll;
            this.topic = topic;
            this.thread = new Thread(this, name);
        }

        Member start() {
            thread.start();
            return this;
        }

        @Override
        public void run() {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                        if (!revoked.isEmpty()) consumer.commitSync();
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
                    }
                });
                while (!stop.get()) {
                    for (ConsumerRecord<byte[], byte[]> rec : consumer.poll(Duration.ofMillis(100))) {
                        seen.add(rec.partition() + "@" + rec.offset());
                        polled.incrementAndGet();
                    }
                    assignment.set(new HashSet<>(consumer.assignment()));
                    if (commitEachPoll) {
                        try {
                            consumer.commitSync();
                        } catch (RebalanceInProgressException again) {
                            // cooperative rebalancing: the next poll completes it, the next commit goes through
                        }
                    }
                }
            } catch (Throwable t) {
                failure.set(t);
            } finally {
                consumer.close(Duration.ofSeconds(30));
            }
        }

        void stopAndJoin() throws Exception {
            stop.set(true);
            thread.join(60_000);
            check(!thread.isAlive(), thread.getName() + " stopped");
            if (failure.get() != null) throw new AssertionError(thread.getName() + " failed", failure.get());
        }
    }

    static Object subscribe(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String group = ctx.str("group");
        String assignor = ctx.str("assignor");
        int partitions = 6;
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, partitions, ctx.rf(), Map.of());
        }
        Map<String, Object> conf = new HashMap<>();
        conf.put("group.id", group);
        conf.put("partition.assignment.strategy", ASSIGNORS.get(assignor));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        Member m1 = new Member(ctx, "member-1", topic, conf, seen, true).start();
        Member m2 = new Member(ctx, "member-2", topic, conf, seen, true).start();
        try {
            waitUntil(() -> {
                Set<TopicPartition> a1 = m1.assignment.get();
                Set<TopicPartition> a2 = m2.assignment.get();
                return !a1.isEmpty() && !a2.isEmpty() && a1.size() + a2.size() == partitions
                    && Collections.disjoint(a1, a2) && m1.failure.get() == null && m2.failure.get() == null;
            }, Duration.ofSeconds(90), "both members to share the " + partitions + " partitions");
            produce(ctx, topic, partitions, 100, null);
            waitUntil(() -> seen.size() == partitions * 100 || m1.failure.get() != null || m2.failure.get() != null,
                Duration.ofSeconds(60), "every record to be consumed by the group");
            List<Integer> sizes = new ArrayList<>(List.of(m1.assignment.get().size(), m2.assignment.get().size()));
            Collections.sort(sizes);
            Map<String, Object> r = new LinkedHashMap<>();
            r.put("assignor", assignor);
            r.put("assignmentSizes", sizes);
            r.put("consumed", seen.size());
            try (Admin a = ctx.admin()) {
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
                r.put("describedAssignor", d.partitionAssignor());
                r.put("describedMembers", d.members().size());
            }
            return r;
        } finally {
            m1.stopAndJoin();
            m2.stopAndJoin();
        }
    }

    static Object staticMembership(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String group = ctx.str("group");
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 2, ctx.rf(), Map.of());
        }
        Map<String, Object> conf = new HashMap<>();
        conf.put("group.id", group);
        conf.put("group.instance.id", "static-a");
        conf.put("session.timeout.ms", 10000);
        Set<TopicPartition> first;
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(conf); Admin a = ctx.admin()) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
            first = new HashSet<>(c.assignment());
            eq(2, first.size(), "the static member's assignment");
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
            eq(1, d.members().size(), "members");
            MemberDescription m = d.members().iterator().next();
            eq(java.util.Optional.of("static-a"), m.groupInstanceId(), "the described group.instance.id");
            r.put("describedInstanceId", m.groupInstanceId().orElse(null));
        }
        try (Admin a = ctx.admin()) {
            // A static member does not leave the group when it closes: its place waits for it.
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
            r.put("membersAfterClose", d.members().size());
            r.put("stateAfterClose", Ctx.groupState(d));
        }
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(conf); Admin a = ctx.admin()) {
            c.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
            eq(first, c.assignment(), "the same assignment after rejoining with the same instance id");
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(group)).all().get().get(group);
            r.put("membersAfterRejoin", d.members().size());
            // Remove the static member explicitly (KIP-345's admin path isn't in 2.6's Admin for all forms).
        }
        return r;
    }

    static Object commit(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String group = ctx.str("group");
        Map<String, Object> r = new LinkedHashMap<>();
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        produce(ctx, topic, 1, 20, null);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of("group.id", group))) {
            c.subscribe(List.of(topic));
            int n = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            while (n < 20 && System.currentTimeMillis() < deadline) n += c.poll(Duration.ofMillis(200)).count();
            eq(20, n, "records");
            c.commitSync(Map.of(tp, new OffsetAndMetadata(10, "sync")));
            OffsetAndMetadata sync = c.committed(Set.of(tp)).get(tp);
            eq(10L, sync.offset(), "committed offset after commitSync");
            eq("sync", sync.metadata(), "committed metadata after commitSync");
            CountDownLatch done = new CountDownLatch(1);
            AtomicReference<Exception> asyncError = new AtomicReference<>();
            c.commitAsync(Map.of(tp, new OffsetAndMetadata(15, "async")), (offsets, e) -> {
                asyncError.set(e);
                done.countDown();
            });
            deadline = System.currentTimeMillis() + 30_000;
            while (!done.await(0, TimeUnit.MILLISECONDS) && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
            check(done.getCount() == 0, "the commitAsync callback ran");
            eq(null, asyncError.get(), "commitAsync error");
            OffsetAndMetadata async = c.committed(Set.of(tp)).get(tp);
            eq(15L, async.offset(), "committed offset after commitAsync");
            r.put("committedMetadata", async.metadata());
            // Committing the consumer's position (no explicit offsets).
            c.commitSync();
            eq(20L, c.committed(Set.of(tp)).get(tp).offset(), "committed position");
            c.commitSync(Map.of(tp, new OffsetAndMetadata(15)));
        }
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of("group.id", group))) {
            c.subscribe(List.of(topic));
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (got.size() < 5 && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(200)).forEach(got::add);
            eq(15L, got.isEmpty() ? null : got.get(0).offset(), "a new member resumes at the committed offset");
            r.put("resumedAt", got.get(0).offset());
        }
        return r;
    }

    static Object offsetsForTimes(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 100_000;
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        produce(ctx, topic, 1, 10, base);
        Map<String, Object> r = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of())) {
            Map<String, Long> queries = new LinkedHashMap<>();
            queries.put("exact", base + 3000);
            queries.put("between", base + 3500);
            queries.put("beforeAll", base - 5000);
            queries.put("afterAll", base + 3_600_000);
            for (Map.Entry<String, Long> q : queries.entrySet()) {
                OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tp, q.getValue())).get(tp);
                r.put(q.getKey(), ot == null ? null : List.of(ot.offset(), ot.timestamp() - base));
            }
            c.assign(List.of(tp));
            OffsetAndTimestamp at = c.offsetsForTimes(Map.of(tp, base + 7000)).get(tp);
            c.seek(tp, at.offset());
            List<Long> stamps = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (stamps.size() < 3 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) stamps.add(rec.timestamp() - base);
            }
            r.put("timestampsFromSeventh", stamps);
        }
        return r;
    }

    static Object pauseResume(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        TopicPartition tp0 = new TopicPartition(topic, 0);
        TopicPartition tp1 = new TopicPartition(topic, 1);
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 2, ctx.rf(), Map.of());
        }
        produce(ctx, topic, 2, 10, null);
        Map<String, Object> r = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of())) {
            c.assign(List.of(tp0, tp1));
            c.seekToBeginning(List.of(tp0, tp1));
            c.pause(List.of(tp0));
            eq(Set.of(tp0), c.paused(), "paused partitions");
            int[] counts = new int[2];
            long deadline = System.currentTimeMillis() + 30_000;
            while (counts[1] < 10 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) counts[rec.partition()]++;
            }
            for (int i = 0; i < 3; i++) for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(100))) counts[rec.partition()]++;
            eq(0, counts[0], "records of the paused partition");
            eq(10, counts[1], "records of the running partition");
            c.resume(List.of(tp0));
            deadline = System.currentTimeMillis() + 30_000;
            while (counts[0] < 10 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) counts[rec.partition()]++;
            }
            eq(10, counts[0], "records of the resumed partition");
            r.put("counts", List.of(counts[0], counts[1]));
        }
        return r;
    }

    static Object rebalanceUnderLoad(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String group = ctx.str("group");
        int n = ctx.integer("records", 20_000);
        int partitions = 4;
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, partitions, ctx.rf(), Map.of());
        }
        Map<String, Object> conf = new HashMap<>();
        conf.put("group.id", group);
        conf.put("partition.assignment.strategy", ASSIGNORS.get(ctx.str("assignor", "range")));
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger acked = new AtomicInteger();
        AtomicReference<Throwable> produceError = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("acks", "all", "linger.ms", 5))) {
                for (int i = 0; i < n; i++) {
                    p.send(new ProducerRecord<>(topic, i % partitions, null, Integer.toString(i).getBytes(StandardCharsets.UTF_8)), (md, e) -> {
                        if (e != null) produceError.set(e);
                        else acked.incrementAndGet();
                    });
                    if (i % 1000 == 999) p.flush();
                }
                p.flush();
            } catch (Throwable t) {
                produceError.set(t);
            }
        }, "producer");
        Member m1 = new Member(ctx, "member-1", topic, conf, seen, false).start();
        producer.start();
        AtomicInteger total = new AtomicInteger();
        waitUntil(() -> m1.polled.get() >= n / 10 || m1.failure.get() != null, Duration.ofSeconds(60), "the first member to consume");
        Member m2 = new Member(ctx, "member-2", topic, conf, seen, false).start();
        waitUntil(() -> !m2.assignment.get().isEmpty() || m2.failure.get() != null, Duration.ofSeconds(60), "the second member's assignment");
        waitUntil(() -> m1.polled.get() + m2.polled.get() >= n / 2, Duration.ofSeconds(60), "half the records consumed");
        m1.stopAndJoin();
        producer.join(120_000);
        if (produceError.get() != null) throw new AssertionError("producer failed", produceError.get());
        eq(n, acked.get(), "records acknowledged");
        try {
            waitUntil(() -> seen.size() >= n || m2.failure.get() != null, Duration.ofSeconds(90), "every acknowledged record to be consumed");
        } finally {
            m2.stopAndJoin();
        }
        eq(n, seen.size(), "distinct records consumed (nothing lost)");
        total.set(m1.polled.get() + m2.polled.get());
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("produced", n);
        r.put("consumedDistinct", seen.size());
        r.put("duplicates", total.get() - seen.size());
        return r;
    }
}
