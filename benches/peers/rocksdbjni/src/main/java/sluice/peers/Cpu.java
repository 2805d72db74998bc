package sluice.peers;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The process's CPU time so far, every thread included, exited ones too: the client thread,
 * RocksDB's background and subcompaction threads, and the JVM's own (JIT compiler, garbage
 * collector). It is read from /proc/self/stat, in clock ticks of 10 ms (the JVM's
 * getProcessCpuTime has the same resolution: it calls times()); the fields are Sluice's
 * {@code cpu} object's.
 */
record Cpu(double user, double system) {
    /** Linux's USER_HZ: /proc reports CPU times in 1/100 s. */
    private static final double TICKS_PER_SECOND = 100.0;

    static Cpu now() {
        try {
            // Fields 14 and 15 (utime, stime) follow the command name, which is in parentheses
            // and may hold spaces: count from the last ')'.
            String stat = Files.readString(Path.of("/proc/self/stat"));
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            return new Cpu(Long.parseLong(f[11]) / TICKS_PER_SECOND, Long.parseLong(f[12]) / TICKS_PER_SECOND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    double total() {
        return user + system;
    }

    /** The CPU time spent since {@code before}, rounded to the ticks it is counted in (so
     * that 0.85 does not print as 0.8499999999999999). */
    Cpu since(Cpu before) {
        return new Cpu(round(user - before.user), round(system - before.system));
    }

    private static double round(double seconds) {
        return Math.round(seconds * TICKS_PER_SECOND) / TICKS_PER_SECOND;
    }

    Json json() {
        return new Json().put("user_seconds", user).put("system_seconds", system)
                .put("total_seconds", round(total()));
    }
}
