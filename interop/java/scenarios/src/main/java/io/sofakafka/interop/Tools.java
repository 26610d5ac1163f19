package io.sofakafka.interop;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.utils.Exit;

/**
 * Kafka's command-line tools, many in one JVM: what {@code bin/kafka-topics.sh} and its siblings run is a main
 * class on kafka_2.13's classpath, and starting a JVM (and loading Scala) for each invocation costs seconds
 * that a test module pays dozens of times. This runner pays it once.
 *
 * <p>stdin carries one JSON request per line, {@code {"id": n, "main": "kafka.admin.TopicCommand", "args":
 * [...], "stdin": "..." or null}}; stdout carries {@code {"id": n, "exit": code, "stdout": "...", "stderr":
 * "..."}} once the tool is done. Tools run one at a time, each as its script runs it: its {@code main} with
 * the arguments, {@code System.in} holding the given text, what it prints to {@code System.out} and
 * {@code System.err} (log4j's console appender included) captured. A tool ends with Kafka's
 * {@code Exit.exit(code)}, which this JVM turns into an exception carrying the code (the first call counts),
 * or by returning from main (code 0), or with an exception escaping main (code 1, as the JVM would).
 */
public final class Tools {
    /** Thrown where Kafka's tool would have ended the JVM. */
    static final class ExitCalled extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ExitCalled(int code) {
            super("Exit.exit(" + code + ")", null, false, false);
        }
    }

    /** System.out / System.err as the tools see them: the current invocation's buffer, else the real stream. */
    static final class Switch extends OutputStream {
        private final OutputStream real;
        private volatile ByteArrayOutputStream capture;

        Switch(OutputStream real) {
            this.real = real;
        }

        private OutputStream target() {
            ByteArrayOutputStream c = capture;
            return c != null ? c : real;
        }

        @Override
        public void write(int b) throws IOException {
            target().write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            target().write(b, off, len);
        }

        @Override
        public void flush() throws IOException {
            target().flush();
        }
    }

    private static volatile Integer exitCode;
    private static final List<Thread> HOOKS = new java.util.concurrent.CopyOnWriteArrayList<>();

    private Tools() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Switch out = new Switch(new FileOutputStream(FileDescriptor.err));
        Switch err = new Switch(new FileOutputStream(FileDescriptor.err));
        // Before any Kafka or Scala class is loaded: Scala's Console and log4j's console appender keep the
        // System.out / System.err they first see, and these are the switching ones.
        System.setOut(new PrintStream(out, true, "UTF-8"));
        System.setErr(new PrintStream(err, true, "UTF-8"));
        Exit.setExitProcedure((code, message) -> {
            if (exitCode == null) exitCode = code;
            throw new ExitCalled(code);
        });
        Exit.setHaltProcedure((code, message) -> {
            if (exitCode == null) exitCode = code;
            throw new ExitCalled(code);
        });
        // A tool's shutdown hooks are part of its run (ConsoleProducer closes, and so flushes, its producer in
        // one): they run when the tool is done, as they would when its own JVM exits.
        Exit.setShutdownHookAdder((name, hook) -> HOOKS.add(new Thread(hook, name)));
        answers.println(Json.write(Map.of("ready", true)));
        String line;
        while ((line = requests.readLine()) != null) {
            if (line.isBlank()) continue;
            answers.println(Json.write(run(line, out, err)));
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> run(String line, Switch out, Switch err) {
        Map<String, Object> answer = new LinkedHashMap<>();
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        ByteArrayOutputStream stderr = new ByteArrayOutputStream();
        int code;
        try {
            Map<String, Object> req = (Map<String, Object>) Json.parse(line);
            answer.put("id", req.get("id"));
            String main = (String) req.get("main");
            List<Object> rawArgs = (List<Object>) req.get("args");
            String[] toolArgs = new String[rawArgs.size()];
            for (int i = 0; i < toolArgs.length; i++) toolArgs[i] = rawArgs.get(i).toString();
            Object stdin = req.get("stdin");
            System.setIn(new ByteArrayInputStream(stdin == null ? new byte[0] : stdin.toString().getBytes(StandardCharsets.UTF_8)));
            Method m = Class.forName(main).getMethod("main", String[].class);
            resetToolState(main);
            exitCode = null;
            out.capture = stdout;
            err.capture = stderr;
            try {
                m.invoke(null, (Object) toolArgs);
                code = exitCode == null ? 0 : exitCode;
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (exitCode != null) {
                    code = exitCode;
                } else {
                    // What the JVM does with an exception escaping main: its stack on stderr, exit status 1.
                    System.err.print("Exception in thread \"main\" ");
                    cause.printStackTrace(System.err);
                    code = 1;
                }
            } finally {
                runShutdownHooks();
                System.out.flush();
                System.err.flush();
                out.capture = null;
                err.capture = null;
            }
        } catch (Throwable t) {
            StringWriter w = new StringWriter();
            t.printStackTrace(new PrintWriter(w));
            answer.put("runnerError", w.toString());
            code = -1;
        }
        answer.put("exit", code);
        answer.put("stdout", stdout.toString(StandardCharsets.UTF_8));
        answer.put("stderr", stderr.toString(StandardCharsets.UTF_8));
        return answer;
    }

    /** What the JVM does at exit: every hook in a thread of its own, all at once, waited for. */
    static void runShutdownHooks() {
        List<Thread> hooks = List.copyOf(HOOKS);
        HOOKS.clear();
        for (Thread t : hooks) t.start();
        for (Thread t : hooks) {
            try {
                t.join(60_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (t.isAlive()) System.err.println("shutdown hook " + t.getName() + " still running after 60 s");
        }
    }

    /** State a tool keeps in its Scala object across runs, which its own JVM would start afresh. */
    static void resetToolState(String main) throws ReflectiveOperationException {
        if (main.equals("kafka.tools.ConsoleConsumer")) {
            // "Processed a total of N messages" counts from the object's field.
            Class<?> module = Class.forName("kafka.tools.ConsoleConsumer$");
            Object instance = module.getField("MODULE$").get(null);
            module.getMethod("messageCount_$eq", int.class).invoke(instance, 0);
        }
    }
}
