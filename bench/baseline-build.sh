#!/usr/bin/env bash
# Sourced without arguments by bench/run-train-step.sh and bench/run-codec-alt.sh (after bench/jmh-env.sh): takes the
# baseline revision off the caller's arguments when the first is not key=value (default 2f8c3ff, the last commit
# before issue G; the caller's "$@" is left with its key=value arguments), exports that commit with git archive into
# ~/.cache/taco/train-step-baseline/<rev>/ (outside the tree: ../shared/tools/device-bundle.sh copies every
# */target/*.jar below it) and builds it there once (Maven, offline, no install). Sets rev, base and base_cp (the
# class path of its bench module and dependencies).
rev_arg=2f8c3ff
if [ $# -gt 0 ] && [[ "$1" != *=* ]]; then rev_arg=$1; shift; fi
rev=$(git rev-parse --short --verify -q "$rev_arg^{commit}") \
  || { echo "bench: '$rev_arg' is not a commit of this repository (the baseline revision)" >&2; exit 2; }
base="${XDG_CACHE_HOME:-$HOME/.cache}/taco/train-step-baseline/$rev"
export MAVEN_OPTS="${MAVEN_OPTS:---sun-misc-unsafe-memory-access=allow}"
if [ ! -f "$base/bench/target/classpath.txt" ]; then
  rm -rf "$base" && mkdir -p "$base"
  git archive "$rev" | tar -x -C "$base"
  echo "# building $rev in $base (once) ..." >&2
  log=$(mktemp)
  if ! (cd "$base" && JAVA_HOME="$JAVA_HOME" PATH="$JAVA_HOME/bin:$PATH" mvn -B -q -ntp -o -DskipTests package -pl bench \
    -am) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log" && rm -rf "$base"; echo "bench: building the baseline $rev failed" >&2; exit 1
  fi
  rm -f "$log"
fi
base_cp="$base/bench/target/classes:$(cat "$base/bench/target/classpath.txt")"
