package dev.taco.kernels.compiler;

import static dev.taco.kernels.compiler.KernelTranslator.isKernelContext;

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
import com.sun.source.util.TreeScanner;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.Modifier;
import javax.lang.model.element.TypeElement;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;

/**
 * The Java-subset check of one method, a pass run before {@link FunctionEmitter} writes any C: every construct outside
 * the subset that {@link KernelTranslator} lists, and every one that would run otherwise per GPU thread than in Java,
 * is refused with {@code file:line: reason} in a {@link KernelCompileException}; a {@code @Parallel} loop then goes
 * through {@link ParallelRaces} once its body has passed. The method is walked in the order the emitter writes it
 * (statements in order, an assignment's value before its target, a for loop's updates before its condition), so that
 * of several refusals the one reported is the first the C would meet. What the emitter needs from the walk comes back
 * as {@link Checked}.
 */
final class SubsetCheck {
  /**
   * A method that passed the check, with what its emission needs.
   *
   * @param cName      its C name (the kernel's, or {@code Class_method} for a device function)
   * @param constants  the specialisation's values, each as its parameter's type (4L for an int parameter is 4)
   * @param arraySizes the elements of each fixed-size local array and each shared array
   * @param callees    the static methods with source it calls (device functions), in the order first met
   */
  record Checked(KernelTranslator.Source source, boolean kernel, String cName, Map<String, Object> constants,
      Map<VariableElement, Integer> arraySizes, Set<ExecutableElement> callees) {}

  /** Static shared memory a block may hold on every CUDA GPU. */
  static final int MAX_STATIC_SHARED = 48 * 1024;

  private final KernelTranslator.Source src;
  private final KernelTranslator.Env env;
  private final Map<String, Object> constants;
  private final boolean kernel;
  private final Map<VariableElement, Integer> arraySizes = new HashMap<>();
  private final Set<ExecutableElement> callees = new LinkedHashSet<>();
  private boolean inParallelLoop;
  /**
   * A @Parallel kernel's parameters and the locals declared before its loop: on the GPU every thread has its own copy,
   * in Java the iterations share them, so the loop must not assign them (nor the elements of a local array).
   */
  private final Set<Element> outsideTheLoop = new HashSet<>();
  /** The @Parallel loop variable, while its loop is checked. */
  private Element parallelVar;
  /**
   * The call that is a whole statement, initialiser, return value or right side of an assignment to a local: the one
   * place a call that writes memory may return a value (see {@link #call}).
   */
  private ExpressionTree wholeCall;
  /** Bytes of the kernel's shared arrays so far, each rounded up to its 16-byte alignment. */
  private long sharedBytes;
  /** Loops nested inside the @Parallel loop that enclose the statement being checked. */
  private int innerLoops;

  /**
   * @param constants the specialisation's values by parameter name (a kernel's; none for a device function)
   * @param kernel    whether the method is a kernel ({@code __global__}) rather than a device function
   */
  SubsetCheck(KernelTranslator.Source src, KernelTranslator.Env env, Map<String, Object> constants, boolean kernel) {
    this.src = src;
    this.env = env;
    this.constants = new HashMap<>(constants); // each value becomes its parameter's type in check
    this.kernel = kernel;
  }

