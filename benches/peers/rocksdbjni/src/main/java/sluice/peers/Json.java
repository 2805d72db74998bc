package sluice.peers;

import java.util.List;

/**
 * One JSON object, built field by field in the order the fields are put (the other peers
 * print theirs in a fixed order too). Values: String, Long, Integer, Double, Boolean, a nested
 * Json, or a List of those. No dependency: the program's only one is rocksdbjni.
 */
final class Json {
    private final StringBuilder b = new StringBuilder("{");

    Json put(String name, Object value) {
        if (b.length() > 1) {
            b.append(',');
        }
        quote(b, name);
        b.append(':');
        render(b, value);
        return this;
    }

    @Override
    public String toString() {
        return b + "}";
    }

    private static void render(StringBuilder b, Object v) {
        if (v instanceof String s) {
            quote(b, s);
        } else if (v instanceof Double d) {
            // Seconds and rates are finite; a NaN or infinity would not be JSON.
            b.append(Double.isFinite(d) ? d.toString() : "0");
        } else if (v instanceof List<?> list) {
            b.append('[');
            for (int i = 0; i < list.size(); i++) {
                if (i > 0) {
                    b.append(',');
                }
                render(b, list.get(i));
            }
            b.append(']');
        } else {
            b.append(v); // Long, Integer, Boolean, Json
        }
    }

    private static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append('"');
    }
}
