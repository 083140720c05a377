package dev.kepl.oracle;

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.common.client.json.minimaljson.Json;
import com.espertech.esper.common.client.json.minimaljson.JsonArray;
import com.espertech.esper.common.client.json.minimaljson.JsonObject;
import com.espertech.esper.common.client.json.minimaljson.JsonValue;
import com.espertech.esper.common.client.json.minimaljson.Member;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompiler;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPEventService;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Events per second of statements run in-process in Esper 9, for tests/bench/bench_embedded.py:
 * the same statements and the same generated events as kepl's embedded benchmark.
 *
 * Input lines (stdin), one benchmark each:
 *   {"schemas": {type: {prop: type}}, "statements": [epl, ...], "type": name,
 *    "events": path of a JSON-lines file of events, "prime": path (optional), "repeat": n}
 * Every run deploys the statements into a fresh runtime (external clock at 0), attaches a
 * listener that counts insert-stream rows, sends the "prime" events untimed (one event per
 * key allocates a keyed context's partitions) and then times sending every event with
 * sendEventMap; the events are decoded before the clock starts. Output line per input line:
 *   {"rates": [events per CPU second, each run], "wall": [events per second of wall
 *   time], "gc": [seconds the collectors took], "rows": rows of the last run} or
 *   {"error": msg}.
 * A stream of several types (Nexmark) leaves "type" empty: each event line then names its
 * type under "@type", and a line {"@time": ms} advances the runtime clock (timed too).
 * CPU time (the sending thread's, plus the collectors' time) is what the bench compares:
 * on a shared, loaded machine wall time measures the other load as much as the engine.
 */
public final class EsperBench {

    private EsperBench() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int index = 0;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            try {
                out.println(bench(index, Json.parse(line).asObject()));
            } catch (Exception e) {
                String m = e.getMessage();
                out.println(new JsonObject().add("error", e.getClass().getSimpleName() + ": "
                        + (m == null ? "" : m.replace('\n', ' '))));
            }
            index++;
        }
    }

    private static JsonObject bench(int index, JsonObject doc) throws Exception {
        Map<String, Map<String, Object>> schemas = new LinkedHashMap<>();
        for (Member type : doc.get("schemas").asObject()) {
            Map<String, Object> props = new LinkedHashMap<>();
            for (Member p : type.getValue().asObject()) {
                props.put(p.getName(), javaType(p.getValue().asString()));
            }
            schemas.put(type.getName(), props);
        }
        String type = doc.getString("type", "");
        Map<String, Object> props = schemas.get(type);
        List<Map<String, Object>> events = read(schemas, props, doc.getString("events", ""));
        List<Map<String, Object>> prime = doc.get("prime") == null
                ? new ArrayList<>() : read(schemas, props, doc.getString("prime", ""));
        List<String> statements = new ArrayList<>();
        for (JsonValue s : doc.get("statements").asArray()) {
            statements.add(s.asString());
        }
        JsonArray rates = new JsonArray();
        JsonArray wall = new JsonArray();
        JsonArray gcs = new JsonArray();
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long rows = 0;
        int repeat = doc.getInt("repeat", 5);
        for (int r = 0; r < repeat; r++) {
            Configuration config = new Configuration();
            config.getRuntime().getThreading().setInternalTimerEnabled(false);
            // a context declared by one statement is visible to the next (as in the oracle)
            config.getCompiler().getByteCode().setAccessModifiersPublic();
            for (Map.Entry<String, Map<String, Object>> e : schemas.entrySet()) {
                config.getCommon().addEventType(e.getKey(), e.getValue());
            }
            EPRuntime runtime = EPRuntimeProvider.getRuntime("kepl-bench-" + index + "-" + r, config);
            runtime.getEventService().advanceTime(0);
            EPCompiler compiler = EPCompilerProvider.getCompiler();
            long[] count = new long[1];
            for (String epl : statements) {
                CompilerArguments cargs = new CompilerArguments(config);
                cargs.getPath().add(runtime.getRuntimePath());
                EPCompiled compiled = compiler.compile(epl, cargs);
                EPDeployment deployment = runtime.getDeploymentService().deploy(compiled);
                for (EPStatement stmt : deployment.getStatements()) {
                    stmt.addListener((newEvents, oldEvents, st, rt) -> {
                        if (newEvents != null) {
                            count[0] += newEvents.length;
                        }
                    });
                }
            }
            EPEventService service = runtime.getEventService();
            for (Map<String, Object> e : prime) {
                send(service, e, type);
            }
            count[0] = 0;
            long g0 = gcMillis();
            long c0 = threads.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            long sent = 0;
            if (type.isEmpty()) {
                for (Map<String, Object> e : events) {
                    sent += send(service, e, type);
                }
            } else {
                // one type: the loop the single-stream benchmarks have always timed
                for (Map<String, Object> e : events) {
                    service.sendEventMap(e, type);
                }
                sent = events.size();
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            double gc = (gcMillis() - g0) / 1e3;
            double cpu = (threads.getCurrentThreadCpuTime() - c0) / 1e9 + gc;
            rates.add(sent / cpu);
            wall.add(sent / seconds);
            gcs.add(gc);
            rows = count[0];
            runtime.destroy();
        }
        return new JsonObject().add("rates", rates).add("wall", wall).add("gc", gcs)
                .add("rows", rows);
    }

    /** Sends one event (or advances the clock for a "@time" entry); 1 if an event was sent. */
    private static int send(EPEventService service, Map<String, Object> e, String type) {
        Object time = e.get(TIME);
        if (time != null) {
            service.advanceTime((Long) time);
            return 0;
        }
        Object named = e.get(TYPE);
        if (named != null) {
            // the extra "@type" entry is not a declared property: Esper's map types ignore it
            service.sendEventMap(e, (String) named);
            return 1;
        }
        service.sendEventMap(e, type);
        return 1;
    }

    private static final String TIME = "@time";
    private static final String TYPE = "@type";

    /** The events of a JSON-lines file, as maps of the declared Java types; a line with
     * "@type" is decoded with that type's properties, a "@time" line becomes a clock entry. */
    private static List<Map<String, Object>> read(Map<String, Map<String, Object>> schemas,
                                                  Map<String, Object> props, String path) throws Exception {
        List<Map<String, Object>> events = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            JsonObject json = Json.parse(line).asObject();
            JsonValue time = json.get(TIME);
            if (time != null) {
                Map<String, Object> tick = new HashMap<>();
                tick.put(TIME, time.asLong());
                events.add(tick);
                continue;
            }
            JsonValue named = json.get(TYPE);
            if (named != null) {
                String t = named.asString();
                json.remove(TYPE);
                Map<String, Object> e = event(schemas.get(t), json);
                e.put(TYPE, t);
                events.add(e);
            } else {
                events.add(event(props, json));
            }
        }
        return events;
    }

    /** Milliseconds the collectors have spent so far (they run outside the sending thread). */
    private static long gcMillis() {
        long total = 0;
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            total += Math.max(0, gc.getCollectionTime());
        }
        return total;
    }

    private static Class<?> javaType(String t) {
        switch (t) {
            case "string": return String.class;
            case "int": return Integer.class;
            case "long": return Long.class;
            case "double": return Double.class;
            case "boolean": return Boolean.class;
            default: throw new IllegalArgumentException("unsupported property type " + t);
        }
    }

    /** An event as a map of the declared Java types (numbers as double, int or long). */
    private static Map<String, Object> event(Map<String, Object> props, JsonObject json) {
        Map<String, Object> event = new HashMap<>();
        for (Member m : json) {
            JsonValue v = m.getValue();
            Object cls = props == null ? null : props.get(m.getName());
            Object value;
            if (v.isNull()) {
                value = null;
            } else if (v.isString()) {
                value = v.asString();
            } else if (v.isBoolean()) {
                value = v.asBoolean();
            } else if (cls == Integer.class) {
                value = v.asInt();
            } else if (cls == Long.class) {
                value = v.asLong();
            } else {
                value = v.asDouble();
            }
            event.put(m.getName(), value);
        }
        return event;
    }
}
