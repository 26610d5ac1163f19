package io.sofakafka.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The scenario runner the pytest suite drives: one JVM, many scenarios.
 *
 * <p>stdin carries one JSON request per line, {@code {"id": n, "scenario": name, "bootstrap": "host:port",
 * "params": {...}}}; stdout carries one JSON answer per request, {@code {"id": n, "ok": true, "result": {...}}}
 * or {@code {"id": n, "ok": false, "error": ..., "trace": ...}}. The first line out is {@code {"ready": true,
 * "kafkaVersion": ...}}. Requests run concurrently, up to {@code -Dscenarios.parallel} at a time (default 1),
 * and are answered as they finish: most of a scenario's time is spent waiting on a broker (group joins,
 * long polls, acks), so a test module submits every scenario up front and waits on each answer by its id. A scenario checks what it observes itself (a failed check throws) and returns a
 * summary that the Python side may compare between brokers. The client library is whatever kafka-clients
 * jar is on the classpath: the same classes run with 2.6 and with 4.x.
 *
 * <p>{@code list} as the scenario name answers with every registered name.
 */
public final class Scenarios {
    /** One scenario: reads its parameters from the context, returns a JSON-able summary. */
    @FunctionalInterface
    public interface Scenario {
        Object run(Ctx ctx) throws Exception;
    }

    static final Map<String, Scenario> REGISTRY = new TreeMap<>();

    static void register(String name, Scenario s) {
        if (REGISTRY.put(name, s) != null) throw new IllegalStateException("scenario registered twice: " + name);
    }

    static {
        AdminScenarios.register();
        ProducerScenarios.register();
        ConsumerScenarios.register();
        MigrationScenarios.register();
        TransactionScenarios.register();
        // Kafka Streams is on the classpath only when the tests ask for it.
        try {
            Class.forName("org.apache.kafka.streams.KafkaStreams");
            Class.forName("io.sofakafka.interop.StreamsScenarios").getMethod("register").invoke(null);
        } catch (ReflectiveOperationException | LinkageError notThere) {
            // no streams on this classpath: its scenarios are simply not registered
        }
    }

    private Scenarios() {
    }

    public static void main(String[] args) throws Exception {
        // Whatever a library prints must not corrupt the answer stream: stdout is ours alone.
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("ready", true);
        hello.put("kafkaVersion", kafkaVersion());
        out.println(Json.write(hello));
        int parallel = Integer.getInteger("scenarios.parallel", 1);
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(parallel, r -> {
            Thread t = new Thread(r, "scenario-" + THREADS.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            String request = line;
            pool.execute(() -> {
                String answer = Json.write(handle(request));
                synchronized (out) {
                    out.println(answer);
                }
            });
        }
        // stdin closed: finish what was asked, then exit.
        pool.shutdown();
        pool.awaitTermination(10, java.util.concurrent.TimeUnit.MINUTES);
    }

    private static final java.util.concurrent.atomic.AtomicInteger THREADS = new java.util.concurrent.atomic.AtomicInteger();

    /** The client's version, from the properties file every kafka-clients jar carries (its parser class moved in 4.x). */
    static String kafkaVersion() {
        java.util.Properties p = new java.util.Properties();
        try (java.io.InputStream in = Scenarios.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (java.io.IOException e) {
            return "unknown";
        }
        return p.getProperty("version", "unknown");
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> handle(String line) {
        Map<String, Object> answer = new LinkedHashMap<>();
        String name = "?";
        try {
            Map<String, Object> req = (Map<String, Object>) Json.parse(line);
            answer.put("id", req.get("id"));
            name = (String) req.get("scenario");
            if ("list".equals(name)) {
                answer.put("ok", true);
                answer.put("result", Map.of("scenarios", REGISTRY.keySet()));
                return answer;
            }
            Scenario s = REGISTRY.get(name);
            if (s == null) throw new IllegalArgumentException("no scenario named " + name + "; known: " + REGISTRY.keySet());
            Map<String, Object> params = (Map<String, Object>) req.getOrDefault("params", Map.of());
            System.err.println("=== scenario " + name + " against " + req.get("bootstrap") + " " + params);
            long started = System.nanoTime();
            Object result = s.run(new Ctx((String) req.get("bootstrap"), params));
            System.err.printf("=== scenario %s against %s done in %d ms%n", name, req.get("bootstrap"),
                (System.nanoTime() - started) / 1_000_000);
            answer.put("ok", true);
            answer.put("result", result);
        } catch (Throwable t) {
            StringWriter w = new StringWriter();
            t.printStackTrace(new PrintWriter(w));
            System.err.println("=== scenario " + name + " failed: " + w);
            answer.put("ok", false);
            answer.put("error", t.toString());
            answer.put("trace", w.toString());
        }
        return answer;
    }
}
