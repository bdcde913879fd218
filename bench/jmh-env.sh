# Sourced by bench/run-*.sh (from the project root): builds what is missing (./taco build: the JDK >= 25 that ./taco
# finds, JAVA_HOME if it is one, else /usr/lib/jvm/*), then sets the JDK and class path of the benchmarks and prints
# the lines that say where a figure was measured (machine, load, JDK, date).
JAVA_HOME=$(./taco build)
JAVA="$JAVA_HOME/bin/java"
CP="bench/target/classes:$(cat bench/target/classpath.txt)"
echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# JDK: $("$JAVA" -version 2>&1 | head -1)"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
