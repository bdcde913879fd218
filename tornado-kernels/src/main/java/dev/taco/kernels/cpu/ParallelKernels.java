package dev.taco.kernels.cpu;

import com.sun.source.tree.AssignmentTree;
import com.sun.source.tree.BinaryTree;
import com.sun.source.tree.BlockTree;
import com.sun.source.tree.BreakTree;
import com.sun.source.tree.CatchTree;
import com.sun.source.tree.ClassTree;
import com.sun.source.tree.CompilationUnitTree;
import com.sun.source.tree.CompoundAssignmentTree;
import com.sun.source.tree.ContinueTree;
import com.sun.source.tree.DoWhileLoopTree;
import com.sun.source.tree.EnhancedForLoopTree;
import com.sun.source.tree.ExpressionStatementTree;
import com.sun.source.tree.ForLoopTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.LabeledStatementTree;
import com.sun.source.tree.LambdaExpressionTree;
import com.sun.source.tree.MethodInvocationTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.ReturnTree;
import com.sun.source.tree.SwitchTree;
import com.sun.source.tree.Tree;
import com.sun.source.tree.TryTree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.tree.WhileLoopTree;
import com.sun.source.util.JavacTask;
import com.sun.source.util.SourcePositions;
import com.sun.source.util.TreePath;
import com.sun.source.util.TreePathScanner;
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
import java.lang.reflect.Modifier;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
 * {@code { final var x__p = x; ...; ParallelExecutor.split(a, b, (lo__, hi__) -> { for (int i = lo__; i < hi__; i++)
 * body' }); }} (the enclosing method's locals that the body reads are copied into finals, {@code body'} reads the
 * copies), compiled in memory by javac ({@code jdk.compiler}) as a copy of the class named {@code <Class>__Parallel}
 * in the same package, and defined next to it ({@link MethodHandles.Lookup#defineClass}). Only the class declaration
 * and its constructors are renamed, and member types are left out (the copy imports the original's); everything else
 * is compiled as written, on the same lines, so each iteration runs
 * exactly the Java code of the sequential kernel and results are bit-identical to calling the kernel directly, as long
 * as it honours the {@code @Parallel} contract (no iteration reads what another writes). As in any parallel loop,
 * {@code a} and {@code b} are evaluated once, before the iterations.
 *
 * <p>The source is read from the class path ({@code <package>/<Class>.java} next to the class file; the
 * tornado-kernels jar carries its kernel sources) or from a file given explicitly. Compiled once per class and JVM.
 *
 * <p>Refused with {@link IllegalArgumentException} naming {@code file:line}: a {@code @Parallel} loop not of the form
 * above; {@code return}, or a {@code break} / {@code continue label} that leaves it (an iteration cannot end the kernel
 * or the other iterations); a body that assigns a local of the enclosing method (a dependency between iterations);
 * a non-final static field or a static initialiser in the class (the copy would have its own state); anything javac
 * refuses in the copy (with javac's message), e.g. a checked exception thrown out of the loop body.
 */
public final class ParallelKernels {
  private ParallelKernels() {}

  /** Suffix of the rewritten class's name. */
  public static final String SUFFIX = "__Parallel";

  private record Compiled(Class<?> copy, Path source) {}

  private static final Map<Class<?>, Compiled> COMPILED = new ConcurrentHashMap<>();

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

  /**
   * As {@link #kernel(Class, String, MethodType)}, compiling from {@code source} (null: from the class path).
   *
   * @throws IllegalStateException if the class was already compiled from another source in this JVM
   */
  public static MethodHandle kernel(Class<?> kernelClass, Path source, String name, MethodType type) {
    Compiled c = COMPILED.computeIfAbsent(kernelClass, k -> new Compiled(define(k, source), source));
    if (!Objects.equals(c.source(), source)) {
      throw new IllegalStateException(kernelClass.getName() + " was compiled for several cores from "
          + (c.source() == null ? "its source on the class path" : c.source()) + " already; one copy per JVM");
    }
    try {
      return MethodHandles.privateLookupIn(c.copy(), MethodHandles.lookup()).findStatic(c.copy(), name, type);
    } catch (NoSuchMethodException | IllegalAccessException e) {
      boolean instance = Arrays.stream(kernelClass.getDeclaredMethods()).anyMatch(m -> m.getName()
          .equals(name) && !Modifier.isStatic(m.getModifiers()));
      throw new IllegalArgumentException(instance ? "kernels are static methods: " + kernelClass.getSimpleName() + "."
          + name + " is an instance method" : "no static kernel " + kernelClass.getSimpleName() + "." + name + type,
          e);
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
    String simple = kernelClass.getSimpleName();
    ClassTree cls = unit.getTypeDecls().stream().filter(t -> t instanceof ClassTree c
        && c.getSimpleName().contentEquals(simple)).map(t -> (ClassTree) t).findFirst()
        .orElseThrow(() -> new IllegalArgumentException(fileName + ": no top-level class " + simple));
    TreeMap<Integer, int[]> cuts = new TreeMap<>(); // start -> {end}; texts in `texts`
    Map<Integer, String> texts = new HashMap<>();
    StringBuilder imports = new StringBuilder();
    Function<Tree, String> at = t -> fileName + ":"
        + unit.getLineMap().getLineNumber(pos.getStartPosition(unit, t));
    // rename the class and its constructors, nothing else: other references keep meaning the original class
    for (Tree m : cls.getMembers()) {
      if (m instanceof VariableTree v && v.getModifiers().getFlags().contains(javax.lang.model.element.Modifier.STATIC)
          && !v.getModifiers().getFlags().contains(javax.lang.model.element.Modifier.FINAL)) {
        throw new IllegalArgumentException(at.apply(v) + ": static field '" + v.getName() + "' is not final: the "
            + "multi-core copy of " + simple + " would have its own (make it final, or pass the value as a parameter)");
      }
      if (m instanceof BlockTree b && b.isStatic()) {
        throw new IllegalArgumentException(at.apply(b) + ": a static initialiser would run again for the multi-core "
            + "copy of " + simple);
      }
      if (m instanceof ClassTree nested) { // the copy uses the original's member types: one Mode enum, not two
        int start = (int) pos.getStartPosition(unit, nested);
        cuts.put(start, new int[] {(int) pos.getEndPosition(unit, nested)});
        texts.put(start, newlines(source.substring(start, (int) pos.getEndPosition(unit, nested))));
        imports.append(" import ").append(kernelClass.getCanonicalName()).append('.').append(nested.getSimpleName())
            .append(';');
      }
      if (m instanceof MethodTree c && c.getName().contentEquals("<init>")) {
        renameAt(source, Math.max((int) pos.getStartPosition(unit, c), (int) pos.getEndPosition(unit,
            c.getModifiers())), "\\b" + simple + "\\s*\\(", simple,
            cuts, texts, at.apply(c));
      }
    }
    renameAt(source, Math.max((int) pos.getStartPosition(unit, cls), (int) pos.getEndPosition(unit,
        cls.getModifiers())), "\\b(class|record|enum|interface)\\s+" + simple + "\\b", simple, cuts, texts,
        at.apply(cls));
    new TreePathScanner<Void, Void>() {
      @Override
      public Void visitForLoop(ForLoopTree f, Void unused) {
        if (!isParallel(f)) {
          return super.visitForLoop(f, unused);
        }
        String where = at.apply(f);
        VariableTree v = (VariableTree) f.getInitializer().get(0);
        String i = v.getName().toString();
        if (f.getInitializer().size() != 1 || v.getInitializer() == null
            || !(f.getCondition() instanceof BinaryTree c) || c.getKind() != Tree.Kind.LESS_THAN
            || !(c.getLeftOperand() instanceof IdentifierTree l) || !l.getName().contentEquals(i)
            || f.getUpdate().size() != 1 || !isIncrement(f.getUpdate().get(0), i)) {
          throw new IllegalArgumentException(where + ": a @Parallel loop must read 'for (@Parallel int " + i
              + " = a; " + i + " < b; " + i + "++)'");
        }
        Tree stmt = getCurrentPath().getParentPath().getLeaf() instanceof LabeledStatementTree lab ? lab : f;
        String label = stmt instanceof LabeledStatementTree lab ? lab.getLabel() + ": " : "";
        checkNoEscape(f, where, stmt instanceof LabeledStatementTree lab ? lab.getLabel().toString() : null);
        Map<String, List<Integer>> uses = uses(f.getStatement(), unit, pos);
        Set<String> captured = new TreeSet<>(inScope(getCurrentPath(), stmt));
        captured.retainAll(uses.keySet());
        checkNoOuterAssignment(f.getStatement(), captured, at);
        int bodyStart = (int) pos.getStartPosition(unit, f.getStatement());
        StringBuilder body = new StringBuilder(text(source, pos, unit, f.getStatement()));
        uses.entrySet().stream().filter(e -> captured.contains(e.getKey()))
            .flatMap(e -> e.getValue().stream().map(p -> Map.entry(p, e.getKey())))
            .sorted(Map.Entry.<Integer, String>comparingByKey().reversed())
            .forEach(e -> body.insert(e.getKey() - bodyStart + e.getValue().length(), "__p"));
        StringBuilder r = new StringBuilder("{ ");
        captured.forEach(x -> r.append("final var ").append(x).append("__p = ").append(x).append("; "));
        r.append(ParallelExecutor.class.getName()).append(".split(").append(text(source, pos, unit,
            v.getInitializer())).append(", ").append(text(source, pos, unit, c.getRightOperand()))
            .append(", (lo__, hi__) -> { ").append(label).append("for (int ").append(i).append(" = lo__; ").append(i)
            .append(" < hi__; ").append(i).append("++) ").append(body).append(" }); }");
        int start = (int) pos.getStartPosition(unit, stmt);
        cuts.put(start, new int[] {(int) pos.getEndPosition(unit, f)});
        texts.put(start, newlines(source.substring(start, (int) pos.getStartPosition(unit, f))) + r);
        return null; // inner @Parallel loops run sequentially inside an iteration
      }
    }.scan(new TreePath(new TreePath(unit), cls), null);
    if (!imports.isEmpty()) { // on the package line (or the first line): every other line keeps its number
      int at0 = unit.getPackage() == null ? 0 : (int) pos.getEndPosition(unit, unit.getPackage()) + 1;
      cuts.put(at0, new int[] {at0});
      texts.put(at0, imports + (unit.getPackage() == null ? " " : ""));
    }
    StringBuilder out = new StringBuilder(source);
    for (Map.Entry<Integer, int[]> e : cuts.descendingMap().entrySet()) {
      out.replace(e.getKey(), e.getValue()[0], texts.get(e.getKey()));
    }
    return out.toString();
  }

  /** The line breaks of {@code text}, so that what replaces it keeps the following lines' numbers. */
  private static String newlines(String text) {
    return text.replaceAll("[^\\n]", "");
  }

  /** Replaces the name {@code simple} in the first match of {@code regex} at or after {@code from}. */
  private static void renameAt(String source, int from, String regex, String simple,
      TreeMap<Integer, int[]> cuts, Map<Integer, String> texts, String where) {
    Matcher m = Pattern.compile(regex).matcher(source);
    if (!m.find(Math.max(from, 0))) {
      throw new IllegalArgumentException(where + ": cannot find the declaration of " + simple);
    }
    int start = source.indexOf(simple, m.start() + (m.groupCount() > 0 ? m.group(1).length() : 0));
    cuts.put(start, new int[] {start + simple.length()});
    texts.put(start, simple + SUFFIX);
  }

  /** Names and start positions of the identifiers the body reads or writes (not method names of unqualified calls). */
  private static Map<String, List<Integer>> uses(Tree body, CompilationUnitTree unit, SourcePositions pos) {
    Map<String, List<Integer>> uses = new HashMap<>();
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitMethodInvocation(MethodInvocationTree m, Void unused) {
        if (!(m.getMethodSelect() instanceof IdentifierTree)) {
          scan(m.getMethodSelect(), null);
        }
        scan(m.getTypeArguments(), null);
        return scan(m.getArguments(), null);
      }

      @Override
      public Void visitIdentifier(IdentifierTree id, Void unused) {
        uses.computeIfAbsent(id.getName().toString(), k -> new ArrayList<>())
            .add((int) pos.getStartPosition(unit, id));
        return null;
      }
    }.scan(body, null);
    return uses;
  }

  /** The locals and parameters of the enclosing method declared before {@code stmt} in a scope that holds it. */
  private static List<String> inScope(TreePath loop, Tree stmt) {
    List<String> names = new ArrayList<>();
    Tree child = loop.getLeaf() == stmt ? stmt : loop.getParentPath().getLeaf();
    for (TreePath q = (loop.getLeaf() == stmt ? loop : loop.getParentPath()).getParentPath();
        q != null; child = q.getLeaf(), q = q.getParentPath()) {
      Tree t = q.getLeaf();
      if (t instanceof BlockTree b) {
        for (Tree s : b.getStatements()) {
          if (s == child) {
            break;
          }
          if (s instanceof VariableTree v) {
            names.add(v.getName().toString());
          }
        }
      } else if (t instanceof ForLoopTree fl) {
        fl.getInitializer().forEach(s -> {
          if (s instanceof VariableTree v) {
            names.add(v.getName().toString());
          }
        });
      } else if (t instanceof EnhancedForLoopTree e) {
        names.add(e.getVariable().getName().toString());
      } else if (t instanceof LambdaExpressionTree l) {
        l.getParameters().forEach(v -> names.add(v.getName().toString()));
      } else if (t instanceof CatchTree c) {
        names.add(c.getParameter().getName().toString());
      } else if (t instanceof TryTree tr) {
        tr.getResources().forEach(r -> {
          if (r instanceof VariableTree v) {
            names.add(v.getName().toString());
          }
        });
      } else if (t instanceof MethodTree m) {
        m.getParameters().forEach(v -> names.add(v.getName().toString()));
        break;
      } else if (t instanceof ClassTree) {
        break;
      }
    }
    return names;
  }

  /** Refuses assignments in the loop body to the enclosing method's locals (a dependency between iterations). */
  private static void checkNoOuterAssignment(Tree body, Set<String> outer,
      Function<Tree, String> at) {
    new TreeScanner<Void, Void>() {
      private void check(Tree target, Tree where) {
        if (target instanceof IdentifierTree id && outer.contains(id.getName().toString())) {
          throw new IllegalArgumentException(at.apply(where) + ": the @Parallel loop assigns '" + id.getName()
              + "', a local of the enclosing method: a dependency between iterations");
        }
      }

      @Override
      public Void visitAssignment(AssignmentTree a, Void unused) {
        check(a.getVariable(), a);
        return super.visitAssignment(a, unused);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, Void unused) {
        check(a.getVariable(), a);
        return super.visitCompoundAssignment(a, unused);
      }

      @Override
      public Void visitUnary(UnaryTree u, Void unused) {
        if (u.getKind() == Tree.Kind.PREFIX_INCREMENT || u.getKind() == Tree.Kind.POSTFIX_INCREMENT
            || u.getKind() == Tree.Kind.PREFIX_DECREMENT || u.getKind() == Tree.Kind.POSTFIX_DECREMENT) {
          check(u.getExpression(), u);
        }
        return super.visitUnary(u, unused);
      }
    }.scan(body, null);
  }

  private static boolean isParallel(ForLoopTree f) {
    return !f.getInitializer().isEmpty() && f.getInitializer().get(0) instanceof VariableTree v
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
  private static void checkNoEscape(ForLoopTree loop, String at, String ownLabel) {
    new TreeScanner<Void, Integer>() {
      private final Set<String> inner = new HashSet<>(); // labels declared inside the loop

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
        String l = c.getLabel() == null ? null : c.getLabel().toString();
        if (l != null && !inner.contains(l) && !l.equals(ownLabel)) { // continue of the loop itself: next iteration
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
    if (kernelClass.getEnclosingClass() != null) {
      throw new IllegalArgumentException(kernelClass.getName() + " is nested; @Parallel kernels are compiled for "
          + "several cores per top-level class");
    }
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
    Map<String, byte[]> classes = compile(name, rewrite(source, fileName, kernelClass), fileName, kernelClass);
    try {
      MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(kernelClass, MethodHandles.lookup());
      Class<?> copy = lookup.defineClass(classes.remove(name)); // the top-level class first, then what javac added
      for (byte[] b : new TreeMap<>(classes).values()) {
        lookup.defineClass(b);
      }
      return copy;
    } catch (IllegalAccessException e) {
      throw new IllegalStateException("cannot define " + name + " next to " + kernelClass.getName(), e);
    }
  }

  private static Map<String, byte[]> compile(String name, String source, String fileName, Class<?> kernelClass) {
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
    if (!ok || !classes.containsKey(name)) {
      String why = diags.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
          .map(d -> fileName + ":" + d.getLineNumber() + ": " + d.getMessage(null)).collect(Collectors.joining("\n"));
      throw new IllegalArgumentException("the multi-core copy of " + kernelClass.getSimpleName()
          + " does not compile:\n" + why);
    }
    Map<String, byte[]> out = new HashMap<>();
    classes.forEach((k, v) -> out.put(k, v.toByteArray()));
    return out;
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
