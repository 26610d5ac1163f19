package io.sofakafka.interop;

import static io.sofakafka.interop.AdminScenarios.createAndWait;
import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.errorName;
import static io.sofakafka.interop.ProducerScenarios.partitions;
import static io.sofakafka.interop.ProducerScenarios.readAll;
import static io.sofakafka.interop.ProducerScenarios.str;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions with Kafka's own clients: a transactional producer committing and aborting across two topics
 * with read_committed and read_uncommitted consumers, fencing by a newer instance, and a consume-transform-produce
 * loop with {@code sendOffsetsToTransaction}. The same code runs with kafka-clients 2.6 and 4.x.
 */
final class TransactionScenarios {
    private TransactionScenarios() {
    }

    static void register() {
        Scenarios.register("transactions.two_topics", TransactionScenarios::twoTopics);
        Scenarios.register("transactions.consume_transform_produce", TransactionScenarios::consumeTransformProduce);
    }

    static Map<String, Object> transactional(Ctx ctx, String transactionalId) {
        Map<String, Object> conf = new HashMap<>();
        conf.put("enable.idempotence", true);
        conf.put("transactional.id", transactionalId);
        conf.put("transaction.timeout.ms", 60000);
        conf.put("max.block.ms", 60000);
        return conf;
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** A partition named without the run's unique topic prefix ("a-0" for "txn2-...-a", partition 0), so what two
     * brokers' runs report compares equal. */
    static String label(String topic, int partition) {
        return topic.substring(topic.lastIndexOf('-') + 1) + "-" + partition;
    }

    /** Per partition ({@link #label}), the values in offset order. */
    static Map<String, List<String>> byPartition(List<ConsumerRecord<byte[], byte[]>> records) {
        Map<String, List<String>> out = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> rec : records) {
            out.computeIfAbsent(label(rec.topic(), rec.partition()), k -> new ArrayList<>()).add(str(rec.value()));
        }
        return out;
    }

    static void send(KafkaProducer<byte[], byte[]> p, String topic, int partition, String value,
                     Map<String, List<String>> sent) {
        p.send(new ProducerRecord<>(topic, partition, null, bytes(value)));
        sent.computeIfAbsent(label(topic, partition), k -> new ArrayList<>()).add(value);
    }

