package dev.taco.runtime.train;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Stopping well on SIGTERM or Ctrl-C (SIGINT), as Megatron-LM's {@code --exit-signal-handler}: the first signal asks
 * the training to stop after its current step ({@link Trainer} saves a checkpoint when {@code --save} is given, the
 * command line writes the partial report and plots and exits with 128 + the signal's number); a second one stops the
 * JVM at once.
 */
public final class StopSignal {
  private static final Logger log = LoggerFactory.getLogger(StopSignal.class);
  private static volatile String requested;
  private static volatile int exitCode;

  private StopSignal() {}

  /** Installs the handlers for SIGTERM and SIGINT (where the platform has them). */
  public static void install() {
    handle("TERM", 143);
    handle("INT", 130);
  }

  private static void handle(String name, int code) {
    try {
      sun.misc.Signal.handle(new sun.misc.Signal(name), s -> {
        if (requested != null) {
          log.warn("second SIG{}: stopping now", name);
          Runtime.getRuntime().halt(code);
        }
        exitCode = code;
        requested = "SIG" + name;
        log.warn("SIG{}: stopping after the current step (a second signal stops at once)", name);
      });
    } catch (IllegalArgumentException e) {
      log.debug("no handler for SIG{}: {}", name, e.getMessage());
    }
  }

  /** The signal that asked to stop ({@code SIGTERM}, {@code SIGINT}), or null. */
  public static String requested() {
    return requested;
  }

  /** The exit status a stopped run ends with: 128 + the signal's number. */
  public static int exitCode() {
    return exitCode;
  }
}
