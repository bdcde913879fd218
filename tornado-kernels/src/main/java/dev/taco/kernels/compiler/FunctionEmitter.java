package dev.taco.kernels.compiler;

import com.sun.source.tree.ArrayAccessTree;
import com.sun.source.tree.AssignmentTree;
import com.sun.source.tree.BinaryTree;
import com.sun.source.tree.BlockTree;
import com.sun.source.tree.CompoundAssignmentTree;
import com.sun.source.tree.ConditionalExpressionTree;
import com.sun.source.tree.DoWhileLoopTree;
import com.sun.source.tree.ExpressionStatementTree;
import com.sun.source.tree.ExpressionTree;
import com.sun.source.tree.ForLoopTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.IfTree;
import com.sun.source.tree.LiteralTree;
import com.sun.source.tree.MemberSelectTree;
import com.sun.source.tree.MethodInvocationTree;
import com.sun.source.tree.MethodTree;
import com.sun.source.tree.NewArrayTree;
import com.sun.source.tree.ParenthesizedTree;
import com.sun.source.tree.ReturnTree;
import com.sun.source.tree.StatementTree;
import com.sun.source.tree.Tree;
import com.sun.source.tree.TypeCastTree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.tree.WhileLoopTree;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.Parallel;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.Modifier;
import javax.lang.model.element.TypeElement;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;

/**
 * Emits the CUDA C of one Java method: a {@code __global__} entry (kernel) or a {@code __device__} function.
 * Statement by statement, expression by expression, keeping names and structure; every construct outside the
 * supported subset (see {@link KernelTranslator}) is rejected with {@code file:line: reason}.
 */
final class FunctionEmitter {
  /** A C expression with the Java kind of its value. */
  private record Typed(String c, TypeKind kind) {}

  private static final Set<String> C_KEYWORDS = Set.of("EOF", "assert", "errno", "stdin", "stdout", "stderr",
      "typeof", "isnan", "isinf", "isfinite", "signbit", "fpclassify", "offsetof", "auto", "register", "signed",
      "unsigned", "union", "struct",
      "typedef", "extern", "sizeof", "template", "typename", "delete", "friend", "inline", "mutable", "namespace",
      "operator", "typeid", "using", "virtual", "volatile", "asm", "bool", "explicit", "export", "not",
      "and", "or", "xor", "compl", "bitand", "bitor", "restrict", "constexpr", "decltype", "nullptr", "alignas",
      "alignof", "noexcept", "thread_local", "float4", "int4", "dim3", "warpSize", "threadIdx", "blockIdx",
      "blockDim", "gridDim", "fmodf", "fmod", "not_eq", "and_eq", "or_eq", "xor_eq", "static_cast",
      "dynamic_cast", "reinterpret_cast", "const_cast", "char8_t", "char16_t", "char32_t", "wchar_t", "requires",
      "concept", "consteval", "constinit", "co_await", "co_return", "co_yield", "static_assert", "INFINITY", "NAN",
      "NULL", "linux", "unix", "expf", "logf", "powf", "sqrtf", "main");

  private final KernelTranslator.Source src;
  private final KernelTranslator.Env env;
  private final Map<String, Object> constants;
  private final boolean kernel;
  private final Map<VariableElement, Integer> fixedArrays = new HashMap<>();
  private final Set<VariableElement> constantLoopVars = new LinkedHashSet<>();
  /** Static methods this one calls (to be emitted as device functions). */
  final Set<ExecutableElement> callees = new LinkedHashSet<>();
  private final StringBuilder out = new StringBuilder();
  private int indent;
  private boolean inParallelLoop;
  /**
   * A @Parallel kernel's parameters and the locals declared before its loop: on the GPU every thread has its own copy,
   * in Java the iterations share them, so the loop must not assign them (nor the elements of a local array).
   */
  private final Set<Element> outsideTheLoop = new java.util.HashSet<>();
  /** The @Parallel loop variable, while its loop is emitted. */
  private Element parallelVar;
  /**
   * The call that is a whole statement, initialiser, return value or right side of an assignment to a local: the one
   * place a call that writes memory may return a value (see {@link #call}).
   */
  private ExpressionTree wholeCall;
  /** Bytes of the kernel's shared arrays so far, each rounded up to its 16-byte alignment. */
  private long sharedBytes;
  /** Static shared memory a block may hold on every CUDA GPU. */
  static final int MAX_STATIC_SHARED = 48 * 1024;
  /** Loops nested inside the @Parallel loop that enclose the statement being emitted. */
  private int innerLoops;

  FunctionEmitter(KernelTranslator.Source src, KernelTranslator.Env env, Map<String, Object> constants,
      boolean kernel) {
    this.src = src;
    this.env = env;
    this.constants = new HashMap<>(constants); // each value becomes its parameter's type in emit
    this.kernel = kernel;
  }

  /** The C definition. */
  String emit(String cName) {
    MethodTree m = src.method();
    ExecutableElement me = src.element();
    if (!me.getModifiers().contains(Modifier.STATIC)) {
      throw error(m, "kernels and device functions must be static methods");
    }
    TypeKind ret = me.getReturnType().getKind();
    if (ret != TypeKind.VOID && !CTypes.supported(ret)) {
      throw error(m, "return type " + me.getReturnType() + " is not supported (primitive or void only)");
    }
    if (kernel && (reserved(cName) || LIBRARY.contains(cName))) {
      throw error(m, "a kernel may not be named " + cName + ": its extern \"C\" entry would clash with the C or CUDA"
          + " name (a library function, keyword or macro); rename the kernel");
    }
    List<String> names = m.getParameters().stream().map(p -> p.getName().toString()).toList();
    for (String c : new java.util.TreeSet<>(constants.keySet())) {
      if (!names.contains(c)) {
        throw error(m, "the specialisation gives '" + c + "', which is not a parameter of " + m.getName() + " ("
            + String.join(", ", names) + ")");
      }
    }
    boolean simt = false;
    StringBuilder params = new StringBuilder();
    StringBuilder specialised = new StringBuilder();
    for (VariableTree p : m.getParameters()) {
      VariableElement pe = (VariableElement) env.element(src, p);
      TypeMirror t = pe.asType();
      String name = cname(p.getName().toString());
      if (isKernelContext(t)) {
        simt = true;
        continue;
      }
      boolean annotatedConstant = pe.getAnnotation(dev.taco.kernels.Constant.class) != null;
      if (kernel && constants.containsKey(p.getName().toString())) {
        if (!CTypes.supported(t.getKind())) {
          throw error(p, "only primitive parameters can be specialised");
        }
        Object v = checkedConstant(p, constants.get(p.getName().toString()), t.getKind());
        constants.put(p.getName().toString(), v); // as the parameter's type: 4L for an int is Integer 4 from here on
        specialised.append("  constexpr ").append(CTypes.name(t.getKind())).append(' ').append(name).append(" = ")
            .append(CTypes.literal(v, t.getKind())).append(";\n");
        continue;
      }
      if (kernel && annotatedConstant) {
        throw error(p, "@Constant parameter '" + p.getName() + "' has no value in the specialisation");
      }
      TypeKind ek = CTypes.elementKind(t);
      String decl;
      if (ek != null) {
        decl = CTypes.name(ek) + "* " + name;
      } else if (CTypes.supported(t.getKind())) {
        decl = CTypes.name(t.getKind()) + " " + name;
      } else {
        throw error(p, "parameter type " + t + " is not supported (primitives, primitive arrays, KernelContext)");
      }
      params.append(params.isEmpty() ? "" : ", ").append(decl);
    }
    if (kernel && ret != TypeKind.VOID) {
      throw error(m, "a kernel must return void");
    }
    out.append("// Java: ").append(src.owner().getQualifiedName()).append('.').append(m.getName())
        .append(" (").append(src.fileName()).append(':').append(line(m)).append(")\n");
    out.append(kernel ? "extern \"C\" __global__ void " : "static __device__ __forceinline__ " + CTypes.name(ret) + " ")
        .append(cName).append('(').append(params).append(") {\n");
    out.append(specialised);
    indent = 1;
    if (kernel && !simt) {
      emitParallelKernelBody(m.getBody());
    } else {
      for (StatementTree s : m.getBody().getStatements()) {
        stmt(s);
      }
    }
    out.append("}\n");
    return out.toString();
  }