    static Object twoTopics(Ctx ctx) throws Exception {
        String a = ctx.str("topic") + "-a";
        String b = ctx.str("topic") + "-b";
        String txnId = ctx.str("transactionalId");
        try (Admin admin = ctx.admin()) {
            createAndWait(admin, a, 2, (short) 1, Map.of());
            createAndWait(admin, b, 1, (short) 1, Map.of());
        }
        Map<String, List<String>> committed = new TreeMap<>();
        Map<String, List<String>> everything = new TreeMap<>();
        Map<String, Object> r = new LinkedHashMap<>();
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(transactional(ctx, txnId))) {
            p.initTransactions();
            for (int txn = 0; txn < 4; txn++) {
                boolean commit = txn % 2 == 0;
                Map<String, List<String>> sent = new TreeMap<>();
                p.beginTransaction();
                for (int i = 0; i < 5; i++) {
                    send(p, a, i % 2, "txn" + txn + "-a" + i, sent);
                    send(p, b, 0, "txn" + txn + "-b" + i, sent);
                }
                // Flushed first: the Java client drops records not yet sent when it aborts, and the aborted records
                // are meant to reach the log (read_uncommitted sees them, read_committed must not).
                p.flush();
                if (commit) p.commitTransaction();
                else p.abortTransaction();
                for (Map.Entry<String, List<String>> e : sent.entrySet()) {
                    everything.computeIfAbsent(e.getKey(), k -> new ArrayList<>()).addAll(e.getValue());
                    if (commit) committed.computeIfAbsent(e.getKey(), k -> new ArrayList<>()).addAll(e.getValue());
                }
            }
            // A new instance with the same transactional id fences this one: its next transaction fails.
            // flush: the partition is in the transaction before the newer instance starts, so what follows does not
            // depend on timing (the coordinator aborts the open transaction, the old instance's EndTxn is refused).
            p.beginTransaction();
            p.send(new ProducerRecord<>(a, 0, null, bytes("fenced")));
            p.flush();
            try (KafkaProducer<byte[], byte[]> newer = ctx.producer(transactional(ctx, txnId))) {
                newer.initTransactions();
                String fenced;
                try {
                    p.commitTransaction();
                    fenced = "none";
                } catch (Exception e) {
                    fenced = errorName(e);
                }
                r.put("oldInstanceAfterFencing", fenced);
                newer.beginTransaction();
                Map<String, List<String>> sent = new TreeMap<>();
                send(newer, b, 0, "newer-b", sent);
                newer.commitTransaction();
                committed.computeIfAbsent(label(b, 0), k -> new ArrayList<>()).add("newer-b");
            }
        } catch (Exception e) {
            // The fenced producer's close may throw on the older clients; what it saw is already in r.
            if (!r.containsKey("oldInstanceAfterFencing")) throw e;
        }
        List<TopicPartition> tps = new ArrayList<>(partitions(a, 2));
        tps.addAll(partitions(b, 1));
        int committedCount = committed.values().stream().mapToInt(List::size).sum();
        Map<String, List<String>> readCommitted = byPartition(readAll(ctx, tps, committedCount,
                Map.of("isolation.level", "read_committed")));
        eq(committed, readCommitted, "read_committed sees exactly the committed records, in order");
        int everythingCount = everything.values().stream().mapToInt(List::size).sum() + 2;  // + fenced, newer-b
        List<ConsumerRecord<byte[], byte[]>> uncommitted = readAll(ctx, tps, everythingCount,
                Map.of("isolation.level", "read_uncommitted"));
        Map<String, List<String>> readUncommitted = byPartition(uncommitted);
        for (Map.Entry<String, List<String>> e : everything.entrySet()) {
            check(readUncommitted.getOrDefault(e.getKey(), List.of()).containsAll(e.getValue()),
                    "read_uncommitted sees every record sent to " + e.getKey() + ", aborted ones too");
        }
        r.put("readCommitted", readCommitted);
        r.put("readUncommittedCount", uncommitted.size());
        return r;
    }

    /**
     * Copies an input topic to an output topic in transactions of up to 7 records, the consumer's positions sent
     * with each ({@code sendOffsetsToTransaction}); the second transaction is aborted and its input read again. The
     * output holds every input record exactly once and the group's committed offsets are the input's end.
     */
    static Object consumeTransformProduce(Ctx ctx) throws Exception {
        String in = ctx.str("topic") + "-in";
        String out = ctx.str("topic") + "-out";
        String group = ctx.str("group");
        int n = ctx.integer("records", 40);
        try (Admin admin = ctx.admin()) {
            createAndWait(admin, in, 2, (short) 1, Map.of());
            createAndWait(admin, out, 2, (short) 1, Map.of());
        }
        try (KafkaProducer<byte[], byte[]> plain = ctx.producer(Map.of())) {
            for (int i = 0; i < n; i++) plain.send(new ProducerRecord<>(in, i % 2, null, bytes("in-" + i)));
            plain.flush();
        }
        Map<String, Object> r = new LinkedHashMap<>();
        int transactions = 0;
        int aborted = 0;
        Map<String, Object> consumerConf = new HashMap<>();
        consumerConf.put("group.id", group);
        consumerConf.put("isolation.level", "read_committed");
        consumerConf.put("max.poll.records", 7);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(consumerConf);
             KafkaProducer<byte[], byte[]> p = ctx.producer(transactional(ctx, ctx.str("transactionalId")))) {
            p.initTransactions();
            c.subscribe(List.of(in));
            int copied = 0;
            long deadline = System.currentTimeMillis() + 90_000;
            while (copied < n && System.currentTimeMillis() < deadline) {
                ConsumerRecords<byte[], byte[]> polled = c.poll(Duration.ofMillis(200));
                if (polled.isEmpty()) continue;
                Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
                Map<TopicPartition, Long> rewind = new HashMap<>();
                p.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> rec : polled) {
                    TopicPartition tp = new TopicPartition(rec.topic(), rec.partition());
                    rewind.putIfAbsent(tp, rec.offset());
                    p.send(new ProducerRecord<>(out, rec.partition(), null, bytes("out-" + str(rec.value()).substring(3))));
                    positions.put(tp, new OffsetAndMetadata(rec.offset() + 1));
                }
                p.sendOffsetsToTransaction(positions, c.groupMetadata());
                transactions++;
                if (transactions == 2) {
                    p.abortTransaction();
                    aborted++;
                    for (Map.Entry<TopicPartition, Long> e : rewind.entrySet()) c.seek(e.getKey(), e.getValue());
                } else {
                    p.commitTransaction();
                    copied += polled.count();
                }
            }
            eq(n, copied, "input records copied in committed transactions");
            Map<TopicPartition, OffsetAndMetadata> offsets = c.committed(Set.copyOf(partitions(in, 2)));
            Map<String, Long> committedOffsets = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                committedOffsets.put(label(in, e.getKey().partition()), e.getValue() == null ? null : e.getValue().offset());
            }
            r.put("committedOffsets", committedOffsets);
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(out, 2), n, Map.of("isolation.level", "read_committed"));
        List<String> values = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> rec : got) values.add(str(rec.value()));
        values.sort(null);
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < n; i++) expected.add("out-" + i);
        expected.sort(null);
        eq(expected, values, "every input record exactly once in the output");
        r.put("output", values.size());
        r.put("abortedTransactions", aborted);
        return r;
    }
}
