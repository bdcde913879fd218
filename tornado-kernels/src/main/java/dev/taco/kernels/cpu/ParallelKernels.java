package dev.taco.kernels.cpu;

import com.sun.source.tree.AssignmentTree;
import com.sun.source.tree.BinaryTree;
import com.sun.source.tree.BlockTree;
import com.sun.source.tree.BreakTree;
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
import com.sun.source.tree.MemberSelectTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.PrimitiveTypeTree;
import com.sun.source.tree.ReturnTree;
import com.sun.source.tree.SwitchTree;
import com.sun.source.tree.Tree;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;
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
 * body' }); }} (the enclosing method's locals that the body reads, found by symbol after javac's attribution, are
 * copied into finals and {@code body'} reads the copies), compiled in memory by javac ({@code jdk.compiler}) as a copy
 * of the class named {@code <Class>__Parallel} in the same package, and defined next to it
 * ({@link MethodHandles.Lookup#defineClass}). In the copy only the class declaration and its constructors are
 * renamed; {@code K.privateMember} becomes the copy's own; non-private member types are the original's (imported)
 * and non-constant {@code static final} fields are initialised from the original's (one lookup table, not two).
 * Everything else is compiled as written, on the same lines, so each iteration runs exactly the Java code of the
 * sequential kernel and results are bit-identical to calling the kernel directly, as long as it honours the
 * {@code @Parallel} contract (no iteration reads what another writes). As in any parallel loop, {@code a} and
 * {@code b} are evaluated once, before the iterations. {@code @Parallel} loops inside member types run sequentially,
 * and since the copy sees the original's member types from outside, their private members are out of its reach
 * (javac says so, with the line). Other top-level types of the file are taken from the class path.
 *
 * <p>The source is read from the class path ({@code <package>/<Class>.java} next to the class file; the
 * tornado-kernels jar carries its kernel sources) or from a file given explicitly. Compiled once per class and JVM.
 *
 * <p>Refused with {@link IllegalArgumentException} naming {@code file:line}: a {@code @Parallel} loop not of the form
 * above (an {@code int} counter, {@code <}, {@code ++}; no for-each); {@code return}, or a {@code break} /
 * {@code continue label} that leaves it (an iteration cannot end the kernel or the other iterations); a body that
 * assigns the loop variable or a local of the enclosing method (a dependency between iterations); a non-final static
 * field, a private non-constant static final or a static initialiser (the copy would have its own state); anything
 * javac refuses in the copy (with javac's message), e.g. a checked exception thrown out of the loop body.
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
  public static MethodHandle kernel(Class<?> kernelClass, Path sourceFile, String name, MethodType type) {
    Path source = sourceFile == null ? null : sourceFile.toAbsolutePath().normalize();
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
    JavacTask task = (JavacTask) compiler().getTask(null, null, new DiagnosticCollector<>(), List.of("-proc:none",
        "-classpath", classPath(kernelClass)), null, List.of(new Source(kernelClass.getName(), source)));
    CompilationUnitTree unit;
    String simple = kernelClass.getSimpleName();
    ClassTree cls;
    List<Tree> members; // as written: attribution adds a default constructor that is not in the source
    try {
      unit = task.parse().iterator().next();
      cls = unit.getTypeDecls().stream().filter(t -> t instanceof ClassTree c
          && c.getSimpleName().contentEquals(simple)).map(t -> (ClassTree) t).findFirst()
          .orElseThrow(() -> new IllegalArgumentException(fileName + ": no top-level class " + simple));
      members = List.copyOf(cls.getMembers());
      task.analyze(); // types and symbols: renames follow declarations, not spellings (errors surface at compile)
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Trees trees = Trees.instance(task);
    SourcePositions pos = trees.getSourcePositions();
    if (cls.getKind() == Tree.Kind.ENUM || cls.getKind() == Tree.Kind.RECORD) {
      throw new IllegalArgumentException(fileName + ": " + simple + " is " + (cls.getKind() == Tree.Kind.ENUM ? "an enum"
          : "a record") + "; @Parallel kernels are compiled for several cores from classes and interfaces");
    }
    TreePath clsPath = new TreePath(new TreePath(unit), cls);
    Element clsElement = trees.getElement(clsPath);
    Edits edits = new Edits(source);
    for (Tree t : unit.getTypeDecls()) { // other top-level types of the file are on the class path already
      if (t != cls && pos.getStartPosition(unit, t) >= 0) {
        int start = (int) pos.getStartPosition(unit, t);
        int end = (int) pos.getEndPosition(unit, t);
        edits.put(start, end, newlines(source.substring(start, end)));
      }
    }
    Function<Tree, String> at = t -> fileName + ":" + unit.getLineMap().getLineNumber(pos.getStartPosition(unit, t));
    StringBuilder imports = new StringBuilder();
    Set<Tree> memberTypes = new HashSet<>();
    for (Tree m : members) {
      Set<javax.lang.model.element.Modifier> flags = m instanceof VariableTree v
          ? trees.getElement(new TreePath(clsPath, v)).getModifiers() : Set.of();
      if (m instanceof VariableTree v && flags.contains(javax.lang.model.element.Modifier.STATIC)) {
        staticField(v, trees, new TreePath(clsPath, v), simple, at, pos, unit, edits);
      }
      if (m instanceof BlockTree b && b.isStatic()) {
        throw new IllegalArgumentException(at.apply(b) + ": a static initialiser would run again for the multi-core "
            + "copy of " + simple);
      }
      if (m instanceof ClassTree nested
          && nested.getModifiers().getFlags().contains(javax.lang.model.element.Modifier.PRIVATE)) {
        checkNoStaticState(nested, trees, new TreePath(clsPath, nested), at);
      } else if (m instanceof ClassTree nested) {
        // the copy uses the original's member types (one Mode enum, not two); private ones stay in the copy
        memberTypes.add(nested);
        int start = (int) pos.getStartPosition(unit, nested);
        int end = (int) pos.getEndPosition(unit, nested);
        edits.put(start, end, newlines(source.substring(start, end)));
        imports.append(" import ").append(kernelClass.getCanonicalName()).append('.').append(nested.getSimpleName())
            .append(';');
      }
      if (m instanceof MethodTree c && c.getName().contentEquals("<init>")) {
        renameAt(source, Math.max((int) pos.getStartPosition(unit, c), (int) pos.getEndPosition(unit,
            c.getModifiers())), "\\b" + simple + "\\s*\\(", simple, edits, at.apply(c));
      }
    }
    renameAt(source, Math.max((int) pos.getStartPosition(unit, cls), (int) pos.getEndPosition(unit,
        cls.getModifiers())), "\\b(class|record|enum|interface)\\s+" + simple + "\\b", simple, edits,
        at.apply(cls));
    // K.privateMember in the copy means the copy's own (the original's is out of reach)
    new TreePathScanner<Void, Void>() {
      @Override
      public Void visitClass(ClassTree c, Void unused) {
        return memberTypes.contains(c) ? null : super.visitClass(c, unused);
      }

      @Override
      public Void visitMemberSelect(MemberSelectTree ms, Void unused) {
        redirect(ms.getExpression());
        return super.visitMemberSelect(ms, unused);
      }

      @Override
      public Void visitMemberReference(com.sun.source.tree.MemberReferenceTree mr, Void unused) {
        redirect(mr.getQualifierExpression());
        return super.visitMemberReference(mr, unused);
      }

      /** {@code K.m} / {@code p.K.m} / {@code K::m} of a private member: the copy's own (the original's is private). */
      private void redirect(Tree qualifier) {
        Element member = trees.getElement(getCurrentPath());
        if (member != null && member.getModifiers().contains(javax.lang.model.element.Modifier.PRIVATE)
            && clsElement.equals(trees.getElement(new TreePath(getCurrentPath(), qualifier)))) {
          edits.put((int) pos.getStartPosition(unit, qualifier), (int) pos.getEndPosition(unit, qualifier),
              simple + SUFFIX);
        }
      }
    }.scan(clsPath, null);
    new TreePathScanner<Void, Void>() {
      @Override
      public Void visitClass(ClassTree c, Void unused) {
        return memberTypes.contains(c) ? null : super.visitClass(c, unused);
      }

      @Override
      public Void visitEnhancedForLoop(EnhancedForLoopTree e, Void unused) {
        if (isParallel(e.getVariable())) {
          throw new IllegalArgumentException(at.apply(e) + ": a @Parallel loop must read 'for (@Parallel int i = a; "
              + "i < b; i++)', not a for-each");
        }
        return super.visitEnhancedForLoop(e, unused);
      }

      @Override
      public Void visitForLoop(ForLoopTree f, Void unused) {
        if (f.getInitializer().isEmpty() || !(f.getInitializer().get(0) instanceof VariableTree v)
            || !isParallel(v)) {
          return super.visitForLoop(f, unused);
        }
        String where = at.apply(f);
        String i = v.getName().toString();
        if (f.getInitializer().size() != 1 || v.getInitializer() == null
            || !(v.getType() instanceof PrimitiveTypeTree t) || t.getPrimitiveTypeKind() != TypeKind.INT
            || !(f.getCondition() instanceof BinaryTree c) || c.getKind() != Tree.Kind.LESS_THAN
            || !(c.getLeftOperand() instanceof IdentifierTree l) || !l.getName().contentEquals(i)
            || f.getUpdate().size() != 1 || !isIncrement(f.getUpdate().get(0), i)) {
          throw new IllegalArgumentException(where + ": a @Parallel loop must read 'for (@Parallel int " + i
              + " = a; " + i + " < b; " + i + "++)'");
        }
        TreePath loop = getCurrentPath();
        javax.lang.model.type.TypeMirror bound = trees.getTypeMirror(new TreePath(new TreePath(loop, c),
            c.getRightOperand()));
        if (bound == null || !Set.of(TypeKind.INT, TypeKind.SHORT, TypeKind.BYTE, TypeKind.CHAR)
            .contains(bound.getKind())) {
          throw new IllegalArgumentException(where + ": the bound of a @Parallel loop must be an int (here "
              + bound + ")");
        }
        Tree stmt = loop.getParentPath().getLeaf() instanceof LabeledStatementTree lab ? lab : f;
        String label = stmt instanceof LabeledStatementTree lab ? lab.getLabel() + ": " : "";
        checkNoEscape(f, where, stmt instanceof LabeledStatementTree lab ? lab.getLabel().toString() : null);
        Set<Element> captured = captured(trees, new TreePath(loop, f.getStatement()),
            trees.getElement(new TreePath(loop, v)), at, pos, unit, edits);
        int bodyStart = (int) pos.getStartPosition(unit, f.getStatement());
        StringBuilder head = new StringBuilder(newlines(source.substring((int) pos.getStartPosition(unit, stmt),
            (int) pos.getStartPosition(unit, f)))).append("{ final int lo__b = ")
            .append(edits.take(pos.getStartPosition(unit, v.getInitializer()), pos.getEndPosition(unit,
                v.getInitializer()))).append("; final int hi__b = ")
            .append(edits.take(pos.getStartPosition(unit, c.getRightOperand()), pos.getEndPosition(unit,
                c.getRightOperand()))).append("; ");
        captured.stream().map(e -> e.getSimpleName().toString()).sorted().forEach(x -> head.append("final var ")
            .append(x).append("__p = ").append(x).append("; "));
        head.append("ParallelExecutor.split(lo__b, hi__b")
            .append(", (lo__, hi__) -> { ").append(label).append("for (int ").append(i).append(" = lo__; ").append(i)
            .append(" < hi__; ").append(i).append("++) ");
        edits.take(pos.getStartPosition(unit, stmt), bodyStart); // the old header goes, with any edits in it
        edits.put((int) pos.getStartPosition(unit, stmt), bodyStart, head + newlines(source.substring(
            (int) pos.getStartPosition(unit, f), bodyStart)));
        int end = (int) pos.getEndPosition(unit, f);
        edits.put(end, end, " }); }");
        return null; // inner @Parallel loops run sequentially inside an iteration
      }
    }.scan(clsPath, null);
    // through an import: a local, parameter or field named like the package's first part (dev) would obscure a
    // qualified name (JLS 6.4.2)
    imports.append(" import ").append(ParallelExecutor.class.getName()).append(';');
    if (unit.getPackage() == null && !memberTypes.isEmpty()) {
      throw new IllegalArgumentException(fileName + ": " + simple + " is in the unnamed package and has member types, "
          + "which the multi-core copy imports from it: put the class in a package");
    }
    if (!imports.isEmpty()) { // on the package line (or the first line): every other line keeps its number
      int at0 = unit.getPackage() == null ? 0 : (int) pos.getEndPosition(unit, unit.getPackage());
      edits.put(at0, at0, imports + " ");
    }
    return edits.take(0, source.length());
  }

  /** A private member type stays in the copy, so it must not hold static state (the copy's would be another). */
  private static void checkNoStaticState(ClassTree type, Trees trees, TreePath path, Function<Tree, String> at) {
    for (Tree m : type.getMembers()) {
      Element e = m instanceof VariableTree ? trees.getElement(new TreePath(path, m)) : null;
      boolean state = e != null && e.getModifiers().contains(javax.lang.model.element.Modifier.STATIC)
          && !(e.getModifiers().contains(javax.lang.model.element.Modifier.FINAL)
          && ((VariableElement) e).getConstantValue() != null);
      if (state || m instanceof BlockTree b && b.isStatic()) {
        throw new IllegalArgumentException(at.apply(m) + ": private member type " + type.getSimpleName() + " holds "
            + "static state that the multi-core copy would duplicate (make the type package-private)");
      }
      if (m instanceof ClassTree inner) {
        checkNoStaticState(inner, trees, new TreePath(path, inner), at);
      }
    }
  }

  /**
   * Static fields of the class in the copy: compile-time constants are fine; other finals are initialised from the
   * original's (one object, e.g. one lookup table, for both); non-final ones are refused.
   */
  private static void staticField(VariableTree v, Trees trees, TreePath path, String simple,
      Function<Tree, String> at, SourcePositions pos, CompilationUnitTree unit, Edits edits) {
    Set<javax.lang.model.element.Modifier> flags = trees.getElement(path).getModifiers();
    if (!flags.contains(javax.lang.model.element.Modifier.FINAL)) {
      throw new IllegalArgumentException(at.apply(v) + ": static field '" + v.getName() + "' is not final: the "
          + "multi-core copy of " + simple + " would have its own (make it final, or pass the value as a parameter)");
    }
    if (v.getInitializer() == null || trees.getElement(path) instanceof VariableElement e
        && e.getConstantValue() != null) {
      return;
    }
    if (flags.contains(javax.lang.model.element.Modifier.PRIVATE)) {
      throw new IllegalArgumentException(at.apply(v) + ": private static final field '" + v.getName() + "' holds an "
          + "object the multi-core copy would not share (make it package-private: the copy reads the original's)");
    }
    if (trees.getTypeMirror(path) instanceof javax.lang.model.type.DeclaredType t
        && t.asElement().getModifiers().contains(javax.lang.model.element.Modifier.PRIVATE)) {
      throw new IllegalArgumentException(at.apply(v) + ": static final field '" + v.getName() + "' has a private "
          + "type, which the multi-core copy cannot share with the original (make the type package-private)");
    }
    int start = (int) pos.getStartPosition(unit, v.getInitializer());
    int end = (int) pos.getEndPosition(unit, v.getInitializer());
    edits.put(start, end, simple + "." + v.getName() + newlines(edits.source.substring(start, end)));
  }

  /**
   * The enclosing method's locals and parameters that the loop body reads (by symbol, so a name declared again inside
   * an anonymous class is not one of them); the body reads copies of them ({@code x__p}). Refuses assignments to them
   * and to the loop variable (dependencies between iterations).
   */
  private static Set<Element> captured(Trees trees, TreePath body, Element loopVar, Function<Tree, String> at,
      SourcePositions pos, CompilationUnitTree unit, Edits edits) {
    Set<Element> declared = new HashSet<>();
    Map<IdentifierTree, Element> reads = new java.util.LinkedHashMap<>();
    List<Tree[]> writes = new ArrayList<>(); // {assignment, target}
    new TreePathScanner<Void, Void>() {
      @Override
      public Void visitVariable(VariableTree v, Void unused) {
        declared.add(trees.getElement(getCurrentPath()));
        return super.visitVariable(v, unused);
      }

      @Override
      public Void visitIdentifier(IdentifierTree id, Void unused) {
        Element e = trees.getElement(getCurrentPath());
        if (e != null && LOCALS.contains(e.getKind())) {
          reads.put(id, e);
        }
        return null;
      }

      @Override
      public Void visitAssignment(AssignmentTree a, Void unused) {
        writes.add(new Tree[] {a, a.getVariable()});
        return super.visitAssignment(a, unused);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, Void unused) {
        writes.add(new Tree[] {a, a.getVariable()});
        return super.visitCompoundAssignment(a, unused);
      }

      @Override
      public Void visitUnary(UnaryTree u, Void unused) {
        if (u.getKind() == Tree.Kind.PREFIX_INCREMENT || u.getKind() == Tree.Kind.POSTFIX_INCREMENT
            || u.getKind() == Tree.Kind.PREFIX_DECREMENT || u.getKind() == Tree.Kind.POSTFIX_DECREMENT) {
          writes.add(new Tree[] {u, u.getExpression()});
        }
        return super.visitUnary(u, unused);
      }
    }.scan(body, null);
    Set<Element> captured = new HashSet<>();
    reads.forEach((id, e) -> {
      if (!declared.contains(e) && !e.equals(loopVar)) {
        captured.add(e);
      }
    });
    for (Tree[] w : writes) {
      Tree t = w[1];
      while (t instanceof com.sun.source.tree.ParenthesizedTree pt) {
        t = pt.getExpression();
      }
      Element e = t instanceof IdentifierTree id ? reads.get(id) : null;
      if (e != null && (captured.contains(e) || e.equals(loopVar))) {
        throw new IllegalArgumentException(at.apply(w[0]) + ": the @Parallel loop assigns '" + e.getSimpleName()
            + (e.equals(loopVar) ? "', its own loop variable" : "', a local of the enclosing method")
            + ": a dependency between iterations");
      }
    }
    reads.forEach((id, e) -> {
      if (captured.contains(e)) {
        int end = (int) pos.getEndPosition(unit, id);
        edits.put(end, end, "__p");
      }
    });
    return captured;
  }

  private static final Set<ElementKind> LOCALS = Set.of(ElementKind.LOCAL_VARIABLE, ElementKind.PARAMETER,
      ElementKind.EXCEPTION_PARAMETER, ElementKind.RESOURCE_VARIABLE, ElementKind.BINDING_VARIABLE);

  /** Non-overlapping replacements of source ranges, applied together. */
  private static final class Edits {
    final String source;
    private final TreeMap<Integer, List<Object[]>> byStart = new TreeMap<>(); // start -> {end, text}, in order

    Edits(String source) {
      this.source = source;
    }

    void put(int start, int end, String text) {
      List<Object[]> at = byStart.computeIfAbsent(start, k -> new ArrayList<>());
      int k = at.size();
      while (start == end && k > 0 && (int) at.get(k - 1)[0] != start) {
        k--; // an insertion goes before a replacement that starts at the same place
      }
      at.add(k, new Object[] {end, text});
    }

    /** {@code source[from, to)} with the edits inside it applied; those edits are consumed. */
    String take(long from, long to) {
      StringBuilder out = new StringBuilder();
      int p = (int) from;
      for (Map.Entry<Integer, List<Object[]>> e : new ArrayList<>(byStart.subMap((int) from, true, (int) to,
          from == to).entrySet())) {
        for (Object[] edit : e.getValue()) {
          int end = (int) edit[0];
          if (e.getKey() < p || end > to) {
            continue; // overlaps a replacement already taken (e.g. inside a removed member type)
          }
          out.append(source, p, e.getKey()).append((String) edit[1]);
          p = end;
        }
        byStart.remove(e.getKey());
      }
      return out.append(source, p, (int) to).toString();
    }
  }

  private static boolean isParallel(VariableTree v) {
    return v.getModifiers().getAnnotations().stream().anyMatch(a -> {
      String n = a.getAnnotationType().toString();
      return n.equals("Parallel") || n.endsWith(".Parallel");
    });
  }

  /** The line breaks of {@code text}, so that what replaces it keeps the following lines' numbers. */
  private static String newlines(String text) {
    return text.replaceAll("[^\\n]", "");
  }

  /** Renames {@code simple} in the first match of {@code regex} at or after {@code from}. */
  private static void renameAt(String source, int from, String regex, String simple, Edits edits, String where) {
    Matcher m = Pattern.compile(regex).matcher(source);
    if (!m.find(Math.max(from, 0))) {
      throw new IllegalArgumentException(where + ": cannot find the declaration of " + simple);
    }
    int start = source.indexOf(simple, m.start() + (m.groupCount() > 0 ? m.group(1).length() : 0));
    edits.put(start, start + simple.length(), simple + SUFFIX);
  }

  /** The class path javac sees: this JVM's, plus where the kernel class and this class were loaded from. */
  private static String classPath(Class<?> kernelClass) {
    return String.join(java.io.File.pathSeparator, System.getProperty("java.class.path"), location(kernelClass),
        location(ParallelExecutor.class));
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

      private int switchExpressions; // a yield inside one of them is its own

      @Override
      public Void visitSwitchExpression(com.sun.source.tree.SwitchExpressionTree s, Integer depth) {
        switchExpressions++;
        super.visitSwitchExpression(s, depth + 1);
        switchExpressions--;
        return null;
      }

      @Override
      public Void visitYield(com.sun.source.tree.YieldTree y, Integer depth) {
        if (switchExpressions == 0) {
          throw new IllegalArgumentException(at + ": 'yield' out of a @Parallel loop (iterations are independent; "
              + "none can give the switch its value)");
        }
        return super.visitYield(y, depth);
      }

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
      if (kernelClass.getClassLoader() != null) { // -ea/-da for the class hold for its copy too
        kernelClass.getClassLoader().setClassAssertionStatus(name, kernelClass.desiredAssertionStatus());
      }
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
    boolean ok = javac.getTask(null, fm, diags, List.of("-proc:none", "-classpath", classPath(kernelClass), "-g"), null,
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
