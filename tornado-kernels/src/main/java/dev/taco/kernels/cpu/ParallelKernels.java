package dev.taco.kernels.cpu;

import com.sun.source.tree.BreakTree;
import com.sun.source.tree.ClassTree;
import com.sun.source.tree.CompilationUnitTree;
import com.sun.source.tree.ContinueTree;
import com.sun.source.tree.DoWhileLoopTree;
import com.sun.source.tree.EnhancedForLoopTree;
import com.sun.source.tree.ExpressionStatementTree;
import com.sun.source.tree.ForLoopTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.LabeledStatementTree;
import com.sun.source.tree.LambdaExpressionTree;
import com.sun.source.tree.ReturnTree;
import com.sun.source.tree.SwitchTree;
import com.sun.source.tree.Tree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.tree.WhileLoopTree;
import com.sun.source.util.JavacTask;
import com.sun.source.util.SourcePositions;
import com.sun.source.util.TreeScanner;
import com.sun.source.util.Trees;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.stream.Collectors;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.FileObject;
import javax.tools.ForwardingJavaFileManager;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileManager;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * Runs {@code @Parallel} kernels on the JVM across cores (issue C part 4, DESIGN §5), without changing how they are
 * written: the kernel class's source is rewritten so that every outermost loop
 * {@code for (@Parallel int i = a; i < b; i++) body} becomes
 * {@code ParallelExecutor.split(a, b, (lo, hi) -> { for (int i = lo; i < hi; i++) body })}, compiled in memory by javac
 * ({@code jdk.compiler}) as a copy of the class named {@code <Class>__Parallel} in the same package, and defined next
 * to it ({@link MethodHandles.Lookup#defineClass}). Everything else in the class is compiled as written, so each
 * iteration runs exactly the Java code of the sequential kernel: results are bit-identical to calling the kernel
 * directly, as long as it honours the {@code @Parallel} contract (no iteration reads what another writes).
 *
 * <p>The source is read from the class path ({@code <package>/<Class>.java} next to the class file; the
 * tornado-kernels jar carries its kernel sources) or from a file given explicitly. Compiled once per class and JVM.
 *
 * <p>Rejected with {@link IllegalArgumentException} naming {@code file:line}: a {@code @Parallel} loop not of the form
 * above, {@code return} or a {@code break} / {@code continue label} leaving it (an iteration cannot end the kernel
 * or the other iterations),
 * and anything javac refuses in the rewritten copy, typically a local variable of the enclosing method that the loop
 * body assigns (lambdas capture only effectively final locals; such a loop carries a dependency anyway).
 */
public final class ParallelKernels {
  private ParallelKernels() {}

  /** Suffix of the rewritten class's name. */
  public static final String SUFFIX = "__Parallel";

  private static final Map<Class<?>, Class<?>> COMPILED = new ConcurrentHashMap<>();

  /**
   * The multi-core version of kernel {@code name} of {@code kernelClass} (a static method of that type), from the
   * class's source on the class path.
   *
   * @throws IllegalArgumentException if there is no such source or kernel, or the source cannot be rewritten (see
   *     the class doc)
   * @throws IllegalStateException if no Java compiler is available (a JRE without {@code jdk.compiler})
   */
  public static MethodHandle kernel(Class<?> kernelClass, String name, MethodType type) {
    return kernel(kernelClass, null, name, type);
  }

  /** As {@link #kernel(Class, String, MethodType)}, compiling from {@code source} (null: from the class path). */
  public static MethodHandle kernel(Class<?> kernelClass, Path source, String name, MethodType type) {
    Class<?> parallel = COMPILED.computeIfAbsent(kernelClass, c -> define(c, source));
    try {
      return MethodHandles.privateLookupIn(parallel, MethodHandles.lookup()).findStatic(parallel, name, type);
    } catch (NoSuchMethodException | IllegalAccessException e) {
      throw new IllegalArgumentException("no kernel " + kernelClass.getSimpleName() + "." + name + type, e);
    }
  }

  /**
   * The rewritten source of {@code kernelClass} (the class doc's transformation), for reading and tests.
   *
   * @param fileName the name used in error messages
   */
  public static String rewrite(String source, String fileName, Class<?> kernelClass) {
    JavacTask task = (JavacTask) compiler().getTask(null, null, null, List.of("-proc:none"), null,
        List.of(new Source(kernelClass.getName(), source)));
    CompilationUnitTree unit;
    try {
      unit = task.parse().iterator().next();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    SourcePositions pos = Trees.instance(task).getSourcePositions();
    List<int[]> cuts = new ArrayList<>(); // {start, end} of each loop, and its replacement below
    List<String> replacements = new ArrayList<>();
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitForLoop(ForLoopTree f, Void unused) {
        if (!isParallel(f)) {
          return super.visitForLoop(f, unused);
        }
        String at = fileName + ":" + unit.getLineMap().getLineNumber(pos.getStartPosition(unit, f));
        VariableTree v = (VariableTree) f.getInitializer().get(0);
        String i = v.getName().toString();
        if (v.getInitializer() == null || !(f.getCondition() instanceof com.sun.source.tree.BinaryTree c)
            || c.getKind() != Tree.Kind.LESS_THAN || !(c.getLeftOperand() instanceof IdentifierTree l)
            || !l.getName().contentEquals(i) || f.getUpdate().size() != 1 || !isIncrement(f.getUpdate().get(0), i)) {
          throw new IllegalArgumentException(at + ": a @Parallel loop must read 'for (@Parallel int " + i
              + " = a; " + i + " < b; " + i + "++)'");
        }
        checkNoEscape(f, at);
        String from = text(source, pos, unit, v.getInitializer());
        String to = text(source, pos, unit, c.getRightOperand());
        String body = text(source, pos, unit, f.getStatement());
        cuts.add(new int[] {(int) pos.getStartPosition(unit, f), (int) pos.getEndPosition(unit, f)});
        replacements.add("ParallelExecutor.split(" + from + ", " + to + ", (lo__, hi__) -> { for (int " + i
            + " = lo__; " + i + " < hi__; " + i + "++) " + body + " });");
        return null; // inner @Parallel loops run sequentially inside an iteration
      }
    }.scan(unit, null);
    StringBuilder out = new StringBuilder(source);
    for (int k = cuts.size() - 1; k >= 0; k--) {
      out.replace(cuts.get(k)[0], cuts.get(k)[1], replacements.get(k));
    }
    String simple = kernelClass.getSimpleName();
    String renamed = out.toString().replaceAll("\\b" + simple + "\\b", Matcher.quoteReplacement(simple + SUFFIX));
    // the import goes after the package declaration (the first ';' of the unit, which starts with it)
    int pkgEnd = renamed.indexOf(';', (int) pos.getStartPosition(unit, unit.getPackage())) + 1;
    return renamed.substring(0, pkgEnd) + " import " + ParallelExecutor.class.getName() + ";"
        + renamed.substring(pkgEnd);
  }

  private static boolean isParallel(ForLoopTree f) {
    return f.getInitializer().size() == 1 && f.getInitializer().get(0) instanceof VariableTree v
        && v.getModifiers().getAnnotations().stream().anyMatch(a -> {
          String n = a.getAnnotationType().toString();
          return n.equals("Parallel") || n.endsWith(".Parallel");
        });
  }

  private static boolean isIncrement(ExpressionStatementTree u, String i) {
    return u.getExpression() instanceof UnaryTree t
        && (t.getKind() == Tree.Kind.POSTFIX_INCREMENT || t.getKind() == Tree.Kind.PREFIX_INCREMENT)
        && t.getExpression() instanceof IdentifierTree id && id.getName().contentEquals(i);
  }

  /** Rejects {@code return} in the loop and {@code break}/{@code continue} that leave it (not nested loops' own). */
  private static void checkNoEscape(ForLoopTree loop, String at) {
    new TreeScanner<Void, Integer>() {
      private final java.util.Set<String> inner = new java.util.HashSet<>(); // labels declared inside the loop

      @Override
      public Void visitReturn(ReturnTree r, Integer depth) {
        throw new IllegalArgumentException(at + ": 'return' inside a @Parallel loop would end one iteration's "
            + "share of the work, not the kernel");
      }

      @Override
      public Void visitBreak(BreakTree b, Integer depth) {
        if (b.getLabel() != null ? !inner.contains(b.getLabel().toString()) : depth == 0) {
          throw new IllegalArgumentException(at + ": 'break' out of a @Parallel loop (iterations are independent; "
              + "none can stop the others)");
        }
        return null;
      }

      @Override
      public Void visitContinue(ContinueTree c, Integer depth) {
        if (c.getLabel() != null && !inner.contains(c.getLabel().toString())) {
          throw new IllegalArgumentException(at + ": 'continue " + c.getLabel() + "' leaves a @Parallel loop");
        }
        return null;
      }

      @Override
      public Void visitLambdaExpression(LambdaExpressionTree l, Integer depth) {
        return null; // a return there is the lambda's own
      }

      @Override
      public Void visitClass(ClassTree c, Integer depth) {
        return null;
      }

      @Override
      public Void visitForLoop(ForLoopTree f, Integer depth) {
        return super.visitForLoop(f, depth + 1);
      }

      @Override
      public Void visitEnhancedForLoop(EnhancedForLoopTree f, Integer depth) {
        return super.visitEnhancedForLoop(f, depth + 1);
      }

      @Override
      public Void visitWhileLoop(WhileLoopTree w, Integer depth) {
        return super.visitWhileLoop(w, depth + 1);
      }

      @Override
      public Void visitDoWhileLoop(DoWhileLoopTree w, Integer depth) {
        return super.visitDoWhileLoop(w, depth + 1);
      }

      @Override
      public Void visitSwitch(SwitchTree s, Integer depth) {
        return super.visitSwitch(s, depth + 1);
      }

      @Override
      public Void visitLabeledStatement(LabeledStatementTree l, Integer depth) {
        inner.add(l.getLabel().toString());
        return super.visitLabeledStatement(l, depth);
      }
    }.scan(loop.getStatement(), 0);
  }

  private static String text(String source, SourcePositions pos, CompilationUnitTree unit, Tree t) {
    return source.substring((int) pos.getStartPosition(unit, t), (int) pos.getEndPosition(unit, t));
  }

  private static Class<?> define(Class<?> kernelClass, Path sourceFile) {
    String fileName = kernelClass.getSimpleName() + ".java";
    String source;
    try {
      if (sourceFile != null) {
        source = Files.readString(sourceFile);
        fileName = sourceFile.toString();
      } else {
        try (InputStream in = kernelClass.getResourceAsStream(fileName)) {
          if (in == null) {
            throw new IllegalArgumentException("no source " + kernelClass.getName().replace('.', '/') + ".java on "
                + "the class path: @Parallel kernels are compiled for several cores from their source (pass the "
                + "file to ParallelKernels.kernel)");
          }
          source = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    String name = kernelClass.getName() + SUFFIX;
    byte[] bytes = compile(name, rewrite(source, fileName, kernelClass), fileName, kernelClass);
    try {
      return MethodHandles.privateLookupIn(kernelClass, MethodHandles.lookup()).defineClass(bytes);
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("cannot define " + name + " next to " + kernelClass.getName(), e);
    }
  }

  private static byte[] compile(String name, String source, String fileName, Class<?> kernelClass) {
    JavaCompiler javac = compiler();
    DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
    StandardJavaFileManager std = javac.getStandardFileManager(diags, null, StandardCharsets.UTF_8);
    Map<String, ByteArrayOutputStream> classes = new HashMap<>();
    JavaFileManager fm = new ForwardingJavaFileManager<>(std) {
      @Override
      public JavaFileObject getJavaFileForOutput(Location location, String className, JavaFileObject.Kind kind,
          FileObject sibling) {
        return new SimpleJavaFileObject(URI.create("mem:///" + className.replace('.', '/') + ".class"), kind) {
          @Override
          public OutputStream openOutputStream() {
            return classes.computeIfAbsent(className, k -> new ByteArrayOutputStream());
          }
        };
      }
    };
    String cp = String.join(java.io.File.pathSeparator, System.getProperty("java.class.path"),
        location(kernelClass), location(ParallelExecutor.class));
    boolean ok = javac.getTask(null, fm, diags, List.of("-proc:none", "-classpath", cp, "-g"), null,
        List.of(new Source(name, source))).call();
    if (!ok || !classes.containsKey(name) || classes.size() != 1) {
      String why = diags.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
          .map(d -> "  " + d.getMessage(null)).collect(Collectors.joining("\n"));
      throw new IllegalArgumentException(fileName + ": the @Parallel rewrite of " + kernelClass.getSimpleName()
          + (ok ? " must be one top-level class without nested classes" : " does not compile:\n" + why
          + "\n(a @Parallel loop body may only read, not assign, the enclosing method's locals)"));
    }
    return classes.get(name).toByteArray();
  }

  private static String location(Class<?> c) {
    try {
      return Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    } catch (Exception e) {
      return "";
    }
  }

  private static JavaCompiler compiler() {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    if (javac == null) {
      throw new IllegalStateException("no Java compiler (module jdk.compiler): multi-core @Parallel kernels need a "
          + "JDK, not a JRE; call the kernel directly to run it on one core");
    }
    return javac;
  }

  /** An in-memory compilation unit. */
  private static final class Source extends SimpleJavaFileObject {
    private final String text;

    Source(String className, String text) {
      super(URI.create("mem:///" + className.replace('.', '/') + ".java"), Kind.SOURCE);
      this.text = text;
    }

    @Override
    public CharSequence getCharContent(boolean ignoreEncodingErrors) {
      return text;
    }
  }
}
