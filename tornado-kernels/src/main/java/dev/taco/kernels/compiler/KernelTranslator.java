package dev.taco.kernels.compiler;

import com.sun.source.tree.ArrayAccessTree;
import com.sun.source.tree.AssignmentTree;
import com.sun.source.tree.CompilationUnitTree;
import com.sun.source.tree.CompoundAssignmentTree;
import com.sun.source.tree.ExpressionTree;
import com.sun.source.tree.ForLoopTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.LiteralTree;
import com.sun.source.tree.MethodInvocationTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.NewArrayTree;
import com.sun.source.tree.ParenthesizedTree;
import com.sun.source.tree.Tree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.util.JavacTask;
import com.sun.source.util.SourcePositions;
import com.sun.source.util.TreePath;
import com.sun.source.util.TreePathScanner;
import com.sun.source.util.TreeScanner;
import com.sun.source.util.Trees;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Parallel;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.TypeElement;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.SimpleJavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * Java kernel source to readable CUDA C (docs/design.md §5). Reads the <em>source</em> with javac's compiler tree API
 * ({@code com.sun.source}, module {@code jdk.compiler}): the files are parsed and attributed once, and every
 * expression's type comes from the attributed trees ({@link Trees#getTypeMirror}).
 *
 * <h2>Supported Java subset</h2>
 * <ul>
 *   <li>Static methods; kernels return void and either hold one top-level {@code @Parallel} loop
 *       ({@code for (@Parallel int i = a; i < n; i++)}: a grid-stride loop with a 64-bit counter; other top-level
 *       statements must be local declarations) or take a {@link KernelContext} (SIMT: the body runs per thread).
 *       Inside the {@code @Parallel} loop, what would mean one thing in Java and another per GPU thread is refused:
 *       {@code return} and a {@code break} of the loop itself, assigning the loop variable, and assigning the
 *       parameters or the locals declared before the loop (or the elements of such a local array).
 *   <li>Types {@code int long float double boolean byte short} and one-dimensional arrays of them (pointer
 *       parameters; {@code byte[]} is {@code signed char*}, same bytes as Java). Local arrays only as
 *       {@code new T[constant]} (zero-initialised, registers once loops are unrolled), shared arrays from
 *       {@code ctx.allocateFloatLocalArray(constant)} / {@code allocateIntLocalArray} at the top of a kernel (not in
 *       a device function; 48 KiB in all), or aliases of arrays.
 *   <li>Statements: declarations, assignments, compound assignments, {@code ++}/{@code --} as statements,
 *       if/else, for, while, do-while, unlabelled break/continue, return.
 *   <li>Expressions: literals, all arithmetic, bitwise, shift, comparison, logical and conditional operators with
 *       Java semantics (see {@link CudaPrelude}), casts between supported primitives, array element access,
 *       {@code a.length} of fixed-size local arrays, compile-time constants (JLS §4.12.4 {@code static final},
 *       inlined as literals), specialised parameters ({@link KernelRequest#constants()}, {@code constexpr}).
 *   <li>Calls: {@link Intrinsics} (Math, Float, Double, Integer, Long; {@link dev.taco.kernels.Vec16} vector
 *       loads and stores), {@link KernelContext} methods, and static
 *       methods of any class whose source was given: they become {@code static __device__ __forceinline__}
 *       functions named {@code Class_method} (so register arrays passed to them stay in registers). One that may
 *       write an array and returns a value stands alone (a statement, an initialiser, a return value, the right side
 *       of an assignment to a local): in a larger expression C++ would order its write against the other operands
 *       as it likes. Every argument is evaluated once ({@code Float.isNaN(f(x))} calls f once).
 *   <li>Loops whose start, bound and step are constant (counting variables of enclosing unrolled loops as
 *       constant) get {@code #pragma unroll}.
 * </ul>
 * Everything else is rejected with {@code file:line: reason} in a {@link KernelCompileException}, by a pass over every
 * function reached ({@link SubsetCheck}, {@link ParallelRaces}) before {@link FunctionEmitter} writes any C: objects and
 * {@code new} (other than the arrays above), strings, char, exceptions, switch, labels, lambdas, instance calls,
 * fields other than constants, recursion, assignments inside expressions, array lengths of parameters.
 *
 * <h2>Differences from Java that remain</h2>
 * No bounds checks (Java throws {@code ArrayIndexOutOfBoundsException}; the GPU reads or writes out of bounds);
 * integer division by zero is undefined (Java throws); transcendental Math functions differ within the ulp bounds
 * listed in {@link Intrinsics}; {@code @Parallel} iterations run concurrently (the kernel must honour the
 * {@code @Parallel} contract); array parameters may alias (no {@code __restrict__} is emitted).
 *
 * <h2>Output</h2>
 * One translation unit: {@link CudaPrelude#SOURCE}, forward declarations and definitions of the device functions,
 * then one {@code extern "C" __global__} entry per kernel, named like the Java method. Each function starts with a
 * comment naming the Java method and its file and line.
 */
public final class KernelTranslator {
  /** A method with its source. */
  record Source(CompilationUnitTree unit, MethodTree method, ExecutableElement element, TypeElement owner) {
    String fileName() {
      return unit.getSourceFile().getName();
    }
  }

  /** Attributed-tree queries shared by the passes (the subset check, the race check, the emitter). */
  final class Env {
    private final Map<CompilationUnitTree, Map<Tree, TreePath>> paths = new IdentityHashMap<>();

    private TreePath path(Source s, Tree t) {
      TreePath p = paths.computeIfAbsent(s.unit(), u -> {
        Map<Tree, TreePath> m = new IdentityHashMap<>();
        new TreePathScanner<Void, Void>() {
          @Override
          public Void scan(Tree tree, Void v) {
            if (tree != null) {
              m.put(tree, new TreePath(getCurrentPath() == null ? new TreePath(u) : getCurrentPath(), tree));
            }
            return super.scan(tree, v);
          }
        }.scan(new TreePath(u), null);
        return m;
      }).get(t);
      if (p == null) {
        throw new IllegalStateException("tree not in its compilation unit: " + t);
      }
      return p;
    }

    Element element(Source s, Tree t) {
      return trees.getElement(path(s, t));
    }

    TypeMirror type(Source s, Tree t) {
      return trees.getTypeMirror(path(s, t));
    }

    long line(Source s, Tree t) {
      return s.unit().getLineMap().getLineNumber(positions.getStartPosition(s.unit(), t));
    }

    String sourceText(Source s, Tree t) {
      try {
        return s.unit().getSourceFile().getCharContent(true)
            .subSequence((int) positions.getStartPosition(s.unit(), t), (int) positions.getEndPosition(s.unit(), t))
            .toString();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    boolean hasSource(ExecutableElement m) {
      return methods.containsKey(m);
    }

    String deviceName(ExecutableElement m) {
      return m.getEnclosingElement().getSimpleName() + "_" + m.getSimpleName();
    }

    private final Map<ExecutableElement, Boolean> writes = new HashMap<>();

    /**
     * Whether a call of {@code m} (a method with source) may write an array element: its body assigns one (any
     * array, its own local ones included: conservative), calls a void {@code dev.taco.kernels} intrinsic (each
     * writes an array argument), a {@code KernelContext} method that writes one
     * ({@link Intrinsics#CONTEXT_WRITERS}), or a method that may. Such a call returning a value
     * must not share an expression with other operands: Java evaluates them left to right, C++ in an unspecified
     * order (C++17 [expr.call]p8, [intro.execution]p10).
     */
    boolean writesMemory(ExecutableElement m) {
      Boolean known = writes.get(m);
      if (known != null) {
        return known;
      }
      writes.put(m, false); // a recursive call (refused elsewhere) adds nothing
      Source s = methods.get(m);
      boolean found = scanWrites(s, s.method().getBody(), new java.util.HashSet<>());
      writes.put(m, found);
      return found;
    }

    /** Whether the call {@code mi} in {@code s} may write an array argument ({@link #writesMemory(ExecutableElement)}). */
    boolean writesMemory(Source s, MethodInvocationTree mi) {
      if (!(element(s, mi) instanceof ExecutableElement callee)) {
        return false;
      }
      String owner = ((TypeElement) callee.getEnclosingElement()).getQualifiedName().toString();
      return methods.containsKey(callee) ? writesMemory(callee)
          : owner.equals(KernelContext.class.getName())
              ? Intrinsics.CONTEXT_WRITERS.contains(callee.getSimpleName().toString())
              : owner.startsWith("dev.taco.kernels.") && callee.getReturnType().getKind() == TypeKind.VOID;
    }

    /**
     * Whether the call {@code mi} in {@code s} may write the elements of its argument number {@code index}: for a
     * method with source, whether its body (or a call in it) may write that parameter's elements; for an intrinsic
     * that may write ({@link #writesMemory(Source, MethodInvocationTree)}), by the intrinsics' convention: a
     * {@code dev.taco.kernels} {@code load*(from, at, into ...)} writes its array arguments after the first, any other
     * ({@code store*}, {@code put*}) its first; a {@code KernelContext} writer every array argument.
     */
    boolean writesArgument(Source s, MethodInvocationTree mi, int index) {
      if (!writesMemory(s, mi)) {
        return false;
      }
      ExecutableElement callee = (ExecutableElement) element(s, mi);
      List<? extends VariableElement> params = callee.getParameters();
      if (params.isEmpty()) {
        return true;
      }
      if (hasSource(callee)) {
        return paramsWritten(callee).contains(params.get(Math.min(index, params.size() - 1)));
      }
      String owner = ((TypeElement) callee.getEnclosingElement()).getQualifiedName().toString();
      if (owner.equals(KernelContext.class.getName())) {
        return true;
      }
      int firstArray = 0;
      while (firstArray < params.size() && params.get(firstArray).asType().getKind() != TypeKind.ARRAY) {
        firstArray++;
      }
      return callee.getSimpleName().toString().startsWith("load") ? index > firstArray : index == firstArray;
    }

    /** Whether {@code mi} calls a method translated from its source (a helper, not an intrinsic). */
    boolean hasSource(Source s, MethodInvocationTree mi) {
      return element(s, mi) instanceof ExecutableElement callee && hasSource(callee);
    }

    /** Whether {@code f} is a {@code @Parallel} loop: its one initialiser declares a variable annotated so. */
    boolean isParallelLoop(Source s, ForLoopTree f) {
      if (f.getInitializer().size() != 1 || !(f.getInitializer().get(0) instanceof VariableTree v)) {
        return false;
      }
      return v.getModifiers().getAnnotations().stream().anyMatch(a -> {
        TypeMirror t = type(s, a.getAnnotationType());
        return t != null && t.toString().equals(Parallel.class.getName());
      });
    }

    /** Whether {@code e} steps the variable {@code v} by one: {@code v++}, {@code ++v} or {@code v += 1}. */
    boolean incrementsByOne(Source s, ExpressionTree e, Element v) {
      if (e.getKind() == Tree.Kind.POSTFIX_INCREMENT || e.getKind() == Tree.Kind.PREFIX_INCREMENT) {
        return element(s, ((UnaryTree) e).getExpression()) == v;
      }
      return e instanceof CompoundAssignmentTree ca && ca.getKind() == Tree.Kind.PLUS_ASSIGNMENT
          && element(s, ca.getVariable()) == v && ca.getExpression() instanceof LiteralTree l
          && Integer.valueOf(1).equals(l.getValue());
    }

    private final Map<ExecutableElement, Set<Element>> paramsWritten = new HashMap<>();

    /**
     * The parameters of {@code m} (a method with source) whose elements a call may write: those its body writes, or
     * passes where a callee may write them; every array parameter if it writes through a local array that does not
     * hold a new array of its own (an alias, conservatively).
     */
    private Set<Element> paramsWritten(ExecutableElement m) {
      Set<Element> known = paramsWritten.get(m);
      if (known != null) {
        return known;
      }
      paramsWritten.put(m, Set.of()); // a recursive call (refused elsewhere) adds nothing
      Source s = methods.get(m);
      Set<Element> written = arraysWritten(s, s.method().getBody());
      Set<Element> fresh = new java.util.HashSet<>();
      new TreeScanner<Void, Void>() {
        @Override
        public Void visitVariable(VariableTree t, Void v) {
          if (t.getInitializer() != null && bare(t.getInitializer()) instanceof NewArrayTree) {
            fresh.add(element(s, t));
          }
          return super.visitVariable(t, v);
        }
      }.scan(s.method().getBody(), null);
      Set<Element> params = new java.util.HashSet<>(m.getParameters());
      boolean throughAlias = written.stream().anyMatch(e -> !params.contains(e) && !fresh.contains(e));
      Set<Element> result = new java.util.HashSet<>();
      for (VariableElement p : m.getParameters()) {
        if (written.contains(p) || throughAlias && p.asType().getKind() == TypeKind.ARRAY) {
          result.add(p);
        }
      }
      paramsWritten.put(m, result);
      return result;
    }

    /**
     * The variables (parameters, locals) whose array elements {@code tree} may write: assigned elements' arrays, and
     * the array arguments of calls that may write one.
     */
    Set<Element> arraysWritten(Source s, Tree tree) {
      Set<Element> written = new java.util.HashSet<>();
      scanWrites(s, tree, written);
      return written;
    }

    /**
     * Whether {@code tree} may write an array element (an assigned, compound-assigned, incremented or decremented
     * element, or a call that may write one), adding to {@code written} the variables whose elements it writes.
     */
    private boolean scanWrites(Source s, Tree tree, Set<Element> written) {
      boolean[] any = {false};
      new TreeScanner<Void, Void>() {
        private void target(ExpressionTree t) {
          if (bare(t) instanceof ArrayAccessTree) {
            any[0] = true;
            if (element(s, arrayRoot(t)) instanceof Element e) written.add(e);
          }
        }

        @Override
        public Void visitAssignment(AssignmentTree a, Void v) {
          target(a.getVariable());
          return super.visitAssignment(a, v);
        }

        @Override
        public Void visitCompoundAssignment(CompoundAssignmentTree a, Void v) {
          target(a.getVariable());
          return super.visitCompoundAssignment(a, v);
        }

        @Override
        public Void visitUnary(UnaryTree u, Void v) {
          if (steps(u)) {
            target(u.getExpression());
          }
          return super.visitUnary(u, v);
        }

        @Override
        public Void visitMethodInvocation(MethodInvocationTree mi, Void v) {
          if (writesMemory(s, mi)) {
            any[0] = true;
            for (int n = 0; n < mi.getArguments().size(); n++) {
              if (bare(mi.getArguments().get(n)) instanceof IdentifierTree id && element(s, id) instanceof Element e
                  && e.asType().getKind() == TypeKind.ARRAY && writesArgument(s, mi, n)) {
                written.add(e);
              }
            }
          }
          return super.visitMethodInvocation(mi, v);
        }
      }.scan(tree, null);
      return any[0];
    }
  }

  /** Whether {@code u} increments or decrements its operand ({@code ++x}, {@code x++}, {@code --x}, {@code x--}). */
  static boolean steps(UnaryTree u) {
    Tree.Kind k = u.getKind();
    return k == Tree.Kind.POSTFIX_INCREMENT || k == Tree.Kind.PREFIX_INCREMENT || k == Tree.Kind.POSTFIX_DECREMENT
        || k == Tree.Kind.PREFIX_DECREMENT;
  }

  /** Whether {@code t} is {@link KernelContext} (a SIMT kernel's parameter, the receiver of its calls). */
  static boolean isKernelContext(TypeMirror t) {
    return t != null && t.toString().equals(KernelContext.class.getName());
  }

  /** {@code e} without the parentheses around it. */
  static ExpressionTree bare(ExpressionTree e) {
    while (e instanceof ParenthesizedTree p) {
      e = p.getExpression();
    }
    return e;
  }

  /** The array variable an element access names, {@code x} of {@code ((x)[i])[j]}; {@code e} itself if it is none. */
  static ExpressionTree arrayRoot(ExpressionTree e) {
    for (e = bare(e); e instanceof ArrayAccessTree a; e = bare(a.getExpression())) {}
    return e;
  }

  private final Trees trees;
  private final SourcePositions positions;
  private final JavacTask task;
  private final Map<ExecutableElement, Source> methods = new HashMap<>();
  private final Env env = new Env();

  /**
   * Parses and attributes {@code sources} (with the running JVM's class path and the location of this module's
   * classes, so kernels can use {@code dev.taco.kernels}).
   *
   * @throws KernelCompileException with javac's errors as {@code file:line: message} lines
   * @throws UncheckedIOException if a file cannot be read
   */
  public KernelTranslator(List<Path> sources) {
    this(sources, Map.of());
  }

  /**
   * As {@link #KernelTranslator(List)}, with more sources given as text: {@code texts} maps a source's path relative
   * to its source root ({@code dev/taco/kernels/KernelContext.java}) to its text, such as the sources a jar carries
   * ({@link dev.taco.kernels.cuda.KernelSources}). The CUDA C's comments and the errors name them by that path.
   *
   * @throws KernelCompileException with javac's errors as {@code file:line: message} lines
   * @throws UncheckedIOException if a file cannot be read
   */
  public KernelTranslator(List<Path> sources, Map<String, String> texts) {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    if (javac == null) {
      throw new IllegalStateException("no system Java compiler: run on a JDK (module jdk.compiler)");
    }
    DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
    StandardJavaFileManager fm = javac.getStandardFileManager(diags, null, StandardCharsets.UTF_8);
    String cp = System.getProperty("java.class.path") + File.pathSeparator
        + Path.of(KernelContext.class.getProtectionDomain().getCodeSource().getLocation().getPath());
    List<String> options = new ArrayList<>(List.of("-proc:none", "-Xlint:none", "-classpath", cp));
    if (java.lang.module.ModuleFinder.ofSystem().find("jdk.incubator.vector").isPresent()) {
      options.add("--add-modules=jdk.incubator.vector"); // the module's CPU kernels (Gemm) use it
    }
    List<JavaFileObject> inputs = new ArrayList<>();
    fm.getJavaFileObjectsFromPaths(sources).forEach(inputs::add);
    texts.forEach((rel, text) -> inputs.add(new SimpleJavaFileObject(URI.create("string:///" + rel),
        JavaFileObject.Kind.SOURCE) {
      @Override
      public CharSequence getCharContent(boolean ignoreEncodingErrors) {
        return text;
      }

      @Override
      public String getName() {
        return rel;
      }
    }));
    task = (JavacTask) javac.getTask(null, fm, diags, options, null, inputs);
    List<CompilationUnitTree> units = new ArrayList<>();
    try {
      task.parse().forEach(units::add);
      task.analyze();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    String errors = diags.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
        .map(d -> (d.getSource() == null ? "?" : d.getSource().getName()) + ":" + d.getLineNumber() + ": "
            + d.getMessage(null))
        .collect(Collectors.joining("\n"));
    if (!errors.isEmpty()) {
      throw new KernelCompileException(errors);
    }
    trees = Trees.instance(task);
    positions = trees.getSourcePositions();
    for (CompilationUnitTree u : units) {
      new TreePathScanner<Void, Void>() {
        @Override
        public Void visitMethod(MethodTree m, Void v) {
          Element e = trees.getElement(getCurrentPath());
          if (e instanceof ExecutableElement ee && e.getKind() == ElementKind.METHOD) {
            methods.put(ee, new Source(u, m, ee, (TypeElement) ee.getEnclosingElement()));
          }
          return super.visitMethod(m, v);
        }
      }.scan(u, null);
    }
  }

  /**
   * Translates the requested kernels (and every static method they reach) into one CUDA C translation unit.
   *
   * @throws KernelCompileException for an unsupported construct ({@code file:line: reason}), a kernel not found
   *     or overloaded, a missing {@code @Constant} value, or recursion
   */
  public String translate(List<KernelRequest> requests) {
    List<SubsetCheck.Checked> checked = check(requests);
    StringBuilder out = new StringBuilder();
    out.append("// Generated by dev.taco.kernels.compiler.KernelTranslator from Java source; do not edit.\n")
        .append("// Kernels: ").append(requests.stream().map(r -> r.className() + "." + r.methodName()
            + (r.constants().isEmpty() ? "" : " " + new java.util.TreeMap<>(r.constants())))
            .collect(Collectors.joining(", ")))
        .append("\n\n")
        .append(CudaPrelude.SOURCE);
    StringBuilder prototypes = new StringBuilder();
    StringBuilder devices = new StringBuilder();
    StringBuilder kernels = new StringBuilder();
    for (SubsetCheck.Checked c : checked) {
      FunctionEmitter fe = new FunctionEmitter(env, c);
      String definition = fe.emit();
      if (c.kernel()) {
        kernels.append('\n').append(definition);
      } else {
        prototypes.append(fe.prototype());
        devices.append('\n').append(definition);
      }
    }
    if (!devices.isEmpty()) {
      out.append("\n// device functions (static Java methods the kernels call)\n").append(prototypes).append(devices);
    }
    return out.append(kernels).toString();
  }

  /**
   * The checks of {@link #translate}, a pass that writes no C: each requested kernel and every static method it
   * reaches against the supported subset ({@link SubsetCheck}), then that no method reaches itself and that no two
   * device functions take one C name.
   *
   * @return the kernels in the order requested, then the device functions in the order first reached
   * @throws KernelCompileException as {@link #translate} does
   */
  List<SubsetCheck.Checked> check(List<KernelRequest> requests) {
    List<SubsetCheck.Checked> checked = new ArrayList<>();
    Deque<ExecutableElement> work = new ArrayDeque<>();
    for (KernelRequest r : requests) {
      SubsetCheck.Checked c = new SubsetCheck(find(r), env, r.constants(), true).check(r.methodName());
      checked.add(c);
      work.addAll(c.callees());
    }
    Map<ExecutableElement, Set<ExecutableElement>> calls = new HashMap<>();
    List<ExecutableElement> devices = new ArrayList<>();
    while (!work.isEmpty()) {
      ExecutableElement m = work.pop();
      if (calls.containsKey(m)) {
        continue;
      }
      SubsetCheck.Checked c = new SubsetCheck(methods.get(m), env, Map.of(), false).check(env.deviceName(m));
      checked.add(c);
      devices.add(m);
      calls.put(m, c.callees());
      work.addAll(c.callees());
    }
    rejectRecursion(calls);
    // Class_method is the simple names': two classes of one simple name (P.Util, Q.Util) would define one function
    Map<String, ExecutableElement> named = new HashMap<>();
    for (ExecutableElement m : devices) {
      ExecutableElement other = named.putIfAbsent(env.deviceName(m), m);
      boolean kernelName = requests.stream().anyMatch(r -> r.methodName().equals(env.deviceName(m)));
      if (kernelName || other != null && !other.getEnclosingElement().equals(m.getEnclosingElement())) {
        Source s = methods.get(m);
        throw new KernelCompileException(s.fileName() + ":" + env.line(s, s.method()) + ": device function "
            + m.getEnclosingElement() + "." + m.getSimpleName() + " would be named " + env.deviceName(m) + " in C, as "
            + (kernelName ? "a kernel" : other.getEnclosingElement() + "." + other.getSimpleName())
            + " is: rename one of them");
      }
    }
    return checked;
  }

  /** Names of the {@link dev.taco.kernels.Kernel}-annotated methods of {@code className}, sorted. */
  public List<String> kernelsOf(String className) {
    return methods.values().stream()
        .filter(s -> s.owner().getQualifiedName().contentEquals(className.replace('$', '.'))
            && s.element().getAnnotation(dev.taco.kernels.Kernel.class) != null)
        .map(s -> s.element().getSimpleName().toString()).sorted().toList();
  }

  private Source find(KernelRequest r) {
    List<Source> found = methods.values().stream()
        .filter(s -> s.owner().getQualifiedName().contentEquals(r.className().replace('$', '.'))
            && s.element().getSimpleName().contentEquals(r.methodName()))
        .toList();
    if (found.size() != 1) {
      throw new KernelCompileException(r.className() + ":0: kernel " + r.methodName()
          + (found.isEmpty() ? " not found in the given sources" : " is overloaded; kernels need a unique name"));
    }
    return found.get(0);
  }

  private void rejectRecursion(Map<ExecutableElement, Set<ExecutableElement>> calls) {
    Map<ExecutableElement, Integer> state = new HashMap<>(); // 1 = on the stack, 2 = done
    Deque<ExecutableElement> stack = new ArrayDeque<>();
    for (ExecutableElement m : calls.keySet()) {
      visit(m, calls, state, stack);
    }
  }

  private void visit(ExecutableElement m, Map<ExecutableElement, Set<ExecutableElement>> calls,
      Map<ExecutableElement, Integer> state, Deque<ExecutableElement> stack) {
    Integer st = state.get(m);
    if (st != null && st == 2) {
      return;
    }
    if (st != null) {
      List<String> cycle = new ArrayList<>();
      stack.descendingIterator().forEachRemaining(e -> cycle.add(e.getSimpleName().toString()));
      cycle.add(m.getSimpleName().toString());
      Source s = methods.get(m);
      throw new KernelCompileException(s.fileName() + ":" + env.line(s, s.method())
          + ": recursion is not supported on the GPU: " + String.join(" -> ", cycle));
    }
    state.put(m, 1);
    stack.push(m);
    for (ExecutableElement c : calls.getOrDefault(m, Set.of())) {
      visit(c, calls, state, stack);
    }
    stack.pop();
    state.put(m, 2);
  }

  /**
   * Build-time driver: {@code KernelTranslator <source-roots> <out-dir> <Class#method[:name=value,...] | Class>...}
   * translates each kernel (all {@code .java} files under the source roots, separated by {@code File.pathSeparator},
   * are parsed, so helper classes resolve)
   * and writes {@code <out-dir>/<method>.cu}; a bare class name means all its {@code @Kernel} methods. Values are
   * ints, longs (suffix L) or booleans.
   * Exits with status 1 and the {@code file:line: reason} message on a translation error.
   */
  public static void main(String[] args) throws IOException {
    int status = run(args);
    if (status != 0) {
      System.exit(status);
    }
  }

  /** {@link #main} without the exit: returns 0, 1 (translation error, printed) or 2 (usage). */
  static int run(String[] args) throws IOException {
    if (args.length < 3) {
      System.err.println(
          "usage: KernelTranslator <source-root[:root...]> <out-dir> <Class#method[:name=value,...] | Class>...");
      return 2;
    }
    List<Path> files = new ArrayList<>();
    for (String root : args[0].split(File.pathSeparator)) {
      try (Stream<Path> walk = Files.walk(Path.of(root))) {
        walk.filter(p -> p.toString().endsWith(".java")).sorted().forEach(files::add);
      }
    }
    Path outDir = Files.createDirectories(Path.of(args[1]));
    try {
      KernelTranslator t = new KernelTranslator(files);
      for (int i = 2; i < args.length; i++) {
        String spec = args[i];
        List<KernelRequest> requests = spec.contains("#") ? List.of(parseRequest(spec))
            : t.kernelsOf(spec).stream().map(m -> new KernelRequest(spec, m, Map.of())).toList();
        for (KernelRequest r : requests) {
          Files.writeString(outDir.resolve(r.methodName() + ".cu"), t.translate(List.of(r)));
          System.out.println("translated " + r.className() + "." + r.methodName() + " -> "
              + outDir.resolve(r.methodName() + ".cu"));
        }
      }
      return 0;
    } catch (KernelCompileException e) {
      System.err.println(e.getMessage());
      return 1;
    }
  }

  /** Parses {@code Class#method[:name=value,...]}. */
  static KernelRequest parseRequest(String spec) {
    String[] cm = spec.split(":", 2);
    String[] parts = cm[0].split("#");
    Map<String, Object> constants = new LinkedHashMap<>();
    if (cm.length > 1) {
      for (String kv : cm[1].split(",")) {
        String[] p = kv.split("=");
        String v = p[1];
        constants.put(p[0], v.equals("true") || v.equals("false") ? (Object) Boolean.valueOf(v)
            : v.endsWith("L") ? (Object) Long.valueOf(v.substring(0, v.length() - 1)) : Integer.valueOf(v));
      }
    }
    return new KernelRequest(parts[0], parts[1], constants);
  }
}
