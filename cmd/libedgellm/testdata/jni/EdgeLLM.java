// EdgeLLM: the Android path minus the phone. A Java class with native
// methods over a small JNI shim (edgellm_jni.c) over libedgellm's C API,
// as an Android app would have it. TestJNI compiles it with javac and runs
// it on the machine's JVM:
//
//   java -Djava.library.path=DIR EdgeLLM MODEL
//
// It streams greedy text from BOS into Java, then 64 tokens at temperature
// 100 (whole UTF-8 characters only, converted to UTF-16 by the shim: run
// with -Xcheck:jni, which aborts on malformed strings), pushes a thermal
// reading, and prints "jni: N passed, M failed".
public final class EdgeLLM {
    static { System.loadLibrary("edgellm_jni"); }

    /** Receives each generated token's text; return false to stop. */
    public interface TokenListener { boolean onToken(String text); }

    static native long engineLoad(String model);
    static native long sessionNew(long engine);
    static native int generate(long session, int nPredict, float temperature, long seed, TokenListener listener);
    static native int sessionReset(long session);
    static native int pushThermal(long session, int status);
    static native int sessionFree(long session);
    static native int engineFree(long engine);
    static native String lastError();

    public static void main(String[] args) {
        String golden = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
        int passed = 0, failed = 0;
        long engine = engineLoad(args[0]);
        if (engine == 0) {
            System.out.println("FAIL engineLoad: " + lastError());
            System.out.println("jni: 0 passed, 1 failed");
            System.exit(1);
        }
        long session = sessionNew(engine);
        StringBuilder text = new StringBuilder();
        int rc = generate(session, 64, 0f, 42, t -> { text.append(t); return true; });
        if (rc == 0 && text.toString().startsWith(golden)) { passed++; } else { failed++; System.out.println("FAIL generate rc " + rc + ": \"" + text + "\" " + lastError()); }
        System.out.println("java got: " + text);

        long second = sessionNew(engine); // a fresh context: from BOS again
        int[] n = {0};
        rc = generate(second, 32, 0f, 42, t -> ++n[0] < 3);
        if (rc == 7 && n[0] == 3) { passed++; } else { failed++; System.out.println("FAIL stop from Java: rc " + rc + " after " + n[0]); }

        // Temperature 100: byte tokens come up; every piece must be whole
        // characters (a lone surrogate would mean a split one).
        int[] bad = {0}, pieces = {0};
        StringBuilder hot = new StringBuilder();
        rc = sessionReset(second) == 0 ? generate(second, 64, 100f, 7, t -> {
            pieces[0]++;
            for (int i = 0; i < t.length(); i++) {
                char c = t.charAt(i);
                if (Character.isHighSurrogate(c)) {
                    if (i + 1 < t.length() && Character.isLowSurrogate(t.charAt(i + 1))) i++; else bad[0]++;
                } else if (Character.isLowSurrogate(c)) {
                    bad[0]++;
                }
            }
            hot.append(t);
            return true;
        }) : -1;
        if (rc == 0 && bad[0] == 0 && pieces[0] > 0) { passed++; } else { failed++; System.out.println("FAIL temperature 100: rc " + rc + ", " + bad[0] + " broken characters in " + pieces[0] + " pieces"); }
        System.out.println("java got at temperature 100: " + pieces[0] + " pieces, " + hot.length() + " UTF-16 units");

        if (pushThermal(session, 3) == 0) { passed++; } else { failed++; System.out.println("FAIL pushThermal: " + lastError()); }
        if (pushThermal(session, 9) == 1 && lastError().length() > 0) { passed++; } else { failed++; System.out.println("FAIL thermal status 9 accepted"); }
        if (sessionFree(second) == 0 && sessionFree(session) == 0 && engineFree(engine) == 0) { passed++; } else { failed++; System.out.println("FAIL free: " + lastError()); }
        if (sessionFree(session) == 2) { passed++; } else { failed++; System.out.println("FAIL double free not refused"); }
        System.out.println("jni: " + passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
