package io.sofakafka.interop;

import static io.sofakafka.interop.AdminScenarios.createAndWait;
import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.waitUntil;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * A log dir moving between brokers: {@code migration.write} leaves on a broker what a user's data looks like
 * (several segments per partition, codecs, headers, timestamps, a log start offset moved by DeleteRecords, a
 * compacted topic the cleaner has compacted, an idempotent producer's batches, a consumer group's committed
 * offsets, and on request transactions, committed and aborted); {@code migration.read} reads all of it back
 * through the clients as a digest (every record's offset, timestamp, key, value and headers, each partition's
 * log start and end offsets, the group's offsets and metadata), which must be the same before the move and
 * after it; {@code migration.resume} then checks that the data goes on: the group resumes at its offsets and
 * an idempotent producer appends after the old end.
 */
final class MigrationScenarios {
    private MigrationScenarios() {
    }

    static void register() {
        Scenarios.register("migration.write", MigrationScenarios::write);
        Scenarios.register("migration.read", MigrationScenarios::read);
        Scenarios.register("migration.resume", MigrationScenarios::resume);
    }

    static final int PARTITIONS = 3;

    static String plain(Ctx ctx) {
        return ctx.str("prefix") + "-plain";
    }

    static String compacted(Ctx ctx) {
        return ctx.str("prefix") + "-compacted";
    }

    static String idempotent(Ctx ctx) {
        return ctx.str("prefix") + "-idempotent";
    }

    static String transactional(Ctx ctx) {
        return ctx.str("prefix") + "-transactional";
    }

    static String group(Ctx ctx) {
        return ctx.str("prefix") + "-group";
    }

    static List<String> topics(Ctx ctx) {
        List<String> t = new ArrayList<>(List.of(plain(ctx), compacted(ctx), idempotent(ctx)));
        if (Boolean.TRUE.equals(ctx.params.get("transactions"))) t.add(transactional(ctx));
        return t;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Object write(Ctx ctx) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        long base = System.currentTimeMillis() - 3_600_000;
        try (Admin a = ctx.admin()) {
            createAndWait(a, plain(ctx), PARTITIONS, ctx.rf(), Map.of("segment.bytes", "16384"));
            createAndWait(a, compacted(ctx), 1, ctx.rf(), Map.of("cleanup.policy", "compact", "segment.bytes", "2048",
                "min.cleanable.dirty.ratio", "0.01", "segment.ms", "100", "delete.retention.ms", "86400000"));
            createAndWait(a, idempotent(ctx), 2, ctx.rf(), Map.of("segment.bytes", "16384"));
            if (topics(ctx).contains(transactional(ctx))) createAndWait(a, transactional(ctx), 1, ctx.rf(), Map.of());
        }
        // Several segments per partition, two codecs, headers, set timestamps.
        for (String codec : List.of("lz4", "gzip")) {
            try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("compression.type", codec, "linger.ms", 5))) {
                for (int i = 0; i < 600; i++) {
                    List<Header> hs = i % 3 == 0 ? List.of(new RecordHeader("n", utf8(Integer.toString(i)))) : List.of();
                    p.send(new ProducerRecord<>(plain(ctx), i % PARTITIONS, base + i, utf8(codec + "-k" + i),
                        utf8(codec + " value " + i + " " + "x".repeat(i % 50)), hs));
                }
            }
        }
        try (Admin a = ctx.admin()) {
            a.deleteRecords(Map.of(new TopicPartition(plain(ctx), 0), RecordsToDelete.beforeOffset(7))).all().get();
        }
        // A compacted topic: ten keys written over and over, one deleted (a tombstone), until the cleaner has run.
        TopicPartition ctp = new TopicPartition(compacted(ctx), 0);
        int written = 0;
        // One request at a time keeps the order; small batches fill many small segments for the cleaner.
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of("linger.ms", 0, "batch.size", 512,
                "max.in.flight.requests.per.connection", 1))) {
            for (int round = 0; round < 40; round++) {
                for (int k = 0; k < 10; k++) {
                    byte[] value = round == 39 && k == 3 ? null : utf8("round " + round + " of key " + k);
                    p.send(new ProducerRecord<>(compacted(ctx), 0, utf8("key-" + k), value));
                    written++;
                }
            }
        }
        long compactedTo = waitForCompaction(ctx, ctp, written);
        r.put("compactedWritten", written);
        r.put("compactedFewerThanWritten", compactedTo < written);
        // An idempotent producer's batches (its producer state goes into the snapshot files).
        Map<String, Object> idem = new HashMap<>();
        idem.put("enable.idempotence", true);
        idem.put("acks", "all");
        idem.put("linger.ms", 2);
        idem.put("batch.size", 2048);
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(idem)) {
            for (int i = 0; i < 1000; i++) p.send(new ProducerRecord<>(idempotent(ctx), i % 2, null, utf8("idempotent " + i)));
        }
        if (topics(ctx).contains(transactional(ctx))) writeTransactions(ctx);
        // A consumer group: subscribed, consumed, committed offsets with metadata, then left.
        Map<TopicPartition, OffsetAndMetadata> commit = new HashMap<>();
        for (int p = 0; p < PARTITIONS; p++) commit.put(new TopicPartition(plain(ctx), p), new OffsetAndMetadata(50 + p, "at " + p));
        commit.put(new TopicPartition(idempotent(ctx), 1), new OffsetAndMetadata(123, null));
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of("group.id", group(ctx)))) {
            c.subscribe(List.of(plain(ctx), idempotent(ctx)));
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.assignment().size() < PARTITIONS + 2 && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
            eq(PARTITIONS + 2, c.assignment().size(), "the group member's partitions");
            c.commitSync(commit);
        }
        r.put("committed", commit.size());
        return r;
    }

    static void writeTransactions(Ctx ctx) throws Exception {
        Map<String, Object> conf = new HashMap<>();
        conf.put("enable.idempotence", true);
        conf.put("transactional.id", ctx.str("prefix") + "-txn");
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(conf)) {
            p.initTransactions();
            for (int t = 0; t < 6; t++) {
                p.beginTransaction();
                for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(transactional(ctx), 0, null, utf8("txn " + t + " record " + i)));
                if (t % 3 == 1) p.abortTransaction();
                else p.commitTransaction();
            }
        }
    }

    /** Until the partition, read from the beginning, holds fewer records than were written: the cleaner ran. */
    static long waitForCompaction(Ctx ctx, TopicPartition tp, int written) throws Exception {
        long[] seen = {written};
        waitUntil(() -> {
            try {
                seen[0] = readPartition(ctx, tp, Map.of()).size();
                return seen[0] < written;
            } catch (Exception e) {
                return false;
            }
        }, Duration.ofSeconds(90), "the log cleaner to compact " + tp);
        return seen[0];
    }

    static List<ConsumerRecord<byte[], byte[]>> readPartition(Ctx ctx, TopicPartition tp, Map<String, Object> overrides) throws Exception {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(overrides)) {
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = c.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (c.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) out.add(rec);
            }
            check(c.position(tp) >= end, "read " + tp + " to its end offset " + end + " (at " + c.position(tp) + ")");
        }
        return out;
    }

    static void digest(MessageDigest md, byte[] b) {
        if (b == null) {
            md.update(ByteBuffer.allocate(4).putInt(-1).array());
        } else {
            md.update(ByteBuffer.allocate(4).putInt(b.length).array());
            md.update(b);
        }
    }

    /** One partition as the clients see it: its offsets, its records' digest, and a few records in plain sight. */
    static Map<String, Object> partition(Ctx ctx, Admin a, TopicPartition tp, String isolation) throws Exception {
        Map<String, Object> out = new LinkedHashMap<>();
        List<ConsumerRecord<byte[], byte[]>> records = readPartition(ctx, tp, Map.of("isolation.level", isolation));
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of("isolation.level", isolation))) {
            out.put("logStart", c.beginningOffsets(List.of(tp)).get(tp));
            out.put("end", c.endOffsets(List.of(tp)).get(tp));
        }
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        for (ConsumerRecord<byte[], byte[]> rec : records) {
            md.update(ByteBuffer.allocate(8 + 8 + 4).putLong(rec.offset()).putLong(rec.timestamp()).putInt(rec.timestampType().id).array());
            digest(md, rec.key());
            digest(md, rec.value());
            for (Header h : rec.headers()) {
                digest(md, utf8(h.key()));
                digest(md, h.value());
            }
        }
        out.put("records", records.size());
        out.put("digest", HexFormat.of().formatHex(md.digest()));
        // What compaction keeps whenever a cleaner runs: each key's latest record (its offset and value; a
        // tombstone stays for delete.retention.ms). Either broker's cleaner may compact a little more between two
        // reads, so a compacted topic is compared by this.
        Map<String, String> latest = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> rec : records) {
            if (rec.key() == null) continue;
            latest.put(new String(rec.key(), StandardCharsets.UTF_8),
                rec.offset() + ":" + (rec.value() == null ? null : new String(rec.value(), StandardCharsets.UTF_8)));
        }
        out.put("latestPerKey", latest);
        List<String> firstAndLast = new ArrayList<>();
        if (!records.isEmpty()) {
            for (ConsumerRecord<byte[], byte[]> rec : List.of(records.get(0), records.get(records.size() - 1))) {
                firstAndLast.add(rec.offset() + ":" + (rec.key() == null ? null : new String(rec.key(), StandardCharsets.UTF_8))
                    + "=" + (rec.value() == null ? null : new String(rec.value(), StandardCharsets.UTF_8)));
            }
        }
        out.put("firstAndLast", firstAndLast);
        return out;
    }

    static Object read(Ctx ctx) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            // A broker just started on the log dir knows its partitions' leaders once its controller has sent
            // them round: wait for that, everywhere, before reading.
            Map<String, TopicDescription> described = new HashMap<>();
            waitUntil(() -> {
                try {
                    described.putAll(Ctx.describeTopics(a, topics(ctx)));
                    return described.values().stream().allMatch(
                        d -> d.partitions().stream().allMatch(p -> p.leader() != null && !p.leader().isEmpty()));
                } catch (Exception e) {
                    return false;
                }
            }, Duration.ofSeconds(60), "every partition of " + topics(ctx) + " to have a leader");
            for (String topic : topics(ctx)) AdminScenarios.waitEverywhere(a, topic, described.get(topic).partitions().size());
            for (String topic : topics(ctx)) {
                Map<String, Object> t = new TreeMap<>();
                String isolation = topic.equals(transactional(ctx)) ? "read_committed" : "read_uncommitted";
                for (int p = 0; p < described.get(topic).partitions().size(); p++) {
                    t.put(Integer.toString(p), partition(ctx, a, new TopicPartition(topic, p), isolation));
                }
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                Config c = a.describeConfigs(List.of(res)).all().get().get(res);
                Map<String, String> dynamic = new TreeMap<>();
                for (ConfigEntry e : c.entries()) {
                    if (e.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) dynamic.put(e.name(), e.value());
                }
                t.put("configs", dynamic);
                r.put(topic.substring(ctx.str("prefix").length() + 1), t);
            }
            Map<String, Object> offsets = new TreeMap<>();
            a.listConsumerGroupOffsets(group(ctx)).partitionsToOffsetAndMetadata().get().forEach(
                (tp, om) -> offsets.put(tp.topic().substring(ctx.str("prefix").length() + 1) + "-" + tp.partition(),
                    om.offset() + "/" + om.metadata()));
            r.put("groupOffsets", offsets);
        }
        return r;
    }

    static Object resume(Ctx ctx) throws Exception {
        Map<String, Object> r = new LinkedHashMap<>();
        // The group resumes where it committed.
        Map<String, Long> firstPolled = new TreeMap<>();
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of("group.id", group(ctx)))) {
            c.subscribe(List.of(plain(ctx)));
            long deadline = System.currentTimeMillis() + 60_000;
            while (firstPolled.size() < PARTITIONS && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> rec : c.poll(Duration.ofMillis(200))) {
                    firstPolled.putIfAbsent(Integer.toString(rec.partition()), rec.offset());
                }
            }
        }
        r.put("groupResumedAt", firstPolled);
        // An idempotent producer appends after the old end of every partition.
        TopicPartition tp = new TopicPartition(idempotent(ctx), 0);
        long endBefore;
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(Map.of())) {
            endBefore = c.endOffsets(List.of(tp)).get(tp);
        }
        Map<String, Object> idem = new HashMap<>();
        idem.put("enable.idempotence", true);
        idem.put("acks", "all");
        long first;
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(idem)) {
            first = p.send(new ProducerRecord<>(idempotent(ctx), 0, null, utf8("after the move"))).get().offset();
        }
        eq(endBefore, first, "the first offset written after the move");
        List<ConsumerRecord<byte[], byte[]>> all = readPartition(ctx, tp, Map.of());
        eq("after the move", new String(all.get(all.size() - 1).value(), StandardCharsets.UTF_8), "the last record");
        r.put("appendedAt", first);
        r.put("recordsNow", all.size());
        return r;
    }
}
