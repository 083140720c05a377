package dev.kepl.oracle;

import com.espertech.esper.common.client.EPCompiled;
import com.espertech.esper.common.client.EventBean;
import com.espertech.esper.common.client.EventType;
import com.espertech.esper.common.client.configuration.Configuration;
import com.espertech.esper.common.client.json.minimaljson.Json;
import com.espertech.esper.common.client.json.minimaljson.JsonArray;
import com.espertech.esper.common.client.json.minimaljson.JsonObject;
import com.espertech.esper.common.client.json.minimaljson.JsonValue;
import com.espertech.esper.common.client.json.minimaljson.Member;
import com.espertech.esper.common.client.util.EventTypeBusModifier;
import com.espertech.esper.compiler.client.CompilerArguments;
import com.espertech.esper.compiler.client.EPCompileException;
import com.espertech.esper.compiler.client.EPCompiler;
import com.espertech.esper.compiler.client.EPCompilerProvider;
import com.espertech.esper.runtime.client.EPDeployment;
import com.espertech.esper.runtime.client.EPRuntime;
import com.espertech.esper.runtime.client.EPRuntimeProvider;
import com.espertech.esper.runtime.client.EPStatement;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs conformance scenarios (JSON lines on stdin, written by tests/oracle/oracle.py)
 * through Esper 9 with an external clock, each in a fresh runtime, and prints JSON
 * lines: the rows each statement emitted at every expect step, or the error Esper
 * raised. One JVM serves many scenarios, so its start-up and warm-up are paid once.
 *
 * Input line: {"schemas": {type: {prop: type}}, "statements": [{"name", "epl"}],
 *              "steps": [{"time": t} | {"send": type, "event": {...}} | {"expect": true}]}
 * Output lines, each with "scenario": its input line's index (0-based):
 *   {"step": n, "rows": {stmt: {"new": [...], "old": [...]}}}, {"step": n, "error": msg},
 *   {"deploy_error": msg, "statement": name}, {"error": msg}; finally {"done": true}.
 */
public final class EsperOracle {

    /** Rows one statement produced since the previous expect step. */
    private static final class Collected {
        final List<JsonValue> inserted = new ArrayList<>();
        final List<JsonValue> removed = new ArrayList<>();
    }

