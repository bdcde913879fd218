# Sourced by bench/run-*.sh (from the project root): the JDK and class path of the JMH benchmarks, and the lines that
# say where a figure was measured (machine, load, JDK, date). Build first: mvn -pl bench -am package -DskipTests
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JAVA="$JAVA_HOME/bin/java"
CP="bench/target/classes:$(cat bench/target/classpath.txt)"
echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# JDK: $("$JAVA" -version 2>&1 | head -1)"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