  /**
   * Checks the method, to be named {@code cName} in C.
   *
   * @throws KernelCompileException at the first construct refused: {@code file:line: reason}
   */
  Checked check(String cName) {
    MethodTree m = src.method();
    ExecutableElement me = src.element();
    if (!me.getModifiers().contains(Modifier.STATIC)) {
      throw error(m, "kernels and device functions must be static methods");
    }
    TypeKind ret = me.getReturnType().getKind();
    if (ret != TypeKind.VOID && !CTypes.supported(ret)) {
      throw error(m, "return type " + me.getReturnType() + " is not supported (primitive or void only)");
    }
    if (kernel && CNames.clashes(cName)) {
      throw error(m, "a kernel may not be named " + cName + ": its extern \"C\" entry would clash with the C or CUDA"
          + " name (a library function, keyword or macro); rename the kernel");
    }
    List<String> names = m.getParameters().stream().map(p -> p.getName().toString()).toList();
    for (String c : new TreeSet<>(constants.keySet())) {
      if (!names.contains(c)) {
        throw error(m, "the specialisation gives '" + c + "', which is not a parameter of " + m.getName() + " ("
            + String.join(", ", names) + ")");
      }
    }
    boolean simt = false;
    for (VariableTree p : m.getParameters()) {
      VariableElement pe = (VariableElement) env.element(src, p);
      TypeMirror t = pe.asType();
      String name = p.getName().toString();
      if (isKernelContext(t)) {
        simt = true;
      } else if (kernel && constants.containsKey(name)) {
        if (!CTypes.supported(t.getKind())) {
          throw error(p, "only primitive parameters can be specialised");
        }
        constants.put(name, checkedConstant(p, constants.get(name), t.getKind())); // 4L for an int: Integer 4
      } else if (kernel && pe.getAnnotation(dev.taco.kernels.Constant.class) != null) {
        throw error(p, "@Constant parameter '" + p.getName() + "' has no value in the specialisation");
      } else if (CTypes.elementKind(t) == null && !CTypes.supported(t.getKind())) {
        throw error(p, "parameter type " + t + " is not supported (primitives, primitive arrays, KernelContext)");
      }
    }
    if (kernel && ret != TypeKind.VOID) {
      throw error(m, "a kernel must return void");
    }
    if (kernel && !simt) {
      parallelKernelBody(m.getBody());
    } else {
      m.getBody().getStatements().forEach(this::stmt);
    }
    return new Checked(src, kernel, cName, constants, arraySizes, callees);
  }

  // ---- @Parallel kernels ----