  /** Prototype line for the forward declarations. */
  String prototype() {
    String def = out.toString();
    int start = def.indexOf('\n') + 1;
    return def.substring(start, def.indexOf(" {\n", start)) + ";\n";
  }

  // ---- @Parallel kernels ----

  private void emitParallelKernelBody(BlockTree body) {
    if (body.getStatements().stream().noneMatch(s -> s instanceof ForLoopTree f && isParallelLoop(f))) {
      throw error(src.method(), "a kernel needs a top-level @Parallel loop or a KernelContext parameter");
    }
    int loops = 0;
    outsideTheLoop.addAll(src.element().getParameters());
    Set<Element> loopWrites = java.util.Collections.emptySet();
    for (StatementTree s : body.getStatements()) {
      if (s instanceof ForLoopTree f && isParallelLoop(f)) loopWrites = env.arraysWritten(src, f);
    }
    for (StatementTree s : body.getStatements()) {
      if (s instanceof ForLoopTree f && isParallelLoop(f)) {
        loops++;
        if (loops > 1) {
          throw error(s, "only one @Parallel loop per kernel (the GPU has no grid-wide barrier between loops)");
        }
        emitParallelLoop(f, loopWrites);
      } else if (s instanceof VariableTree v) {
        if (v.getInitializer() != null) {
          checkOncePerThread(v.getInitializer(), loopWrites, "outside the @Parallel loop", "call it inside the loop");
        }
        stmt(s);
        outsideTheLoop.add(env.element(src, v));
      } else {
        throw error(s, "outside the @Parallel loop only local variable declarations are allowed "
            + "(any other statement would run once per GPU thread)");
      }
    }
  }