    private EsperOracle() {
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int index = 0;
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            Output sink = new Output(out, index);
            try {
                run(index, Json.parse(line).asObject(), sink);
            } catch (Exception e) {
                sink.print(new JsonObject().add("error", message(e)));
            }
            sink.print(new JsonObject().add("done", true));
            index++;
        }
    }

    /** Prints result lines tagged with the scenario's index in the input. */
    private static final class Output {
        private final PrintStream out;
        private final int index;

        Output(PrintStream out, int index) {
            this.out = out;
            this.index = index;
        }

        void print(JsonObject line) {
            out.println(new JsonObject().add("scenario", index).merge(line));
        }
    }

    private static void run(int index, JsonObject doc, Output out) {
        Configuration config = new Configuration();
        config.getRuntime().getThreading().setInternalTimerEnabled(false);
        // @Priority and @Drop take effect only with prioritized execution.
        config.getRuntime().getExecution().setPrioritized(true);
        config.getCompiler().getByteCode().setAccessModifiersPublic();
        config.getCompiler().getByteCode().setBusModifierEventType(EventTypeBusModifier.BUS);
        JsonObject schemas = doc.get("schemas").asObject();
        for (Member type : schemas) {
            Map<String, Object> props = new LinkedHashMap<>();
            for (Member p : type.getValue().asObject()) {
                props.put(p.getName(), javaType(p.getValue().asString()));
            }
            config.getCommon().addEventType(type.getName(), props);
        }

        EPRuntime runtime = EPRuntimeProvider.getRuntime("kepl-oracle-" + index, config);
        runtime.getEventService().advanceTime(0);
        EPCompiler compiler = EPCompilerProvider.getCompiler();

        Map<String, Collected> collected = new LinkedHashMap<>();
        for (JsonValue s : doc.get("statements").asArray()) {
            String name = s.asObject().getString("name", "");
            String epl = s.asObject().getString("epl", "");
            EPStatement[] statements;
            try {
                EPCompiled compiled = null;
                for (int attempt = 0; compiled == null; attempt++) {
                    CompilerArguments cargs = new CompilerArguments(config);
                    cargs.getPath().add(runtime.getRuntimePath());
                    try {
                        compiled = compiler.compile(epl, cargs);
                    } catch (EPCompileException e) {
                        String quoted = attempt < 10 ? quoteKeyword(epl, e.getMessage()) : null;
                        if (quoted == null) {
                            throw e;
                        }
                        epl = quoted;
                    }
                }
                if (!epl.equals(s.asObject().getString("epl", ""))) {
                    out.print(new JsonObject().add("quoted", epl).add("statement", name));
                }
                EPDeployment deployment = runtime.getDeploymentService().deploy(compiled);
                statements = deployment.getStatements();
            } catch (Exception e) {
                out.print(new JsonObject().add("deploy_error", message(e)).add("statement", name));
                runtime.destroy();
                return;
            }
            Collected c = new Collected();
            collected.put(name, c);
            for (EPStatement stmt : statements) {
                stmt.addListener((newEvents, oldEvents, st, rt) -> {
                    addRows(c.inserted, newEvents);
                    addRows(c.removed, oldEvents);
                });
            }
        }

        int n = 0;
        for (JsonValue v : doc.get("steps").asArray()) {
            n++;
            JsonObject step = v.asObject();
            try {
                if (step.get("time") != null) {
                    runtime.getEventService().advanceTimeSpan(step.get("time").asLong());
                } else if (step.get("send") != null) {
                    String type = step.getString("send", "");
                    runtime.getEventService().sendEventMap(event(runtime, type, step.get("event").asObject()), type);
                } else if (step.get("expect") != null) {
                    JsonObject rows = new JsonObject();
                    for (Map.Entry<String, Collected> e : collected.entrySet()) {
                        JsonArray ins = new JsonArray();
                        e.getValue().inserted.forEach(ins::add);
                        JsonArray rem = new JsonArray();
                        e.getValue().removed.forEach(rem::add);
                        rows.add(e.getKey(), new JsonObject().add("new", ins).add("old", rem));
                        e.getValue().inserted.clear();
                        e.getValue().removed.clear();
                    }
                    out.print(new JsonObject().add("step", n).add("rows", rows));
                }
            } catch (Exception e) {
                out.print(new JsonObject().add("step", n).add("error", message(e)));
                break;
            }
        }
        runtime.destroy();
    }

    private static final Pattern RESERVED = Pattern.compile(
            "Incorrect syntax near '(\\w+)' \\(a reserved keyword\\).*?at line (\\d+) column (\\d+)");

    /**
     * The statement with the reserved keyword Esper complained about escaped in
     * backticks (a scenario may name a type, property or variable after one, e.g. Order
     * or limit), or null when the error is another one.
     */
    private static String quoteKeyword(String epl, String error) {
        Matcher m = error == null ? null : RESERVED.matcher(error);
        if (m == null || !m.find()) {
            return null;
        }
        String word = m.group(1);
        int line = Integer.parseInt(m.group(2));
        int offset = 0;
        for (int i = 1; i < line; i++) {
            offset = epl.indexOf('\n', offset) + 1;
        }
        int at = offset + Integer.parseInt(m.group(3));
        if (at + word.length() > epl.length() || !epl.regionMatches(at, word, 0, word.length())) {
            return null;
        }
        return epl.substring(0, at) + "`" + word + "`" + epl.substring(at + word.length());
    }

    private static String message(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + ": " + (m == null ? "" : m.replace('\n', ' '));
    }

    private static Class<?> javaType(String t) {
        switch (t) {
            case "string": return String.class;
            case "int": return Integer.class;
            case "long": return Long.class;
            case "double": return Double.class;
            case "float": return Float.class;
            case "short": return Short.class;
            case "byte": return Byte.class;
            case "boolean": return Boolean.class;
            default: throw new IllegalArgumentException("unknown property type " + t);
        }
    }

    /** The event as a map whose values have the declared Java types (Esper does not widen). */
    private static Map<String, Object> event(EPRuntime runtime, String typeName, JsonObject json) {
        EventType type = runtime.getEventTypeService().getEventTypePreconfigured(typeName);
        if (type == null) {
            type = runtime.getEventTypeService().getBusEventType(typeName);
        }
        Map<String, Object> event = new LinkedHashMap<>();
        if (type != null) {
            for (String p : type.getPropertyNames()) {
                event.put(p, null);
            }
        }
        for (Member m : json) {
            Class<?> cls = type == null ? null : type.getPropertyType(m.getName());
            event.put(m.getName(), fromJson(m.getValue(), cls));
        }
        return event;
    }

    private static Object fromJson(JsonValue v, Class<?> cls) {
        if (v.isNull()) {
            return null;
        }
        if (v.isBoolean()) {
            return v.asBoolean();
        }
        if (v.isString()) {
            return v.asString();
        }
        if (v.isNumber()) {
            double d = v.asDouble();
            if (cls == Integer.class || cls == int.class) {
                return (int) d;
            }
            if (cls == Long.class || cls == long.class) {
                return Long.parseLong(v.toString().replaceAll("\\.0*$", ""));
            }
            if (cls == Float.class || cls == float.class) {
                return (float) d;
            }
            if (cls == Short.class || cls == short.class) {
                return (short) d;
            }
            if (cls == Byte.class || cls == byte.class) {
                return (byte) d;
            }
            if (cls == Double.class || cls == double.class) {
                return d;
            }
            String text = v.toString();
            return text.contains(".") || text.contains("e") || text.contains("E") ? (Object) d : (Object) v.asLong();
        }
        if (v.isArray()) {
            List<Object> list = new ArrayList<>();
            for (JsonValue item : v.asArray()) {
                list.add(fromJson(item, null));
            }
            return list;
        }
        Map<String, Object> map = new LinkedHashMap<>();
        for (Member m : v.asObject()) {
            map.put(m.getName(), fromJson(m.getValue(), null));
        }
        return map;
    }

    private static void addRows(List<JsonValue> into, EventBean[] events) {
        if (events == null) {
            return;
        }
        for (EventBean e : events) {
            into.add(row(e));
        }
    }

    /** One output event as a JSON object of its columns. */
    private static JsonValue row(EventBean bean) {
        JsonObject obj = new JsonObject();
        Object underlying = bean.getUnderlying();
        for (String p : bean.getEventType().getPropertyNames()) {
            Object value;
            if (underlying instanceof Map && ((Map<?, ?>) underlying).containsKey(p)) {
                value = ((Map<?, ?>) underlying).get(p);
            } else {
                try {
                    value = bean.get(p);
                } catch (RuntimeException e) {
                    value = null;
                }
            }
            obj.add(p, toJson(value));
        }
        return obj;
    }

    private static JsonValue toJson(Object v) {
        if (v == null) {
            return Json.NULL;
        }
        if (v instanceof EventBean) {
            return row((EventBean) v);
        }
        if (v instanceof Boolean) {
            return Json.value((Boolean) v);
        }
        if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                return new JsonObject().add("$double", Double.toString(d));
            }
            return Json.value(d);
        }
        if (v instanceof BigDecimal) {
            return Json.value(((BigDecimal) v).doubleValue());
        }
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) {
            return Json.value(((Number) v).longValue());
        }
        if (v instanceof Map) {
            JsonObject obj = new JsonObject();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                obj.add(String.valueOf(e.getKey()), toJson(e.getValue()));
            }
            return obj;
        }
        if (v instanceof Collection) {
            JsonArray arr = new JsonArray();
            for (Object item : (Collection<?>) v) {
                arr.add(toJson(item));
            }
            return arr;
        }
        if (v.getClass().isArray()) {
            JsonArray arr = new JsonArray();
            for (int i = 0; i < Array.getLength(v); i++) {
                arr.add(toJson(Array.get(v, i)));
            }
            return arr;
        }
        return Json.value(String.valueOf(v));
    }
}
