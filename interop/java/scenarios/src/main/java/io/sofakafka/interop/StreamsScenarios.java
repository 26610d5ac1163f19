package io.sofakafka.interop;

import static io.sofakafka.interop.AdminScenarios.createAndWait;
import static io.sofakafka.interop.Ctx.check;
import static io.sofakafka.interop.Ctx.eq;
import static io.sofakafka.interop.Ctx.waitUntil;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.ThreadMetadata;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * Kafka Streams 2.6 (on the clients-2.6 JVM's classpath only; {@link Scenarios} registers this class when it is
 * there): the word count of Kafka's own quickstart, with a RocksDB state store, its repartition topic (the
 * group-by re-keys the stream) and its changelog topic, run by two instances that rebalance as the second joins
 * and the first leaves (the second then restores the first's tasks from the changelog).
 *
 * <p>{@code guarantee} is Streams' processing.guarantee: {@code at_least_once}, or {@code exactly_once}, which
 * needs transactions (issue 11 brings them to sofakafka; the test that asks for it is the hook).
 */
public final class StreamsScenarios {
    private StreamsScenarios() {
    }

    public static void register() {
        Scenarios.register("streams.word_count", StreamsScenarios::wordCount);
    }

    static final String STORE = "counts-store";

    static final List<List<String>> BATCHES = List.of(
        List.of("all streams lead to kafka", "hello kafka streams", "join kafka summit"),
        List.of("kafka streams counts words", "words words everywhere", "a store keeps the counts"),
        List.of("the changelog keeps the store", "lead the way", "hello again kafka"));

    static Topology topology(String input, String output) {
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as(STORE))
            .toStream()
            .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        return builder.build();
    }

    static Properties config(Ctx ctx, String applicationId, Path stateDir, String guarantee) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, ctx.bootstrap);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass().getName());
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, (int) ctx.rf());
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        // Every update out at once (no record cache) and committed often: the test reads the counts as they go.
        p.put(StreamsConfig.CACHE_MAX_BYTES_BUFFERING_CONFIG, 0);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // A broker without transactions (exactly_once on sofakafka before issue 11) fails fast, not in 60 s.
        p.put(StreamsConfig.producerPrefix("max.block.ms"), ctx.integer("maxBlockMs", 60_000));
        return p;
    }

    /** A started instance whose state is watched: ERROR (or a thread's death) fails the scenario. */
    static final class Instance implements AutoCloseable {
        final String name;
        final KafkaStreams streams;
        final Path stateDir;
        final AtomicReference<Throwable> died = new AtomicReference<>();

        Instance(Ctx ctx, String name, String input, String output, String applicationId, String guarantee) throws IOException {
            this.name = name;
            this.stateDir = Files.createTempDirectory("streams-" + name + "-");
            this.streams = new KafkaStreams(topology(input, output), config(ctx, applicationId, stateDir, guarantee));
            streams.setUncaughtExceptionHandler((thread, e) -> died.compareAndSet(null, e));
            streams.start();
        }

        void waitRunning(Duration timeout) throws Exception {
            waitUntil(() -> streams.state() == KafkaStreams.State.RUNNING || failed(), timeout, name + " to be RUNNING");
            throwIfFailed();
        }

        boolean failed() {
            return died.get() != null || streams.state() == KafkaStreams.State.ERROR
                || streams.state() == KafkaStreams.State.NOT_RUNNING;
        }

        void throwIfFailed() {
            if (died.get() != null) throw new AssertionError(name + "'s stream thread died", died.get());
            check(!failed(), name + " is " + streams.state());
        }

        Set<String> activeTasks() {
            Set<String> tasks = new TreeSet<>();
            for (ThreadMetadata t : streams.localThreadsMetadata()) {
                t.activeTasks().forEach(task -> tasks.add(task.taskId()));
            }
            return tasks;
        }

        @Override
        public void close() throws IOException {
            streams.close(Duration.ofSeconds(60));
            try (Stream<Path> files = Files.walk(stateDir)) {
                files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }

    static void produce(Ctx ctx, String topic, List<String> lines) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = ctx.producer(Map.of())) {
            for (String line : lines) p.send(new ProducerRecord<>(topic, null, line.getBytes(StandardCharsets.UTF_8))).get();
        }
    }

    static Map<String, Long> expectedCounts(int batches) {
        Map<String, Long> counts = new TreeMap<>();
        for (List<String> batch : BATCHES.subList(0, batches)) {
            for (String line : batch) {
                for (String w : line.toLowerCase(Locale.ROOT).split("\\W+")) counts.merge(w, 1L, Long::sum);
            }
        }
        return counts;
    }

    /** Reads the output topic until the latest count of every word is the expected one (or 90 s passed). */
    static Map<String, Long> awaitCounts(KafkaConsumer<String, Long> out, Map<String, Long> latest, Map<String, Long> expected,
                                         List<String> updates) {
        long deadline = System.currentTimeMillis() + 90_000;
        while (!latest.equals(expected) && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, Long> rec : out.poll(Duration.ofMillis(200))) {
                latest.put(rec.key(), rec.value());
                updates.add(rec.key());
            }
        }
        return latest;
    }

    static Object wordCount(Ctx ctx) throws Exception {
        String applicationId = ctx.str("applicationId");
        String guarantee = ctx.str("guarantee", "at_least_once");
        String input = applicationId + "-lines";
        String output = applicationId + "-counts";
        int partitions = 4;
        // Two sub-topologies (reading the lines; reading the repartition topic), a task per partition each.
        int tasks = 2 * partitions;
        Map<String, Object> r = new LinkedHashMap<>();
        try (Admin a = ctx.admin()) {
            createAndWait(a, input, partitions, ctx.rf(), Map.of());
            createAndWait(a, output, partitions, ctx.rf(), Map.of());
        }
        Deserializer<String> keys = new StringDeserializer();
        Deserializer<Long> values = new LongDeserializer();
        Properties op = new Properties();
        op.put("bootstrap.servers", ctx.bootstrap);
        op.put("auto.offset.reset", "earliest");
        op.put("enable.auto.commit", false);
        Map<String, Long> latest = new TreeMap<>();
        List<String> updates = new ArrayList<>();
        try (KafkaConsumer<String, Long> out = new KafkaConsumer<>(op, keys, values)) {
            List<TopicPartition> outParts = ProducerScenarios.partitions(output, partitions);
            out.assign(outParts);
            out.seekToBeginning(outParts);
            Instance first = new Instance(ctx, "instance-1", input, output, applicationId, guarantee);
            Instance second = null;
            try {
                // Streams 2.6 retries what times out while it creates tasks (an exactly_once producer that finds
                // no transaction coordinator, say) without end: runningTimeoutMs bounds the wait.
                first.waitRunning(Duration.ofMillis(ctx.integer("runningTimeoutMs", 120_000)));
                eq(tasks, first.activeTasks().size(), "tasks of the only instance");
                produce(ctx, input, BATCHES.get(0));
                eq(expectedCounts(1), awaitCounts(out, latest, expectedCounts(1), updates), "counts after the first lines");

                // A second instance joins: the tasks are shared between the two.
                second = new Instance(ctx, "instance-2", input, output, applicationId, guarantee);
                Instance one = first;
                Instance two = second;
                waitUntil(() -> one.failed() || two.failed() || (one.streams.state() == KafkaStreams.State.RUNNING
                        && two.streams.state() == KafkaStreams.State.RUNNING && !two.activeTasks().isEmpty()
                        && !one.activeTasks().isEmpty() && one.activeTasks().size() + two.activeTasks().size() == tasks),
                    Duration.ofSeconds(120), "both instances to run a share of the " + tasks + " tasks");
                first.throwIfFailed();
                second.throwIfFailed();
                r.put("tasksWhileTwo", List.of(first.activeTasks().size(), second.activeTasks().size()).stream().sorted().toList());
                try (Admin a = ctx.admin()) {
                    ConsumerGroupDescription g = a.describeConsumerGroups(List.of(applicationId)).all().get().get(applicationId);
                    r.put("groupMembersWhileTwo", g.members().size());
                    r.put("groupState", Ctx.groupState(g));
                }
                produce(ctx, input, BATCHES.get(1));
                eq(expectedCounts(2), awaitCounts(out, latest, expectedCounts(2), updates), "counts with two instances");

                // The first leaves: the second takes every task, restoring the first's stores from the changelog.
                first.close();
                first = null;
                Instance survivor = second;
                waitUntil(() -> survivor.failed() || (survivor.streams.state() == KafkaStreams.State.RUNNING
                        && survivor.activeTasks().size() == tasks), Duration.ofSeconds(120),
                    "the second instance to run every task");
                second.throwIfFailed();
                produce(ctx, input, BATCHES.get(2));
                Map<String, Long> expected = expectedCounts(3);
                eq(expected, awaitCounts(out, latest, expected, updates), "counts after the first instance left");

                // The store, queried where it lives now, holds the same counts.
                ReadOnlyKeyValueStore<String, Long> store = second.streams.store(
                    StoreQueryParameters.fromNameAndType(STORE, QueryableStoreTypes.<String, Long>keyValueStore()));
                Map<String, Long> stored = new TreeMap<>();
                store.all().forEachRemaining(kv -> stored.put(kv.key, kv.value));
                eq(expected, stored, "the state store's counts");
                r.put("words", expected.size());
                r.put("kafkaCount", expected.get("kafka"));
            } finally {
                if (first != null) first.close();
                if (second != null) second.close();
            }
        }
        // at_least_once may in general count twice after a failure; these hand-overs were clean, so never.
        r.put("updates", updates.size());
        r.put("internalTopics", internalTopics(ctx, applicationId));
        return r;
    }

    /** Streams' internal topics of the application and the configs it created them with. */
    static Map<String, Object> internalTopics(Ctx ctx, String applicationId) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        try (Admin a = ctx.admin()) {
            for (String name : a.listTopics().names().get()) {
                if (!name.startsWith(applicationId + "-") || name.endsWith("-lines") || name.endsWith("-counts")) continue;
                String kind = name.substring(applicationId.length() + 1);
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, name);
                Config c = a.describeConfigs(List.of(res), new DescribeConfigsOptions()).all().get().get(res);
                Map<String, Object> info = new TreeMap<>();
                for (String k : List.of("cleanup.policy", "retention.ms", "segment.bytes", "message.timestamp.type")) {
                    info.put(k, c.get(k) == null ? null : c.get(k).value() + "@" + c.get(k).source());
                }
                info.put("partitions", Ctx.describeTopics(a, List.of(name)).get(name).partitions().size());
                info.put("replicas", Ctx.describeTopics(a, List.of(name)).get(name).partitions().get(0).replicas().size());
                out.put(kind, info);
            }
        }
        return out;
    }
}