  /**
   * A declaration outside the @Parallel loop runs once per GPU thread, before or after the other threads' iterations,
   * and the loop's start and bound are evaluated by every thread (the bound at each of its iterations): such an
   * expression may neither write memory nor read an array that the loop writes.
   *
   * @param where where {@code e} is, for the message ("outside the @Parallel loop", "in the @Parallel loop's bound")
   * @param callHint what to do instead of a call that writes an array there
   */
  private void checkOncePerThread(ExpressionTree e, Set<Element> loopWrites, String where, String callHint) {
    new com.sun.source.util.TreeScanner<Void, Void>() {
      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, Void v) {
        if (env.writesMemory(src, mi)) {
          throw error(mi, methodName(mi) + " writes an array: " + where + " it would run once per GPU thread, not as"
              + " in Java; " + callHint);
        }
        return super.visitMethodInvocation(mi, v);
      }

      @Override
      public Void visitArrayAccess(ArrayAccessTree a, Void v) {
        Element arr = env.element(src, KernelTranslator.bare(a.getExpression()));
        if (arr != null && loopWrites.contains(arr)) {
          throw error(a, "reads " + arr + ", which the @Parallel loop writes: " + where + " each GPU thread reads it"
              + " before or after other threads' iterations, not once before (or after) all of them as in Java"
              + (where.startsWith("in") ? "; pass the value as a parameter" : ""));
        }
        return super.visitArrayAccess(a, v);
      }
    }.scan(e, null);
  }

  private boolean isParallelLoop(ForLoopTree f) {
    if (f.getInitializer().size() != 1 || !(f.getInitializer().get(0) instanceof VariableTree v)) {
      return false;
    }
    return v.getModifiers().getAnnotations().stream().anyMatch(a -> {
      TypeMirror t = env.type(src, a.getAnnotationType());
      return t != null && t.toString().equals(Parallel.class.getName());
    });
  }

  /**
   * {@code for (@Parallel int i = a; i < b; i++)} becomes a grid-stride loop over a 64-bit counter; {@code a} and
   * {@code b} may not read what the loop writes ({@code loopWrites}).
   */
  private void emitParallelLoop(ForLoopTree f, Set<Element> loopWrites) {
    VariableTree v = (VariableTree) f.getInitializer().get(0);
    Element ve = env.element(src, v);
    if (env.type(src, v).getKind() != TypeKind.INT || v.getInitializer() == null) {
      throw error(f, "the @Parallel loop variable must be an initialised int");
    }
    if (!(f.getCondition() instanceof BinaryTree c) || !(c.getKind() == Tree.Kind.LESS_THAN)
        || env.element(src, c.getLeftOperand()) != ve) {
      throw error(f, "the @Parallel loop condition must be '" + v.getName() + " < bound'");
    }
    if (f.getUpdate().size() != 1 || !env.incrementsByOne(src, f.getUpdate().get(0).getExpression(), ve)) {
      throw error(f, "the @Parallel loop must step by 1 ('" + v.getName() + "++')");
    }
    TypeKind boundKind = kindOf(c.getRightOperand());
    if (boundKind != TypeKind.INT && boundKind != TypeKind.LONG && boundKind != TypeKind.SHORT
        && boundKind != TypeKind.BYTE) {
      throw error(c.getRightOperand(), "the @Parallel loop's bound must be an integer (it is " + boundKind.toString()
          .toLowerCase(java.util.Locale.ROOT) + ": Java compares " + v.getName() + " with it in floating point)");
    }
    checkOncePerThread(v.getInitializer(), loopWrites, "in the @Parallel loop's start",
        "pass the start as a parameter");
    checkOncePerThread(c.getRightOperand(), loopWrites, "in the @Parallel loop's bound",
        "pass the bound as a parameter");
    String name = cname(v.getName().toString());
    String start = conv(expr(v.getInitializer()), TypeKind.LONG);
    String bound = conv(expr(c.getRightOperand()), TypeKind.LONG);
    line("// @Parallel loop: one iteration per GPU thread, grid-stride (64-bit counter: no wrap-around)");
    // the counter's name cannot be a Java local's: cname gives those that start with j_ a trailing _
    String counter = "j_" + name + "_it";
    line("for (long long " + counter + " = " + start + " + (long long)blockIdx.x * blockDim.x + threadIdx.x; "
        + counter + " < " + bound + "; " + counter + " += (long long)gridDim.x * blockDim.x) {");
    indent++;
    line("int " + name + " = (int)" + counter + ";");
    inParallelLoop = true;
    parallelVar = ve;
    body(f.getStatement());
    new ParallelRaces(src, env, this::error).check(f, ve, outsideTheLoop); // after the body's own, narrower checks
    parallelVar = null;
    inParallelLoop = false;
    indent--;
    line("}");
  }

  // ---- statements ----

  private void body(StatementTree s) {
    if (s instanceof BlockTree b) {
      for (StatementTree t : b.getStatements()) {
        stmt(t);
      }
    } else {
      stmt(s);
    }
  }

  private void stmt(StatementTree s) {
    switch (s.getKind()) {
      case BLOCK -> {
        line("{");
        indent++;
        body(s);
        indent--;
        line("}");
      }
      case VARIABLE -> variable((VariableTree) s);
      case EXPRESSION_STATEMENT -> line(sideEffect(((ExpressionStatementTree) s).getExpression()) + ";");
      case IF -> ifStmt((IfTree) s);
      case FOR_LOOP -> {
        innerLoops++;
        forLoop((ForLoopTree) s);
        innerLoops--;
      }
      case WHILE_LOOP -> {
        WhileLoopTree w = (WhileLoopTree) s;
        line("while (" + cond(w.getCondition()) + ") {");
        innerLoops++;
        nested(w.getStatement());
        innerLoops--;
      }
      case DO_WHILE_LOOP -> {
        DoWhileLoopTree d = (DoWhileLoopTree) s;
        line("do {");
        indent++;
        innerLoops++;
        body(d.getStatement());
        innerLoops--;
        indent--;
        line("} while (" + cond(d.getCondition()) + ");");
      }
      case BREAK -> {
        if (((com.sun.source.tree.BreakTree) s).getLabel() != null) {
          throw error(s, "labelled break is not supported");
        }
        if (inParallelLoop && innerLoops == 0) {
          throw error(s, "break in the @Parallel loop would stop only this GPU thread's iterations, not every later"
              + " one as in Java; compute a bound first, or skip the rest with continue");
        }
        line("break;");
      }
      case CONTINUE -> {
        if (((com.sun.source.tree.ContinueTree) s).getLabel() != null) {
          throw error(s, "labelled continue is not supported");
        }
        line("continue;");
      }
      case RETURN -> {
        if (inParallelLoop) {
          throw error(s, "return inside the @Parallel loop would end only this GPU thread's iteration; "
              + "use continue or restructure");
        }
        ReturnTree r = (ReturnTree) s;
        line(r.getExpression() == null ? "return;"
            : "return " + conv(whole(r.getExpression()), src.element().getReturnType().getKind()) + ";");
      }
      case EMPTY_STATEMENT -> {}
      case THROW, TRY -> throw error(s, "exceptions are not supported on the GPU");
      case SWITCH -> throw error(s, "switch is not supported; use if/else");
      case SYNCHRONIZED -> throw error(s, "synchronized is not supported; use KernelContext.barrier()");
      case ENHANCED_FOR_LOOP ->
        throw error(s, "for-each loops are not supported (array lengths are unknown on the GPU)");
      case LABELED_STATEMENT -> throw error(s, "labelled statements are not supported");
      case CLASS -> throw error(s, "local classes are not supported");
      default -> throw error(s, "unsupported statement: " + s.getKind());
    }
  }

  private void nested(StatementTree body) {
    indent++;
    body(body);
    indent--;
    line("}");
  }

  private void ifStmt(IfTree t) {
    line("if (" + cond(t.getCondition()) + ") {");
    nested(t.getThenStatement());
    StatementTree e = t.getElseStatement();
    if (e instanceof IfTree elseIf) {
      out.setLength(out.length() - 1); // join "} else if" on one line
      out.append(" else if (").append(cond(elseIf.getCondition())).append(") {\n");
      nested(elseIf.getThenStatement());
      if (elseIf.getElseStatement() != null) {
        out.setLength(out.length() - 1);
        out.append(" else {\n");
        nested(elseIf.getElseStatement());
      }
    } else if (e != null) {
      out.setLength(out.length() - 1);
      out.append(" else {\n");
      nested(e);
    }
  }

  private void forLoop(ForLoopTree f) {
    if (isParallelLoop(f)) {
      throw error(f, "a @Parallel loop must be at the top level of a kernel without KernelContext "
          + "(nested parallelism is not supported: flatten the index)");
    }
    StringBuilder init = new StringBuilder();
    VariableElement loopVar = null;
    for (StatementTree s : f.getInitializer()) {
      if (s instanceof VariableTree v) {
        TypeKind k = env.type(src, v).getKind();
        if (!CTypes.supported(k) || v.getInitializer() == null) {
          throw error(s, "for-loop variables must be initialised primitives");
        }
        if (!init.isEmpty()) {
          init.append(", ").append(cname(v.getName().toString())).append(" = ")
              .append(conv(expr(v.getInitializer()), k));
        } else {
          init.append(CTypes.name(k)).append(' ').append(cname(v.getName().toString())).append(" = ")
              .append(conv(expr(v.getInitializer()), k));
        }
        loopVar = (VariableElement) env.element(src, v);
      } else {
        init.append(init.isEmpty() ? "" : ", ").append(sideEffect(((ExpressionStatementTree) s).getExpression()));
      }
    }
    StringBuilder update = new StringBuilder();
    for (ExpressionStatementTree u : f.getUpdate()) {
      update.append(update.isEmpty() ? "" : ", ").append(sideEffect(u.getExpression()));
    }
    boolean unroll = f.getInitializer().size() == 1 && loopVar != null
        && isConstant(((VariableTree) f.getInitializer().get(0)).getInitializer())
        && f.getCondition() instanceof BinaryTree c && isConstant(c.getRightOperand())
        && f.getUpdate().size() == 1 && updateIsConstantStep(f.getUpdate().get(0).getExpression());
    if (unroll) {
      line("#pragma unroll");
      constantLoopVars.add(loopVar);
    }
    line("for (" + init + "; " + (f.getCondition() == null ? "" : cond(f.getCondition())) + "; " + update + ") {");
    nested(f.getStatement());
    if (unroll) {
      constantLoopVars.remove(loopVar);
    }
  }

  private boolean updateIsConstantStep(ExpressionTree e) {
    if (e instanceof UnaryTree) {
      return true;
    }
    return e instanceof CompoundAssignmentTree ca && isConstant(ca.getExpression());
  }

  /**
   * True if {@code e} is a compile-time constant in the generated code: literals, constant variables, specialised
   * parameters, and variables of enclosing loops that are being unrolled (constant after unrolling).
   */
  private boolean isConstant(ExpressionTree e) {
    return switch (e) {
      case LiteralTree l -> true;
      case ParenthesizedTree p -> isConstant(p.getExpression());
      case UnaryTree u -> isConstant(u.getExpression());
      case BinaryTree b -> isConstant(b.getLeftOperand()) && isConstant(b.getRightOperand());
      case IdentifierTree i -> {
        Element el = env.element(src, i);
        yield el instanceof VariableElement ve && (ve.getConstantValue() != null || constantLoopVars.contains(ve)
            || (el.getKind() == ElementKind.PARAMETER && constants.containsKey(ve.getSimpleName().toString())));
      }
      case MemberSelectTree m -> env.element(src, m) instanceof VariableElement ve && ve.getConstantValue() != null;
      default -> false;
    };
  }

  private void variable(VariableTree v) {
    VariableElement ve = (VariableElement) env.element(src, v);
    TypeMirror t = ve.asType();
    String name = cname(v.getName().toString());
    ExpressionTree init = v.getInitializer();
    TypeKind ek = CTypes.elementKind(t);
    if (ek != null) {
      if (init instanceof NewArrayTree na && na.getDimensions().size() == 1 && na.getInitializers() == null) {
        int n = constantSize(na.getDimensions().get(0));
        fixedArrays.put(ve, n);
        line(CTypes.name(ek) + " " + name + "[" + n + "] = {};  // Java zero-initialises; registers after unrolling");
      } else if (init instanceof MethodInvocationTree mi && isKernelContext(receiverType(mi))) {
        String mn = methodName(mi);
        if (!mn.equals("allocateFloatLocalArray") && !mn.equals("allocateIntLocalArray")) {
          throw error(v, "unsupported KernelContext call for an array: " + mn);
        }
        if (!kernel) {
          throw error(v, "shared arrays must be allocated at the top level of the kernel body, not in a device"
              + " function (there the GPU has one array for every call; pass the kernel's array as a parameter)");
        }
        if (inParallelLoop || indent != 1) {
          throw error(v, "shared arrays must be allocated at the top level of the kernel body");
        }
        int n = constantSize(mi.getArguments().get(0));
        sharedBytes += 4L * n + 15 & ~15L;
        if (sharedBytes > MAX_STATIC_SHARED) {
          throw error(v, "the kernel's shared arrays take " + sharedBytes + " bytes with this one; a block may hold"
              + " at most " + MAX_STATIC_SHARED + " bytes of static shared memory (48 KiB, CUDA C++ Programming"
              + " Guide, \"Shared Memory\")");
        }
        fixedArrays.put(ve, n);
        // 16-byte aligned: Vec16's 16-byte accesses may target a shared array (nvcc aligns one only to its element)
        line("__shared__ __align__(16) " + CTypes.name(ek) + " " + name + "[" + n + "];");
      } else
        if (init != null && CTypes.elementKind(env.type(src, init)) == ek
            && (init instanceof IdentifierTree || init instanceof ParenthesizedTree)) {
              refuseOuterLocalArray(init, "aliases it");
              line(CTypes.name(ek) + "* " + name + " = " + expr(init).c() + ";");
            } else {
              throw error(v, "array variables must be initialised with 'new T[constant]', a KernelContext shared "
                  + "array or another array variable (no other allocation on the GPU)");
            }
      return;
    }
    if (!CTypes.supported(t.getKind())) {
      throw error(v, "type " + t + " is not supported on the GPU (primitives and primitive arrays only)");
    }
    String decl = CTypes.name(t.getKind()) + " " + name;
    line(init == null ? decl + ";" : decl + " = " + conv(whole(init), t.getKind()) + ";");
  }

  /**
   * {@link #expr} of an expression evaluated on its own (a statement, an initialiser, a return value, the right side
   * of an assignment to a local): a call there may write memory and return a value.
   */
  private Typed whole(ExpressionTree e) {
    e = KernelTranslator.bare(e);
    ExpressionTree outer = wholeCall;
    wholeCall = e;
    try {
      return expr(e);
    } finally {
      wholeCall = outer;
    }
  }

  private int constantSize(ExpressionTree e) {
    Object c = constantValue(e);
    if (!(c instanceof Integer n) || n <= 0) {
      throw error(e, "array size must be a positive compile-time constant (literal, static final int or "
          + "specialised @Constant parameter)");
    }
    return n;
  }

  /** The value of a constant int expression, folding + - * / << >> of constants; null if not constant. */
  private Object constantValue(ExpressionTree e) {
    switch (e) {
      case LiteralTree l -> {
        return l.getValue();
      }
      case ParenthesizedTree p -> {
        return constantValue(p.getExpression());
      }
      case IdentifierTree i -> {
        Element el = env.element(src, i);
        if (el instanceof VariableElement ve) {
          if (ve.getConstantValue() != null) {
            return ve.getConstantValue();
          }
          if (el.getKind() == ElementKind.PARAMETER) {
            return constants.get(ve.getSimpleName().toString());
          }
        }
        return null;
      }
      case MemberSelectTree m -> {
        return env.element(src, m) instanceof VariableElement ve ? ve.getConstantValue() : null;
      }
      case BinaryTree b -> {
        if (constantValue(b.getLeftOperand()) instanceof Integer x
            && constantValue(b.getRightOperand()) instanceof Integer y) {
          return switch (b.getKind()) {
            case PLUS -> x + y;
            case MINUS -> x - y;
            case MULTIPLY -> x * y;
            case DIVIDE -> y == 0 ? null : x / y;
            case LEFT_SHIFT -> x << y;
            case RIGHT_SHIFT -> x >> y;
            default -> null;
          };
        }
        return null;
      }
      default -> {
        return null;
      }
    }
  }

  // ---- expressions with side effects (statement level only) ----

  private String sideEffect(ExpressionTree e) {
    switch (e) {
      case AssignmentTree a -> {
        checkLvalue(a.getVariable());
        if (a.getVariable() instanceof IdentifierTree id
            && fixedArrays.containsKey((VariableElement) env.element(src, id))) {
          throw error(a, id.getName() + " is a fixed-size local array (a C array on the GPU): it cannot be reassigned;"
              + " declare an alias ('" + env.type(src, id) + " alias = " + id.getName() + ";') and reassign that");
        }
        TypeKind k = env.type(src, a.getVariable()).getKind();
        Typed value = a.getVariable() instanceof IdentifierTree ? whole(a.getExpression()) : expr(a.getExpression());
        return expr(a.getVariable()).c() + " = " + conv(value, k);
      }
      case CompoundAssignmentTree ca -> {
        checkLvalue(ca.getVariable());
        Typed target = expr(ca.getVariable());
        Typed operand = ca.getVariable() instanceof IdentifierTree ? whole(ca.getExpression())
            : expr(ca.getExpression());
        Typed value = binary(compoundOp(ca.getKind()), target, operand, ca);
        return target.c() + " = " + conv(value, target.kind());
      }
      case UnaryTree u when KernelTranslator.steps(u) -> {
        checkLvalue(u.getExpression());
        Typed target = expr(u.getExpression());
        boolean inc = u.getKind() == Tree.Kind.POSTFIX_INCREMENT || u.getKind() == Tree.Kind.PREFIX_INCREMENT;
        Typed one = new Typed("1", TypeKind.INT);
        return target.c() + " = " + conv(binary(inc ? Tree.Kind.PLUS : Tree.Kind.MINUS, target, one, u), target.kind());
      }
      case MethodInvocationTree mi -> {
        return whole(mi).c();
      }
      default -> throw error(e, "not a statement expression: " + e.getKind());
    }
  }

  /** Assignment targets are locals or array elements whose index has no side effects (it is evaluated twice). */
  private void checkLvalue(ExpressionTree e) {
    checkParallelTarget(e);
    checkLvalueShape(e);
  }

  /** In the @Parallel loop: refuses assigning the loop variable, or what was declared outside the loop. */
  private void checkParallelTarget(ExpressionTree e) {
    if (inParallelLoop) {
      ExpressionTree root = KernelTranslator.arrayRoot(e);
      boolean element = KernelTranslator.bare(e) instanceof ArrayAccessTree; // an element of root, not root itself
      Element el = root instanceof IdentifierTree ? env.element(src, root) : null;
      if (el != null && el.equals(parallelVar)) {
        throw error(e, "the @Parallel loop variable " + el + " cannot be assigned in its loop (each GPU thread runs"
            + " its own iterations; the loop counts them)");
      }
      if (el != null && outsideTheLoop.contains(el) && (!element || el.getKind() == ElementKind.LOCAL_VARIABLE)) {
        throw error(e, el + " is declared outside the @Parallel loop: on the GPU each thread has its own copy, in Java"
            + " the iterations share it; declare it inside the loop" + (!element ? ", or write to an array parameter"
                : ""));
      }
    }
  }

  private void checkLvalueShape(ExpressionTree e) {
    if (e instanceof ArrayAccessTree aa) {
      checkLvalueShape(aa.getExpression());
      if (!sideEffectFree(aa.getIndex())) {
        throw error(e, "the index of an assigned array element may hold only names, literals, operators, casts and"
            + " array reads (the translation may evaluate it twice): compute it into a local first");
      }
    } else if (e instanceof IdentifierTree i) {
      Element el = env.element(src, i);
      if (el == null || el.getKind() == ElementKind.FIELD) {
        throw error(e, "fields cannot be assigned on the GPU (static state is not shared with the device)");
      }
    } else if (!(e instanceof ParenthesizedTree)) {
      throw error(e, "unsupported assignment target");
    }
  }

  /**
   * In the @Parallel loop, refuses {@code e} if it names a local array declared before the loop: each GPU thread has
   * its own copy of it, the Java iterations share it, so a write through an alias or a callee would differ.
   */
  private void refuseOuterLocalArray(ExpressionTree e, String how) {
    e = KernelTranslator.bare(e);
    Element el = inParallelLoop && e instanceof IdentifierTree ? env.element(src, e) : null;
    if (el != null && outsideTheLoop.contains(el) && el.getKind() == ElementKind.LOCAL_VARIABLE
        && el.asType().getKind() == TypeKind.ARRAY) {
      throw error(e, el + " is declared outside the @Parallel loop and " + how + ": on the GPU each thread has its own"
          + " copy, in Java the iterations share it; declare it inside the loop");
    }
  }

  private boolean sideEffectFree(ExpressionTree e) {
    return switch (e) {
      case LiteralTree l -> true;
      case IdentifierTree i -> true;
      case MemberSelectTree m -> sideEffectFree(m.getExpression());
      case ParenthesizedTree p -> sideEffectFree(p.getExpression());
      case BinaryTree b -> sideEffectFree(b.getLeftOperand()) && sideEffectFree(b.getRightOperand());
      case ArrayAccessTree a -> sideEffectFree(a.getExpression()) && sideEffectFree(a.getIndex());
      case TypeCastTree c -> sideEffectFree(c.getExpression());
      default -> false;
    };
  }

  private static Tree.Kind compoundOp(Tree.Kind k) {
    return switch (k) {
      case PLUS_ASSIGNMENT -> Tree.Kind.PLUS;
      case MINUS_ASSIGNMENT -> Tree.Kind.MINUS;
      case MULTIPLY_ASSIGNMENT -> Tree.Kind.MULTIPLY;
      case DIVIDE_ASSIGNMENT -> Tree.Kind.DIVIDE;
      case REMAINDER_ASSIGNMENT -> Tree.Kind.REMAINDER;
      case LEFT_SHIFT_ASSIGNMENT -> Tree.Kind.LEFT_SHIFT;
      case RIGHT_SHIFT_ASSIGNMENT -> Tree.Kind.RIGHT_SHIFT;
      case UNSIGNED_RIGHT_SHIFT_ASSIGNMENT -> Tree.Kind.UNSIGNED_RIGHT_SHIFT;
      case AND_ASSIGNMENT -> Tree.Kind.AND;
      case OR_ASSIGNMENT -> Tree.Kind.OR;
      case XOR_ASSIGNMENT -> Tree.Kind.XOR;
      default -> throw new IllegalArgumentException(k.toString());
    };
  }

  // ---- pure expressions ----

  private String cond(ExpressionTree e) {
    String c = expr(e).c();
    return c.startsWith("(") && c.endsWith(")") && balanced(c) ? c.substring(1, c.length() - 1) : c;
  }

  private static boolean balanced(String c) {
    int depth = 0;
    for (int i = 0; i < c.length() - 1; i++) {
      depth += c.charAt(i) == '(' ? 1 : c.charAt(i) == ')' ? -1 : 0;
      if (depth == 0) {
        return false;
      }
    }
    return true;
  }

  private String conv(Typed t, TypeKind to) {
    return CTypes.convert(t.c(), t.kind(), to);
  }

  private Typed expr(ExpressionTree e) {
    switch (e) {
      case ParenthesizedTree p -> {
        return expr(p.getExpression());
      }
      case LiteralTree l -> {
        return literal(l);
      }
      case IdentifierTree i -> {
        return identifier(i);
      }
      case MemberSelectTree m -> {
        return memberSelect(m);
      }
      case ArrayAccessTree a -> {
        Typed arr = expr(a.getExpression());
        TypeKind ek = CTypes.elementKind(env.type(src, a.getExpression()));
        return new Typed(arr.c() + "[" + conv(expr(a.getIndex()), TypeKind.INT) + "]", ek);
      }
      case BinaryTree b -> {
        return binary(b.getKind(), expr(b.getLeftOperand()), expr(b.getRightOperand()), b);
      }
      case UnaryTree u -> {
        return unary(u);
      }
      case TypeCastTree c -> {
        TypeKind to = env.type(src, c).getKind();
        if (!CTypes.supported(to)) {
          throw error(c, "cast to " + env.type(src, c) + " is not supported");
        }
        Typed single = singlePrecision(c, to);
        if (single != null) {
          return single;
        }
        Typed v = expr(c.getExpression());
        return new Typed(v.kind() == to ? v.c() : conv(v, to), to);
      }
      case ConditionalExpressionTree c -> {
        TypeKind k = kindOf(c);
        // ?: groups to the right: a conditional as the condition keeps its parentheses (cond() strips them)
        ExpressionTree test = KernelTranslator.bare(c.getCondition());
        String condition = test instanceof ConditionalExpressionTree ? expr(test).c() : cond(test);
        return new Typed("(" + condition + " ? " + conv(expr(c.getTrueExpression()), k) + " : "
            + conv(expr(c.getFalseExpression()), k) + ")", k);
      }
      case MethodInvocationTree mi -> {
        return call(mi);
      }
      case AssignmentTree a -> throw error(e, "assignment inside an expression is not supported; use a statement");
      case CompoundAssignmentTree a ->
        throw error(e, "assignment inside an expression is not supported; use a statement");
      case NewArrayTree n -> throw error(e, "array allocation is only supported as 'T[] v = new T[constant]'");
      default -> {
        switch (e.getKind()) {
          case NEW_CLASS -> throw error(e, "object allocation is not supported on the GPU");
          case LAMBDA_EXPRESSION, MEMBER_REFERENCE -> throw error(e, "lambdas and method references are not supported");
          case INSTANCE_OF -> throw error(e, "instanceof is not supported (no objects on the GPU)");
          default -> throw error(e, "unsupported expression: " + e.getKind());
        }
      }
    }
  }

  private TypeKind kindOf(ExpressionTree e) {
    TypeMirror t = env.type(src, e);
    if (t == null || !CTypes.supported(t.getKind())) {
      throw error(e, "type " + t + " is not supported on the GPU (primitives and primitive arrays only)");
    }
    return t.getKind();
  }

  private Typed literal(LiteralTree l) {
    if (l.getKind() == Tree.Kind.STRING_LITERAL || l.getKind() == Tree.Kind.NULL_LITERAL) {
      throw error(l, "strings and null are not supported on the GPU");
    }
    if (l.getKind() == Tree.Kind.CHAR_LITERAL) {
      throw error(l, "char is not supported on the GPU");
    }
    TypeKind k = kindOf(l);
    String text = env.sourceText(src, l).replace("_", "");
    if ((k == TypeKind.INT || k == TypeKind.LONG) && text.matches("0[xX][0-9a-fA-F]+[lL]?")
        && ((Number) l.getValue()).longValue() >= 0) {
      String hex = text.replaceAll("[lL]$", "");
      return new Typed(k == TypeKind.LONG ? hex + "LL" : hex, k);
    }
    return new Typed(CTypes.literal(l.getValue(), k), k);
  }

  private Typed identifier(IdentifierTree i) {
    Element el = env.element(src, i);
    if (el instanceof VariableElement ve) {
      if (ve.getKind() == ElementKind.FIELD) {
        return constantField(i, ve);
      }
      if (isKernelContext(ve.asType())) {
        throw error(i, "KernelContext can only be used to call its methods or read its fields");
      }
      TypeMirror t = ve.asType();
      TypeKind k = CTypes.elementKind(t) != null ? TypeKind.ARRAY : kindOf(i);
      return new Typed(cname(i.getName().toString()), k);
    }
    throw error(i, "unsupported name: " + i.getName());
  }

  private Typed constantField(Tree at, VariableElement ve) {
    if (ve.getConstantValue() == null || !ve.getModifiers().contains(Modifier.STATIC)) {
      throw error(at, "field " + ve.getSimpleName() + " is not a static final constant (only compile-time "
          + "constants are available on the GPU)");
    }
    TypeKind k = ve.asType().getKind();
    if (!CTypes.supported(k)) {
      throw error(at, "constant " + ve.getSimpleName() + " of type " + ve.asType() + " is not supported");
    }
    return new Typed(CTypes.literal(ve.getConstantValue(), k), k);
  }

  private Typed memberSelect(MemberSelectTree m) {
    Element el = env.element(src, m);
    TypeMirror owner = env.type(src, m.getExpression());
    if (owner != null && isKernelContext(owner) && el instanceof VariableElement) {
      String c = switch (m.getIdentifier().toString()) {
        case "globalIdx" -> "(int)(blockIdx.x * blockDim.x + threadIdx.x)";
        case "localIdx" -> "(int)threadIdx.x";
        case "groupIdx" -> "(int)blockIdx.x";
        case "localGroupSize" -> "(int)blockDim.x";
        case "globalGroupSize" -> "(int)(gridDim.x * blockDim.x)";
        case "WARP_SIZE" -> "32";
        default -> throw error(m, "unknown KernelContext field " + m.getIdentifier());
      };
      return new Typed(c, TypeKind.INT);
    }
    if (m.getIdentifier().contentEquals("length") && el != null && el.getKind() == ElementKind.FIELD
        && owner != null && owner.getKind() == TypeKind.ARRAY) {
      Element arr = env.element(src, m.getExpression());
      Integer n = fixedArrays.get(arr);
      if (n == null) {
        throw error(m, "array length is only known for fixed-size local arrays; pass the size as a parameter");
      }
      return new Typed(Integer.toString(n), TypeKind.INT);
    }
    if (el instanceof VariableElement ve && ve.getKind() == ElementKind.FIELD) {
      return constantField(m, ve);
    }
    throw error(m, "unsupported member access: " + m);
  }

  private Typed unary(UnaryTree u) {
    Typed v = expr(u.getExpression());
    TypeKind p = CTypes.promote(v.kind());
    return switch (u.getKind()) {
      case UNARY_MINUS -> CTypes.integral(p) ? new Typed("j_neg(" + conv(v, p) + ")", p)
          : new Typed(v.c().startsWith("-") ? "(-(" + v.c() + "))" : "(-" + v.c() + ")", p); // not --1.5f
      case UNARY_PLUS -> new Typed(conv(v, p), p);
      case BITWISE_COMPLEMENT -> new Typed("(~" + conv(v, p) + ")", p);
      case LOGICAL_COMPLEMENT -> new Typed("(!" + v.c() + ")", TypeKind.BOOLEAN);
      default -> throw error(u, "++ and -- are only supported as statements (e.g. 'i++;'), not inside expressions");
    };
  }

  /** A binary operation with Java's promotion and semantics (JLS §15.17 to §15.24). */
  private Typed binary(Tree.Kind op, Typed l, Typed r, Tree at) {
    switch (op) {
      case CONDITIONAL_AND, CONDITIONAL_OR -> {
        return new Typed("(" + l.c() + (op == Tree.Kind.CONDITIONAL_AND ? " && " : " || ") + r.c() + ")",
            TypeKind.BOOLEAN);
      }
      case LEFT_SHIFT, RIGHT_SHIFT, UNSIGNED_RIGHT_SHIFT -> {
        TypeKind p = CTypes.promote(l.kind());
        String f = op == Tree.Kind.LEFT_SHIFT ? "j_shl" : op == Tree.Kind.RIGHT_SHIFT ? "j_shr" : "j_ushr";
        String count = r.kind() == TypeKind.LONG ? "(int)(" + r.c() + ")" : conv(r, TypeKind.INT);
        return new Typed(f + "(" + conv(l, p) + ", " + count + ")", p);
      }
      default -> {}
    }
    if (l.kind() == TypeKind.ARRAY || r.kind() == TypeKind.ARRAY) {
      throw error(at, "arrays cannot be compared or combined (no objects on the GPU)");
    }
    TypeKind p = CTypes.promote(l.kind(), r.kind());
    String a = conv(l, p);
    String b = conv(r, p);
    String infix = switch (op) {
      case LESS_THAN -> "<";
      case LESS_THAN_EQUAL -> "<=";
      case GREATER_THAN -> ">";
      case GREATER_THAN_EQUAL -> ">=";
      case EQUAL_TO -> "==";
      case NOT_EQUAL_TO -> "!=";
      default -> null;
    };
    if (infix != null) {
      return new Typed("(" + a + " " + infix + " " + b + ")", TypeKind.BOOLEAN);
    }
    if (op == Tree.Kind.AND || op == Tree.Kind.OR || op == Tree.Kind.XOR) {
      String o = op == Tree.Kind.AND ? " & " : op == Tree.Kind.OR ? " | " : " ^ ";
      return p == TypeKind.BOOLEAN ? new Typed("(bool)(" + a + o + b + ")", p) : new Typed("(" + a + o + b + ")", p);
    }
    if (CTypes.integral(p)) {
      String f = switch (op) {
        case PLUS -> "j_add";
        case MINUS -> "j_sub";
        case MULTIPLY -> "j_mul";
        case DIVIDE -> "j_div";
        case REMAINDER -> "j_rem";
        default -> throw error(at, "unsupported operator " + op);
      };
      return new Typed(f + "(" + a + ", " + b + ")", p);
    }
    boolean f32 = p == TypeKind.FLOAT;
    return switch (op) {
      case PLUS -> new Typed("(" + a + " + " + b + ")", p);
      case MINUS -> new Typed("(" + a + " - " + b + ")", p);
      // never contracted into an FMA (Java rounds the product): see CudaPrelude
      case MULTIPLY -> new Typed((f32 ? "__fmul_rn(" : "__dmul_rn(") + a + ", " + b + ")", p);
      case DIVIDE -> new Typed("(" + a + " / " + b + ")", p);
      case REMAINDER -> new Typed((f32 ? "fmodf(" : "fmod(") + a + ", " + b + ")", p);
      default -> throw error(at, "unsupported operator " + op + " on " + p);
    };
  }

  // ---- calls ----

  /**
   * {@code (float) Math.exp(x)} and {@code (float) Math.log(x)} with a float {@code x} as CUDA's {@code expf} /
   * {@code logf} (see {@link Intrinsics}: a few ulp from Java's double-then-round, at float instead of double speed);
   * null for any other cast.
   */
  private Typed singlePrecision(TypeCastTree c, TypeKind to) {
    ExpressionTree inner = KernelTranslator.bare(c.getExpression());
    if (to != TypeKind.FLOAT || !(inner instanceof MethodInvocationTree mi) || mi.getArguments().size() != 1) {
      return null;
    }
    if (!(env.element(src, mi) instanceof ExecutableElement me)
        || !((TypeElement) me.getEnclosingElement()).getQualifiedName().contentEquals("java.lang.Math")) {
      return null;
    }
    String name = me.getSimpleName().toString();
    ExpressionTree arg = mi.getArguments().get(0);
    if (!(name.equals("exp") || name.equals("log")) || env.type(src, arg).getKind() != TypeKind.FLOAT) {
      return null;
    }
    return new Typed(name + "f(" + conv(expr(arg), TypeKind.FLOAT) + ")", TypeKind.FLOAT);
  }

  private Typed call(MethodInvocationTree mi) {
    Element el = env.element(src, mi);
    if (!(el instanceof ExecutableElement me)) {
      throw error(mi, "unresolved call");
    }
    TypeElement owner = (TypeElement) me.getEnclosingElement();
    List<? extends ExpressionTree> args = mi.getArguments();
    if (env.writesMemory(src, mi)) {
      for (ExpressionTree arg : args) refuseOuterLocalArray(arg, me.getSimpleName() + " may write it");
    }
    if (isKernelContext(owner.asType())) {
      return contextCall(mi, me, args);
    }
    if (!me.getModifiers().contains(Modifier.STATIC)) {
      String receiver = "";
      if (mi.getMethodSelect() instanceof MemberSelectTree sel) {
        receiver = sel.getExpression() + ".";
        if (env.element(src, sel.getExpression()) == null
            || env.element(src, sel.getExpression()).getKind() != ElementKind.FIELD) { // System.out: the call's reason
          expr(sel.getExpression()); // a more specific reason for the receiver (a string, an object), if any
        }
      }
      throw error(mi, "instance method calls are not supported on the GPU (no objects): " + receiver
          + me.getSimpleName() + (owner.getQualifiedName().toString().startsWith("java.io.") ? " (no I/O either)"
              : ""));
    }
    StringBuilder key = new StringBuilder(owner.getSimpleName()).append('.').append(me.getSimpleName()).append('(');
    for (int i = 0; i < me.getParameters().size(); i++) {
      key.append(i == 0 ? "" : ",").append(me.getParameters().get(i).asType());
    }
    key.append(')');
    String pkg = owner.getQualifiedName().toString();
    String template = pkg.startsWith("java.lang.") || pkg.equals(dev.taco.kernels.Vec16.class.getName())
        || pkg.equals(dev.taco.kernels.Fp8.class.getName()) || pkg.equals(dev.taco.kernels.FastMath.class.getName())
        || pkg.equals(dev.taco.kernels.Bf16.class.getName()) ? Intrinsics.lookup(key.toString()) : null;
    TypeKind ret = me.getReturnType().getKind();
    if (template != null) {
      String[] converted = new String[args.size()];
      for (int i = 0; i < args.size(); i++) {
        converted[i] = conv(expr(args.get(i)), me.getParameters().get(i).asType().getKind());
      }
      // one pass: an argument's own text may hold "$1" (Java identifiers may contain '$')
      String c = java.util.regex.Pattern.compile("\\$(\\d)").matcher(template)
          .replaceAll(m -> java.util.regex.Matcher.quoteReplacement(converted[m.group(1).charAt(0) - '0']));
      return new Typed(c, ret);
    }
    if (pkg.startsWith("java.")) {
      throw error(mi, "JDK method " + key + " has no CUDA mapping");
    }
    if (!env.hasSource(me)) {
      throw error(mi, "call to " + key + ": its source was not given to the translator");
    }
    if (me.isVarArgs()) {
      throw error(mi, "varargs methods are not supported");
    }
    if (ret != TypeKind.VOID && mi != wholeCall && env.writesMemory(me)) {
      throw error(mi, me.getSimpleName() + " writes an array and returns a value: inside an expression its write and"
          + " the other operands would be ordered as C++ chooses, not left to right as in Java; assign its result to a"
          + " local variable first (int r = " + me.getSimpleName() + "(...);)");
    }
    callees.add(me);
    StringBuilder c = new StringBuilder(env.deviceName(me)).append('(');
    boolean first = true;
    for (int i = 0; i < args.size(); i++) {
      TypeMirror pt = me.getParameters().get(i).asType();
      if (isKernelContext(pt)) {
        continue; // the GPU's thread ids are implicit
      }
      Typed a = expr(args.get(i));
      c.append(first ? "" : ", ").append(CTypes.elementKind(pt) != null ? a.c() : conv(a, pt.getKind()));
      first = false;
    }
    return new Typed(c.append(')').toString(), ret);
  }

  private Typed contextCall(MethodInvocationTree mi, ExecutableElement me, List<? extends ExpressionTree> args) {
    String n = me.getSimpleName().toString();
    return switch (n) {
      case "barrier" -> new Typed("__syncthreads()", TypeKind.VOID);
      case "laneId" -> new Typed("(int)(threadIdx.x & 31)", TypeKind.INT);
      case "shflXor" -> {
        TypeKind k = me.getParameters().get(0).asType().getKind();
        yield new Typed("__shfl_xor_sync(0xffffffffu, " + conv(expr(args.get(0)), k) + ", "
            + conv(expr(args.get(1)), TypeKind.INT) + ")", k);
      }
      case "warpReduceSum" -> new Typed("j_warp_reduce_sum(" + conv(expr(args.get(0)), TypeKind.FLOAT) + ")",
          TypeKind.FLOAT);
      case "warpReduceMax" -> new Typed("j_warp_reduce_max(" + conv(expr(args.get(0)), TypeKind.FLOAT) + ")",
          TypeKind.FLOAT);
      case "mmaBf16" -> {
        StringBuilder c = new StringBuilder("j_mma_bf16(").append(expr(args.get(0)).c());
        for (int i = 1; i < args.size(); i++) {
          c.append(", ").append(conv(expr(args.get(i)), TypeKind.INT));
        }
        yield new Typed(c.append(')').toString(), TypeKind.VOID);
      }
      default -> throw error(mi, "KernelContext." + n + " is only supported as 'T[] v = ctx." + n + "(constant)' "
          + "at the top of a kernel");
    };
  }

  private String methodName(MethodInvocationTree mi) {
    return env.element(src, mi).getSimpleName().toString();
  }

  private TypeMirror receiverType(MethodInvocationTree mi) {
    Element el = env.element(src, mi);
    return el == null ? null : el.getEnclosingElement().asType();
  }

  /**
   * A specialisation value that is one of the parameter's type: a Boolean for boolean, a number that fits for the
   * others (integers whole and in range); refused naming the parameter otherwise (it became {@code constexpr bool f =
   * 7}, a wrapped int, or a ClassCastException).
   */
  private Object checkedConstant(VariableTree p, Object v, TypeKind k) {
    boolean ok = switch (k) {
      case BOOLEAN -> v instanceof Boolean;
      case FLOAT -> v instanceof Number num && exact(num, num.floatValue()); // 16777217L or 1e300: not a float
      case DOUBLE -> v instanceof Number num && exact(num, num.doubleValue());
      case LONG, INT, SHORT, BYTE -> v instanceof Number num && (v instanceof Long || v instanceof Integer
          || v instanceof Short || v instanceof Byte || num.doubleValue() == Math.rint(num.doubleValue())
              && (double) num.longValue() == num.doubleValue()) // 1e30 would clamp to Long.MAX_VALUE
          && fits(num.longValue(), k);
      default -> false;
    };
    if (!ok) {
      throw error(p, "@Constant " + p.getName() + " is " + k.toString().toLowerCase(java.util.Locale.ROOT)
          + "; the specialisation gives " + v + (v == null ? "" : " (" + v.getClass().getSimpleName() + ")"));
    }
    return switch (k) {
      case BOOLEAN -> v;
      case FLOAT -> ((Number) v).floatValue();
      case DOUBLE -> ((Number) v).doubleValue();
      case LONG -> ((Number) v).longValue();
      case INT -> ((Number) v).intValue();
      case SHORT -> ((Number) v).shortValue();
      default -> ((Number) v).byteValue();
    };
  }

  /**
   * Whether {@code as}, {@code n} converted to the parameter's floating type, stands for {@code n}: an integer exactly
   * (16777217L is no float), a floating value rounded but not overflowed (0.1 for a float is fine, 1e300 is not).
   */
  private static boolean exact(Number n, double as) {
    boolean integral = n instanceof Long || n instanceof Integer || n instanceof Short || n instanceof Byte;
    return integral ? Double.isFinite(as) && (long) as == n.longValue()
        : Double.isInfinite(as) == Double.isInfinite(n.doubleValue());
  }

  private static boolean fits(long x, TypeKind k) {
    return switch (k) {
      case BYTE -> x == (byte) x;
      case SHORT -> x == (short) x;
      case INT -> x == (int) x;
      default -> true;
    };
  }

  private static boolean isKernelContext(TypeMirror t) {
    return t != null && t.toString().equals(KernelContext.class.getName());
  }

  // ---- output ----

  /** Names the generated code calls (math functions of the intrinsics): a local of that name would shadow them. */
  private static final Set<String> CALLED = Intrinsics.TABLE.values().stream()
      .flatMap(t -> java.util.regex.Pattern.compile("[A-Za-z_][A-Za-z0-9_]*(?=\\()").matcher(t).results())
      .map(java.util.regex.MatchResult::group).collect(java.util.stream.Collectors.toUnmodifiableSet());

  /**
   * A Java local's or parameter's C name: itself, or with a trailing {@code _} when it could mean something else in
   * CUDA C++ (a keyword, a macro, a prelude or library function it calls, a device function's {@code Class_method}
   * name) or already ends with {@code _}, which keeps the mapping one-to-one ({@code and} and {@code and_} stay two).
   */
  private static String cname(String javaName) {
    return reserved(javaName) || CALLED.contains(javaName) || javaName.endsWith("_")
        || DEVICE_OR_MACRO.matcher(javaName).matches() ? javaName + "_" : javaName;
  }

  /** A C or CUDA keyword or macro, or a name of the prelude ({@code j_}) or the implementation ({@code __}). */
  private static boolean reserved(String name) {
    return C_KEYWORDS.contains(name) || name.startsWith("j_") || name.startsWith("__");
  }

  /** {@code Class_method} (a device function's name) and {@code M_PI}, {@code INT_MAX}-like macros. */
  private static final java.util.regex.Pattern DEVICE_OR_MACRO = java.util.regex.Pattern.compile("[A-Z]\\w*_\\w+");

  /**
   * C library and CUDA math names a kernel may not take: its {@code extern "C"} entry shares their namespace (a kernel
   * named {@code exp} clashes with libm's). The C99 {@code <math.h>} functions with their {@code f} and {@code l}
   * forms, CUDA's extra math functions, and the C library calls a CUDA program may see.
   */
  private static final Set<String> LIBRARY = libraryNames();

  private static Set<String> libraryNames() {
    Set<String> names = new java.util.HashSet<>();
    for (String b : ("acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 frexp ilogb ldexp"
        + " log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc lgamma tgamma ceil floor"
        + " nearbyint rint lrint llrint round lround llround trunc fmod remainder remquo copysign nan nextafter"
        + " nexttoward fdim fmax fmin fma rsqrt rcbrt exp10 sincos sincospi sinpi cospi erfinv erfcinv erfcx normcdf"
        + " normcdfinv j0 j1 jn y0 y1 yn norm norm3d norm4d rnorm rhypot cyl_bessel_i0 cyl_bessel_i1 isnan isinf"
        + " isfinite signbit").split(" ")) {
      names.add(b);
      names.add(b + "f");
      names.add(b + "l");
    }
    names.addAll(List.of("abs", "labs", "llabs", "div", "ldiv", "printf", "malloc", "free", "memcpy", "memset",
        "memmove", "memcmp", "strlen", "exit", "abort", "rand", "clock", "clock64", "atoi", "qsort",
        "min", "max"));
    return Set.copyOf(names);
  }

  private void line(String s) {
    out.append("  ".repeat(indent)).append(s).append('\n');
  }

  private long line(Tree t) {
    return env.line(src, t);
  }

  private KernelCompileException error(Tree t, String reason) {
    return new KernelCompileException(src.fileName() + ":" + line(t) + ": " + reason);
  }
}