  private void parallelKernelBody(BlockTree body) {
    if (body.getStatements().stream().noneMatch(s -> s instanceof ForLoopTree f && env.isParallelLoop(src, f))) {
      throw error(src.method(), "a kernel needs a top-level @Parallel loop or a KernelContext parameter");
    }
    int loops = 0;
    outsideTheLoop.addAll(src.element().getParameters());
    Set<Element> loopWrites = Set.of();
    for (StatementTree s : body.getStatements()) {
      if (s instanceof ForLoopTree f && env.isParallelLoop(src, f)) loopWrites = env.arraysWritten(src, f);
    }
    for (StatementTree s : body.getStatements()) {
      if (s instanceof ForLoopTree f && env.isParallelLoop(src, f)) {
        loops++;
        if (loops > 1) {
          throw error(s, "only one @Parallel loop per kernel (the GPU has no grid-wide barrier between loops)");
        }
        parallelLoop(f, loopWrites);
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
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, Void v) {
        if (env.writesMemory(src, mi)) {
          throw error(mi, env.element(src, mi).getSimpleName() + " writes an array: " + where + " it would run once"
              + " per GPU thread, not as in Java; " + callHint);
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

  /**
   * {@code for (@Parallel int i = a; i < b; i++)} with an integer bound; {@code a} and {@code b} may not read what the
   * loop writes ({@code loopWrites}); then the body, and its races.
   */
  private void parallelLoop(ForLoopTree f, Set<Element> loopWrites) {
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
          .toLowerCase(Locale.ROOT) + ": Java compares " + v.getName() + " with it in floating point)");
    }
    checkOncePerThread(v.getInitializer(), loopWrites, "in the @Parallel loop's start",
        "pass the start as a parameter");
    checkOncePerThread(c.getRightOperand(), loopWrites, "in the @Parallel loop's bound",
        "pass the bound as a parameter");
    expr(v.getInitializer());
    expr(c.getRightOperand());
    inParallelLoop = true;
    parallelVar = ve;
    stmt(f.getStatement());
    new ParallelRaces(src, env, this::error).check(f, ve, outsideTheLoop); // after the body's own, narrower checks
    parallelVar = null;
    inParallelLoop = false;
  }

  // ---- statements ----

  private void stmt(StatementTree s) {
    switch (s.getKind()) {
      case BLOCK -> ((BlockTree) s).getStatements().forEach(this::stmt);
      case VARIABLE -> variable((VariableTree) s);
      case EXPRESSION_STATEMENT -> sideEffect(((ExpressionStatementTree) s).getExpression());
      case IF -> {
        IfTree t = (IfTree) s;
        expr(t.getCondition());
        stmt(t.getThenStatement());
        if (t.getElseStatement() != null) stmt(t.getElseStatement());
      }
      case FOR_LOOP -> {
        innerLoops++;
        forLoop((ForLoopTree) s);
        innerLoops--;
      }
      case WHILE_LOOP -> {
        expr(((WhileLoopTree) s).getCondition());
        innerLoops++;
        stmt(((WhileLoopTree) s).getStatement());
        innerLoops--;
      }
      case DO_WHILE_LOOP -> {
        innerLoops++;
        stmt(((DoWhileLoopTree) s).getStatement());
        innerLoops--;
        expr(((DoWhileLoopTree) s).getCondition());
      }
      case BREAK -> {
        if (((com.sun.source.tree.BreakTree) s).getLabel() != null) {
          throw error(s, "labelled break is not supported");
        }
        if (inParallelLoop && innerLoops == 0) {
          throw error(s, "break in the @Parallel loop would stop only this GPU thread's iterations, not every later"
              + " one as in Java; compute a bound first, or skip the rest with continue");
        }
      }
      case CONTINUE -> {
        if (((com.sun.source.tree.ContinueTree) s).getLabel() != null) {
          throw error(s, "labelled continue is not supported");
        }
      }
      case RETURN -> {
        if (inParallelLoop) {
          throw error(s, "return inside the @Parallel loop would end only this GPU thread's iteration; "
              + "use continue or restructure");
        }
        if (((ReturnTree) s).getExpression() != null) whole(((ReturnTree) s).getExpression());
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

  private void forLoop(ForLoopTree f) {
    if (env.isParallelLoop(src, f)) {
      throw error(f, "a @Parallel loop must be at the top level of a kernel without KernelContext "
          + "(nested parallelism is not supported: flatten the index)");
    }
    for (StatementTree s : f.getInitializer()) {
      if (s instanceof VariableTree v) {
        if (!CTypes.supported(env.type(src, v).getKind()) || v.getInitializer() == null) {
          throw error(s, "for-loop variables must be initialised primitives");
        }
        expr(v.getInitializer());
      } else {
        sideEffect(((ExpressionStatementTree) s).getExpression());
      }
    }
    f.getUpdate().forEach(u -> sideEffect(u.getExpression()));
    if (f.getCondition() != null) expr(f.getCondition());
    stmt(f.getStatement());
  }

  private void variable(VariableTree v) {
    VariableElement ve = (VariableElement) env.element(src, v);
    TypeMirror t = ve.asType();
    ExpressionTree init = v.getInitializer();
    TypeKind ek = CTypes.elementKind(t);
    if (ek == null) {
      if (!CTypes.supported(t.getKind())) {
        throw error(v, "type " + t + " is not supported on the GPU (primitives and primitive arrays only)");
      }
      if (init != null) whole(init);
    } else if (init instanceof NewArrayTree na && na.getDimensions().size() == 1 && na.getInitializers() == null) {
      arraySizes.put(ve, constantSize(na.getDimensions().get(0)));
    } else
      if (init instanceof MethodInvocationTree mi && env.element(src, mi) instanceof Element callee
          && isKernelContext(callee.getEnclosingElement().asType())) {
            sharedArray(v, callee.getSimpleName().toString(), mi);
          } else
        if (init != null && CTypes.elementKind(env.type(src, init)) == ek
            && (init instanceof IdentifierTree || init instanceof ParenthesizedTree)) {
              refuseOuterLocalArray(init, "aliases it");
              expr(init);
            } else {
              throw error(v, "array variables must be initialised with 'new T[constant]', a KernelContext shared "
                  + "array or another array variable (no other allocation on the GPU)");
            }
  }

  /** {@code T[] v = ctx.allocateFloatLocalArray(n)} (or Int): at the top of a kernel, within the static limit. */
  private void sharedArray(VariableTree v, String method, MethodInvocationTree mi) {
    if (!method.equals("allocateFloatLocalArray") && !method.equals("allocateIntLocalArray")) {
      throw error(v, "unsupported KernelContext call for an array: " + method);
    }
    if (!kernel) {
      throw error(v, "shared arrays must be allocated at the top level of the kernel body, not in a device"
          + " function (there the GPU has one array for every call; pass the kernel's array as a parameter)");
    }
    if (!src.method().getBody().getStatements().contains(v)) {
      throw error(v, "shared arrays must be allocated at the top level of the kernel body");
    }
    int n = constantSize(mi.getArguments().get(0));
    sharedBytes += 4L * n + 15 & ~15L;
    if (sharedBytes > MAX_STATIC_SHARED) {
      throw error(v, "the kernel's shared arrays take " + sharedBytes + " bytes with this one; a block may hold"
          + " at most " + MAX_STATIC_SHARED + " bytes of static shared memory (48 KiB, CUDA C++ Programming"
          + " Guide, \"Shared Memory\")");
    }
    arraySizes.put((VariableElement) env.element(src, v), n);
  }

  /**
   * {@link #expr} of an expression evaluated on its own (a statement, an initialiser, a return value, the right side
   * of an assignment to a local): a call there may write memory and return a value.
   */
  private void whole(ExpressionTree e) {
    e = KernelTranslator.bare(e);
    ExpressionTree outer = wholeCall;
    wholeCall = e;
    try {
      expr(e);
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

  private void sideEffect(ExpressionTree e) {
    switch (e) {
      case AssignmentTree a -> {
        checkLvalue(a.getVariable());
        if (a.getVariable() instanceof IdentifierTree id && arraySizes.containsKey(env.element(src, id))) {
          throw error(a, id.getName() + " is a fixed-size local array (a C array on the GPU): it cannot be reassigned;"
              + " declare an alias ('" + env.type(src, id) + " alias = " + id.getName() + ";') and reassign that");
        }
        value(a.getVariable(), a.getExpression());
        expr(a.getVariable());
      }
      case CompoundAssignmentTree ca -> {
        checkLvalue(ca.getVariable());
        expr(ca.getVariable());
        value(ca.getVariable(), ca.getExpression());
      }
      case UnaryTree u when KernelTranslator.steps(u) -> {
        checkLvalue(u.getExpression());
        expr(u.getExpression());
      }
      case MethodInvocationTree mi -> whole(mi);
      default -> throw error(e, "not a statement expression: " + e.getKind());
    }
  }

  /** The value assigned to {@code target}: on its own ({@link #whole}) where the target is a local. */
  private void value(ExpressionTree target, ExpressionTree value) {
    if (target instanceof IdentifierTree) {
      whole(value);
    } else {
      expr(value);
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

  // ---- pure expressions ----

  private void expr(ExpressionTree e) {
    switch (e) {
      case ParenthesizedTree p -> expr(p.getExpression());
      case LiteralTree l -> literal(l);
      case IdentifierTree i -> identifier(i);
      case MemberSelectTree m -> memberSelect(m);
      case ArrayAccessTree a -> {
        expr(a.getExpression());
        expr(a.getIndex());
      }
      case BinaryTree b -> binary(b);
      case UnaryTree u -> {
        expr(u.getExpression());
        if (KernelTranslator.steps(u)) {
          throw error(u, "++ and -- are only supported as statements (e.g. 'i++;'), not inside expressions");
        }
      }
      case TypeCastTree c -> {
        if (!CTypes.supported(env.type(src, c).getKind())) {
          throw error(c, "cast to " + env.type(src, c) + " is not supported");
        }
        expr(c.getExpression()); // (float) Math.exp(x) becomes expf: the same checks as the call's
      }
      case ConditionalExpressionTree c -> {
        kindOf(c);
        expr(c.getCondition());
        expr(c.getTrueExpression());
        expr(c.getFalseExpression());
      }
      case MethodInvocationTree mi -> call(mi);
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

  /** Both operands, then no array among them (Java allows arrays only as operands of == and !=). */
  private void binary(BinaryTree b) {
    expr(b.getLeftOperand());
    expr(b.getRightOperand());
    if (env.type(src, b.getLeftOperand()).getKind() == TypeKind.ARRAY
        || env.type(src, b.getRightOperand()).getKind() == TypeKind.ARRAY) {
      throw error(b, "arrays cannot be compared or combined (no objects on the GPU)");
    }
  }

  private TypeKind kindOf(ExpressionTree e) {
    TypeMirror t = env.type(src, e);
    if (t == null || !CTypes.supported(t.getKind())) {
      throw error(e, "type " + t + " is not supported on the GPU (primitives and primitive arrays only)");
    }
    return t.getKind();
  }

  private void literal(LiteralTree l) {
    if (l.getKind() == Tree.Kind.STRING_LITERAL || l.getKind() == Tree.Kind.NULL_LITERAL) {
      throw error(l, "strings and null are not supported on the GPU");
    }
    if (l.getKind() == Tree.Kind.CHAR_LITERAL) {
      throw error(l, "char is not supported on the GPU");
    }
    kindOf(l);
  }

  private void identifier(IdentifierTree i) {
    if (!(env.element(src, i) instanceof VariableElement ve)) {
      throw error(i, "unsupported name: " + i.getName());
    }
    if (ve.getKind() == ElementKind.FIELD) {
      constantField(i, ve);
    } else if (isKernelContext(ve.asType())) {
      throw error(i, "KernelContext can only be used to call its methods or read its fields");
    } else if (CTypes.elementKind(ve.asType()) == null) {
      kindOf(i);
    }
  }

  private void constantField(Tree at, VariableElement ve) {
    if (ve.getConstantValue() == null || !ve.getModifiers().contains(Modifier.STATIC)) {
      throw error(at, "field " + ve.getSimpleName() + " is not a static final constant (only compile-time "
          + "constants are available on the GPU)");
    }
    if (!CTypes.supported(ve.asType().getKind())) {
      throw error(at, "constant " + ve.getSimpleName() + " of type " + ve.asType() + " is not supported");
    }
  }

  private void memberSelect(MemberSelectTree m) {
    Element el = env.element(src, m);
    TypeMirror owner = env.type(src, m.getExpression());
    if (owner != null && isKernelContext(owner) && el instanceof VariableElement) {
      if (!Intrinsics.CONTEXT_FIELDS.containsKey(m.getIdentifier().toString())) {
        throw error(m, "unknown KernelContext field " + m.getIdentifier());
      }
    } else
      if (m.getIdentifier().contentEquals("length") && el != null && el.getKind() == ElementKind.FIELD
          && owner != null && owner.getKind() == TypeKind.ARRAY) {
            if (!arraySizes.containsKey(env.element(src, m.getExpression()))) {
              throw error(m, "array length is only known for fixed-size local arrays; pass the size as a parameter");
            }
          } else
        if (el instanceof VariableElement ve && ve.getKind() == ElementKind.FIELD) {
          constantField(m, ve);
        } else {
          throw error(m, "unsupported member access: " + m);
        }
  }

  // ---- calls ----

  private void call(MethodInvocationTree mi) {
    if (!(env.element(src, mi) instanceof ExecutableElement me)) {
      throw error(mi, "unresolved call");
    }
    TypeElement owner = (TypeElement) me.getEnclosingElement();
    List<? extends ExpressionTree> args = mi.getArguments();
    if (env.writesMemory(src, mi)) {
      for (ExpressionTree arg : args) refuseOuterLocalArray(arg, me.getSimpleName() + " may write it");
    }
    if (isKernelContext(owner.asType())) {
      String n = me.getSimpleName().toString();
      if (!Intrinsics.CONTEXT_METHODS.contains(n)) {
        throw error(mi, "KernelContext." + n + " is only supported as 'T[] v = ctx." + n + "(constant)' "
            + "at the top of a kernel");
      }
      args.forEach(this::expr);
      return;
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
    if (Intrinsics.template(me) != null) {
      args.forEach(this::expr);
      return;
    }
    if (owner.getQualifiedName().toString().startsWith("java.")) {
      throw error(mi, "JDK method " + Intrinsics.key(me) + " has no CUDA mapping");
    }
    if (!env.hasSource(me)) {
      throw error(mi, "call to " + Intrinsics.key(me) + ": its source was not given to the translator");
    }
    if (me.isVarArgs()) {
      throw error(mi, "varargs methods are not supported");
    }
    if (me.getReturnType().getKind() != TypeKind.VOID && mi != wholeCall && env.writesMemory(me)) {
      throw error(mi, me.getSimpleName() + " writes an array and returns a value: inside an expression its write and"
          + " the other operands would be ordered as C++ chooses, not left to right as in Java; assign its result to a"
          + " local variable first (int r = " + me.getSimpleName() + "(...);)");
    }
    callees.add(me);
    for (int i = 0; i < args.size(); i++) {
      if (!isKernelContext(me.getParameters().get(i).asType())) { // the GPU's thread ids are implicit
        expr(args.get(i));
      }
    }
  }

  /**
   * A specialisation value that is one of the parameter's type: a Boolean for boolean, a number that fits for the
   * others (integers whole and in range), as that type; refused naming the parameter otherwise (it became
   * {@code constexpr bool f = 7}, a wrapped int, or a ClassCastException).
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
      throw error(p, "@Constant " + p.getName() + " is " + k.toString().toLowerCase(Locale.ROOT)
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

  private KernelCompileException error(Tree t, String reason) {
    return new KernelCompileException(src.fileName() + ":" + env.line(src, t) + ": " + reason);
  }
}
