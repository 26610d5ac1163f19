package io.sofakafka.interop;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** What a scenario gets: the bootstrap address, its parameters, and the checks and clients it shares. */
public final class Ctx {
    final String bootstrap;
    final Map<String, Object> params;

    Ctx(String bootstrap, Map<String, Object> params) {
        this.bootstrap = Objects.requireNonNull(bootstrap, "bootstrap");
        this.params = params;
    }

    String str(String key) {
        Object v = params.get(key);
        if (v == null) throw new IllegalArgumentException("missing parameter " + key);
        return v.toString();
    }

    String str(String key, String dflt) {
        Object v = params.get(key);
        return v == null ? dflt : v.toString();
    }

    int integer(String key, int dflt) {
        Object v = params.get(key);
        return v == null ? dflt : ((Number) v).intValue();
    }

    /** The replication factor of the topics a scenario creates: {@code replicationFactor}, default 1. */
    short rf() {
        return (short) integer("replicationFactor", 1);
    }

    @SuppressWarnings("unchecked")
    List<String> strings(String key) {
        Object v = params.get(key);
        if (v == null) throw new IllegalArgumentException("missing parameter " + key);
        List<String> out = new ArrayList<>();
        for (Object o : (List<Object>) v) out.add(o.toString());
        return out;
    }

    /**
     * Client properties every client of the scenario gets ({@code clientConfig}, string to string): how to reach a
     * secured listener (security.protocol, sasl.*, ssl.*), applied after the scenario's own settings.
     */
    @SuppressWarnings("unchecked")
    Map<String, Object> clientConfig() {
        Object v = params.get("clientConfig");
        return v == null ? Map.of() : (Map<String, Object>) v;
    }

    Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 30000);
        p.put("default.api.timeout.ms", 60000);
        p.putAll(clientConfig());
        return Admin.create(p);
    }

    KafkaProducer<byte[], byte[]> producer(Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // 4.x enables idempotence by default; a scenario that wants it says so.
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120000);
        p.putAll(overrides);
        p.putAll(clientConfig());
        return new KafkaProducer<>(p);
    }

    KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> overrides) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.putAll(overrides);
        p.putAll(clientConfig());
        return new KafkaConsumer<>(p);
    }

    // ---- checks: a failed one throws, and the runner reports it with its message ----

    static void check(boolean condition, String what) {
        if (!condition) throw new AssertionError(what);
    }

    static void eq(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) {
            throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
        }
    }

    /** Polls a condition until it holds or the deadline passes (bounded, never a fixed sleep). */
    static void waitUntil(BooleanSupplier cond, Duration timeout, String what) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) throw new AssertionError("timed out after " + timeout + " waiting for " + what);
            Thread.sleep(50);
        }
    }

    /** The exception a failed future carries (the cause of the ExecutionException), or null if it succeeded. */
    static Throwable failureOf(KafkaFuture<?> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /** Kafka's exception class name, short: what the scenario reports for an error path. */
    static String errorName(Throwable t) {
        return t == null ? "none" : t.getClass().getSimpleName();
    }

    // ---- APIs whose names changed between 2.6 and 4.x: called by name, the first that exists ----

    static Object call(Object target, String... methodNames) throws Exception {
        for (String name : methodNames) {
            Method m;
            try {
                m = target.getClass().getMethod(name);
            } catch (NoSuchMethodException e) {
                continue;
            }
            m.setAccessible(true);
            return m.invoke(target);
        }
        throw new NoSuchMethodException(target.getClass().getName() + " has none of " + String.join(", ", methodNames));
    }

    /** describeTopics(...).all() in 2.6, .allTopicNames() since 3.1 (all() is gone in 4.0). */
    @SuppressWarnings("unchecked")
    static Map<String, TopicDescription> describeTopics(Admin admin, Collection<String> names) throws Exception {
        Object result = admin.describeTopics(names);
        KafkaFuture<Map<String, TopicDescription>> f =
            (KafkaFuture<Map<String, TopicDescription>>) call(result, "allTopicNames", "all");
        return f.get();
    }

    /** The group state's name: ConsumerGroupDescription.state() in 2.6, groupState() in 4.x. */
    static String groupState(Object description) throws Exception {
        return String.valueOf(call(description, "groupState", "state"));
    }
}
