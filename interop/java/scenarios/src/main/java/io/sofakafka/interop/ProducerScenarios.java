package io.sofakafka.interop;

import static io.sofakafka.interop.AdminScenarios.createAndWait;
import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.errorName;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** The producer: acks, idempotence, codecs, headers, big batches, a record near the size limits. */
final class ProducerScenarios {
    private ProducerScenarios() {
    }

    static void register() {
        Scenarios.register("producer.acks", ProducerScenarios::acks);
        Scenarios.register("producer.idempotent", ProducerScenarios::idempotent);
        Scenarios.register("producer.compression", ProducerScenarios::compression);
        Scenarios.register("producer.headers", ProducerScenarios::headers);
        Scenarios.register("producer.big_batches", ProducerScenarios::bigBatches);
        Scenarios.register("producer.large_record", ProducerScenarios::largeRecord);
        // The simplest transactional producer; TransactionScenarios has the rest.
        Scenarios.register("producer.transactions", ProducerScenarios::transactions);
    }

    /** Every record of the given partitions from the beginning, until {@code expected} came or 60 s passed. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(Ctx ctx, List<TopicPartition> tps, int expected, Map<String, Object> overrides)
            throws Exception {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(overrides)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            while (out.size() < expected && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) out.add(rec);
            }
            // A little longer: anything past what we expect would be a duplicate.
            for (int i = 0; i < 3; i++) for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(100))) out.add(rec);
        }
        return out;
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> l = new ArrayList<>();
        for (int i = 0; i < n; i++) l.add(new TopicPartition(topic, i));
        return l;
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static Object acks(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        List<String> sent = new ArrayList<>();
        for (String acks : List.of("0", "1", "all")) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("acks", acks))) {
                for (int i = 0; i < 100; i++) {
                    String v = "acks-" + acks + "-" + i;
                    sent.add(v);
                    futures.add(p.send(new ProducerRecord<>(topic, 0, null, v.getBytes(StandardCharsets.UTF_8))));
                }
                p.flush();
            }
            long first = futures.get(0).get().offset();
            long last = futures.get(99).get().offset();
            // acks=0 learns no offset (-1); the others learn consecutive offsets.
            r.put("acks" + acks, acks.equals("0") ? (first == -1 && last == -1 ? "no offsets" : "offsets " + first + ".." + last) : "offsets " + first + ".." + last);
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 1), 300, Map.of());
        List<String> values = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> rec : got) values.add(str(rec.value()));
        eq(sent, values, "every record, once, in order");
        r.put("consumed", got.size());
        return r;
    }

    static Object idempotent(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        int n = ctx.integer("records", 3000);
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 3, ctx.rf(), Map.of());
        }
        Map<String, Object> conf = new HashMap<>();
        conf.put("enable.idempotence", true);
        conf.put("acks", "all");
        conf.put("max.in.flight.requests.per.connection", 5);
        conf.put("linger.ms", 5);
        conf.put("batch.size", 4096);
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(conf)) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(topic, i % 3, null, Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
            p.flush();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 3), n, Map.of());
        eq(n, got.size(), "records read back (no loss, no duplicate)");
        int[] last = {-3, -2, -1};
        for (ConsumerRecord<byte[], byte[]> rec : got) {
            int v = Integer.parseInt(str(rec.value()));
            eq(last[rec.partition()] + 3, v, "next value in partition " + rec.partition());
            last[rec.partition()] = v;
        }
        return Map.of("records", got.size());
    }

    static Object compression(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        String codec = ctx.str("codec");
        int n = 500;
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        List<String> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("compression.type", codec, "linger.ms", 20))) {
            for (int i = 0; i < n; i++) {
                String v = codec + " record " + i + " " + "abcdefghij".repeat(i % 20);
                sent.add(v);
                p.send(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(StandardCharsets.UTF_8), v.getBytes(StandardCharsets.UTF_8)));
            }
            p.flush();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 1), n, Map.of());
        List<String> values = new ArrayList<>();
        for (int i = 0; i < got.size(); i++) {
            values.add(str(got.get(i).value()));
            eq("k" + i, str(got.get(i).key()), "key " + i);
        }
        eq(sent, values, "every " + codec + " record back, in order");
        return Map.of("codec", codec, "records", got.size());
    }

    static Object headers(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        List<Header> hs = List.of(
            new RecordHeader("h", "v1".getBytes(StandardCharsets.UTF_8)),
            new RecordHeader("h", "v2".getBytes(StandardCharsets.UTF_8)),
            new RecordHeader("empty", new byte[0]),
            new RecordHeader("null", (byte[]) null),
            new RecordHeader("ünïcode", new byte[] {0, (byte) 0xff, 1}));
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of())) {
            p.send(new ProducerRecord<>(topic, 0, null, "with".getBytes(StandardCharsets.UTF_8), "headers".getBytes(StandardCharsets.UTF_8), hs)).get();
            p.send(new ProducerRecord<byte[], byte[]>(topic, 0, (Long) null, null, null)).get();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 1), 2, Map.of());
        eq(2, got.size(), "records");
        Header[] back = got.get(0).headers().toArray();
        eq(hs.size(), back.length, "headers of the first record");
        List<String> names = new ArrayList<>();
        for (int i = 0; i < back.length; i++) {
            eq(hs.get(i).key(), back[i].key(), "header " + i + " key");
            check(Arrays.equals(hs.get(i).value(), back[i].value()), "header " + i + " value");
            names.add(back[i].key());
        }
        eq(0, got.get(1).headers().toArray().length, "no headers on the second record");
        eq(null, got.get(1).key(), "null key");
        eq(null, got.get(1).value(), "null value");
        return Map.of("headers", names);
    }

    static Object bigBatches(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        int n = ctx.integer("records", 50_000);
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 2, ctx.rf(), Map.of());
        }
        byte[] pad = "x".repeat(180).getBytes(StandardCharsets.UTF_8);
        long sentSum = 0;
        java.util.concurrent.atomic.AtomicReference<Exception> sendError = new java.util.concurrent.atomic.AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("batch.size", ctx.integer("batchSize", 1 << 20), "linger.ms", 100,
                "compression.type", "none", "max.request.size", 4 << 20))) {
            for (int i = 0; i < n; i++) {
                byte[] v = new byte[pad.length + 4];
                System.arraycopy(pad, 0, v, 4, pad.length);
                v[0] = (byte) (i >>> 24); v[1] = (byte) (i >>> 16); v[2] = (byte) (i >>> 8); v[3] = (byte) i;
                sentSum += i;
                p.send(new ProducerRecord<>(topic, i % 2, null, v), (md, e) -> {
                    if (e != null) sendError.compareAndSet(null, e);
                });
            }
            p.flush();
        }
        if (sendError.get() != null) throw new AssertionError("a send failed", sendError.get());
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 2), n, Map.of("max.poll.records", 5000));
        eq(n, got.size(), "records back");
        long gotSum = 0;
        for (ConsumerRecord<byte[], byte[]> rec : got) {
            byte[] v = rec.value();
            gotSum += ((v[0] & 0xff) << 24) | ((v[1] & 0xff) << 16) | ((v[2] & 0xff) << 8) | (v[3] & 0xff);
        }
        eq(sentSum, gotSum, "sum of the record numbers");
        return Map.of("records", got.size());
    }

    static byte[] sha256(byte[] b) throws Exception {
        return MessageDigest.getInstance("SHA-256").digest(b);
    }

    static Object largeRecord(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        int size = ctx.integer("bytes", 10 * 1024 * 1024);
        int limit = size + 1024 * 1024;
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of("max.message.bytes", Integer.toString(limit)));
            createAndWait(a, topic + "-small", 1, ctx.rf(), Map.of());
        }
        byte[] big = new byte[size];
        new java.util.Random(42).nextBytes(big);
        Map<String, Object> conf = Map.of("max.request.size", limit, "buffer.memory", 64L << 20, "compression.type", "none");
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(conf)) {
            RecordMetadata md = p.send(new ProducerRecord<>(topic, 0, null, big)).get();
            r.put("offset", md.offset());
            // The same record to a topic with the default max.message.bytes: the broker refuses it.
            try {
                p.send(new ProducerRecord<>(topic + "-small", 0, null, big)).get();
                r.put("tooLargeForTopic", "none");
            } catch (ExecutionException e) {
                r.put("tooLargeForTopic", errorName(e.getCause()));
            }
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 1), 1, Map.of());
        eq(1, got.size(), "the big record back");
        check(Arrays.equals(sha256(big), sha256(got.get(0).value())), "the big record's bytes");
        r.put("bytes", got.get(0).value().length);
        return r;
    }

    static Object transactions(Ctx ctx) throws Exception {
        String topic = ctx.str("topic");
        try (Admin a = ctx.admin()) {
            createAndWait(a, topic, 1, ctx.rf(), Map.of());
        }
        Map<String, Object> conf = new HashMap<>();
        conf.put("enable.idempotence", true);
        conf.put("transactional.id", ctx.str("transactionalId"));
        conf.put("max.block.ms", ctx.integer("maxBlockMs", 30000));
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(conf)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, null, "aborted".getBytes(StandardCharsets.UTF_8)));
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(topic, 0, null, "committed".getBytes(StandardCharsets.UTF_8)));
            p.commitTransaction();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(ctx, partitions(topic, 1), 1, Map.of("isolation.level", "read_committed"));
        List<String> values = new ArrayList<>();
        List<String> at = new ArrayList<>();
        for (ConsumerRecord<byte[], byte[]> rec : got) {
            values.add(str(rec.value()));
            at.add(str(rec.value()) + "@" + rec.offset());
        }
        eq(List.of("committed"), values, "read_committed sees only the committed record (read " + at + ")");
        return Map.of("readCommitted", values);
    }

}
