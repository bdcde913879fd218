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
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import javax.lang.model.element.Element;
import javax.lang.model.element.ElementKind;
import javax.lang.model.element.ExecutableElement;
import javax.lang.model.element.TypeElement;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;
import javax.lang.model.type.TypeMirror;

/**
 * Emits the CUDA C of one Java method that {@link SubsetCheck} passed: a {@code __global__} entry (kernel) or a
 * {@code __device__} function. Statement by statement, expression by expression, keeping names and structure. It
 * refuses nothing: a construct the check would have refused is an {@link IllegalStateException} here.
 */
final class FunctionEmitter {
  /** A C expression with the Java kind of its value. */
  private record Typed(String c, TypeKind kind) {}

  private final KernelTranslator.Source src;
  private final KernelTranslator.Env env;
  private final SubsetCheck.Checked checked;
  private final Set<VariableElement> constantLoopVars = new LinkedHashSet<>();
  private final StringBuilder out = new StringBuilder();
  private int indent;

  FunctionEmitter(KernelTranslator.Env env, SubsetCheck.Checked checked) {
    this.src = checked.source();
    this.env = env;
    this.checked = checked;
  }

  /** The C definition. */
  String emit() {
    MethodTree m = src.method();
    TypeKind ret = src.element().getReturnType().getKind();
    boolean simt = false;
    StringBuilder params = new StringBuilder();
    StringBuilder specialised = new StringBuilder();
    for (VariableTree p : m.getParameters()) {
      TypeMirror t = env.element(src, p).asType();
      String name = CNames.of(p.getName().toString());
      Object v = checked.constants().get(p.getName().toString());
      if (isKernelContext(t)) {
        simt = true;
      } else if (v != null) {
        specialised.append("  constexpr ").append(CTypes.name(t.getKind())).append(' ').append(name).append(" = ")
            .append(CTypes.literal(v, t.getKind())).append(";\n");
      } else {
        TypeKind ek = CTypes.elementKind(t);
        params.append(params.isEmpty() ? "" : ", ")
            .append(ek != null ? CTypes.name(ek) + "* " + name : CTypes.name(t.getKind()) + " " + name);
      }
    }
    out.append("// Java: ").append(src.owner().getQualifiedName()).append('.').append(m.getName())
        .append(" (").append(src.fileName()).append(':').append(env.line(src, m)).append(")\n");
    out.append(checked.kernel() ? "extern \"C\" __global__ void "
        : "static __device__ __forceinline__ " + CTypes.name(ret) + " ")
        .append(checked.cName()).append('(').append(params).append(") {\n");
    out.append(specialised);
    indent = 1;
    for (StatementTree s : m.getBody().getStatements()) {
      if (checked.kernel() && !simt && s instanceof ForLoopTree f && env.isParallelLoop(src, f)) {
        parallelLoop(f);
      } else {
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

  /** {@code for (@Parallel int i = a; i < b; i++)} becomes a grid-stride loop over a 64-bit counter. */
  private void parallelLoop(ForLoopTree f) {
    VariableTree v = (VariableTree) f.getInitializer().get(0);
    String name = CNames.of(v.getName().toString());
    String start = conv(expr(v.getInitializer()), TypeKind.LONG);
    String bound = conv(expr(((BinaryTree) f.getCondition()).getRightOperand()), TypeKind.LONG);
    line("// @Parallel loop: one iteration per GPU thread, grid-stride (64-bit counter: no wrap-around)");
    // the counter's name cannot be a Java local's: cname gives those that start with j_ a trailing _
    String counter = "j_" + name + "_it";
    line("for (long long " + counter + " = " + start + " + (long long)blockIdx.x * blockDim.x + threadIdx.x; "
        + counter + " < " + bound + "; " + counter + " += (long long)gridDim.x * blockDim.x) {");
    indent++;
    line("int " + name + " = (int)" + counter + ";");
    body(f.getStatement());
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
      case FOR_LOOP -> forLoop((ForLoopTree) s);
      case WHILE_LOOP -> {
        WhileLoopTree w = (WhileLoopTree) s;
        line("while (" + cond(w.getCondition()) + ") {");
        nested(w.getStatement());
      }
      case DO_WHILE_LOOP -> {
        DoWhileLoopTree d = (DoWhileLoopTree) s;
        line("do {");
        indent++;
        body(d.getStatement());
        indent--;
        line("} while (" + cond(d.getCondition()) + ");");
      }
      case BREAK -> line("break;");
      case CONTINUE -> line("continue;");
      case RETURN -> {
        ReturnTree r = (ReturnTree) s;
        line(r.getExpression() == null ? "return;"
            : "return " + conv(expr(r.getExpression()), src.element().getReturnType().getKind()) + ";");
      }
      case EMPTY_STATEMENT -> {}
      default -> throw unchecked(s);
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
    StringBuilder init = new StringBuilder();
    VariableElement loopVar = null;
    for (StatementTree s : f.getInitializer()) {
      if (s instanceof VariableTree v) {
        TypeKind k = env.type(src, v).getKind();
        if (!init.isEmpty()) {
          init.append(", ").append(CNames.of(v.getName().toString())).append(" = ")
              .append(conv(expr(v.getInitializer()), k));
        } else {
          init.append(CTypes.name(k)).append(' ').append(CNames.of(v.getName().toString())).append(" = ")
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
            || (el.getKind() == ElementKind.PARAMETER
                && checked.constants().containsKey(ve.getSimpleName().toString())));
      }
      case MemberSelectTree m -> env.element(src, m) instanceof VariableElement ve && ve.getConstantValue() != null;
      default -> false;
    };
  }

  /** A local: a primitive, a fixed-size local or shared array (its size from the check), or an array alias. */
  private void variable(VariableTree v) {
    VariableElement ve = (VariableElement) env.element(src, v);
    TypeMirror t = ve.asType();
    String name = CNames.of(v.getName().toString());
    ExpressionTree init = v.getInitializer();
    TypeKind ek = CTypes.elementKind(t);
    Integer n = checked.arraySizes().get(ve);
    if (ek == null) {
      String decl = CTypes.name(t.getKind()) + " " + name;
      line(init == null ? decl + ";" : decl + " = " + conv(expr(init), t.getKind()) + ";");
    } else if (n != null && init instanceof NewArrayTree) {
      line(CTypes.name(ek) + " " + name + "[" + n + "] = {};  // Java zero-initialises; registers after unrolling");
    } else if (n != null) {
      // 16-byte aligned: Vec16's 16-byte accesses may target a shared array (nvcc aligns one only to its element)
      line("__shared__ __align__(16) " + CTypes.name(ek) + " " + name + "[" + n + "];");
    } else {
      line(CTypes.name(ek) + "* " + name + " = " + expr(init).c() + ";");
    }
  }

  // ---- expressions with side effects (statement level only) ----

  private String sideEffect(ExpressionTree e) {
    switch (e) {
      case AssignmentTree a -> {
        TypeKind k = env.type(src, a.getVariable()).getKind();
        Typed value = expr(a.getExpression());
        return expr(a.getVariable()).c() + " = " + conv(value, k);
      }
      case CompoundAssignmentTree ca -> {
        Typed target = expr(ca.getVariable());
        Typed value = binary(compoundOp(ca.getKind()), target, expr(ca.getExpression()));
        return target.c() + " = " + conv(value, target.kind());
      }
      case UnaryTree u when KernelTranslator.steps(u) -> {
        Typed target = expr(u.getExpression());
        boolean inc = u.getKind() == Tree.Kind.POSTFIX_INCREMENT || u.getKind() == Tree.Kind.PREFIX_INCREMENT;
        Typed one = new Typed("1", TypeKind.INT);
        return target.c() + " = " + conv(binary(inc ? Tree.Kind.PLUS : Tree.Kind.MINUS, target, one), target.kind());
      }
      case MethodInvocationTree mi -> {
        return expr(mi).c();
      }
      default -> throw unchecked(e);
    }
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
        return binary(b.getKind(), expr(b.getLeftOperand()), expr(b.getRightOperand()));
      }
      case UnaryTree u -> {
        return unary(u);
      }
      case TypeCastTree c -> {
        TypeKind to = env.type(src, c).getKind();
        Typed single = singlePrecision(c, to);
        if (single != null) {
          return single;
        }
        Typed v = expr(c.getExpression());
        return new Typed(v.kind() == to ? v.c() : conv(v, to), to);
      }
      case ConditionalExpressionTree c -> {
        TypeKind k = env.type(src, c).getKind();
        // ?: groups to the right: a conditional as the condition keeps its parentheses (cond() strips them)
        ExpressionTree test = KernelTranslator.bare(c.getCondition());
        String condition = test instanceof ConditionalExpressionTree ? expr(test).c() : cond(test);
        return new Typed("(" + condition + " ? " + conv(expr(c.getTrueExpression()), k) + " : "
            + conv(expr(c.getFalseExpression()), k) + ")", k);
      }
      case MethodInvocationTree mi -> {
        return call(mi);
      }
      default -> throw unchecked(e);
    }
  }

  private Typed literal(LiteralTree l) {
    TypeKind k = env.type(src, l).getKind();
    String text = env.sourceText(src, l).replace("_", "");
    if ((k == TypeKind.INT || k == TypeKind.LONG) && text.matches("0[xX][0-9a-fA-F]+[lL]?")
        && ((Number) l.getValue()).longValue() >= 0) {
      String hex = text.replaceAll("[lL]$", "");
      return new Typed(k == TypeKind.LONG ? hex + "LL" : hex, k);
    }
    return new Typed(CTypes.literal(l.getValue(), k), k);
  }

  private Typed identifier(IdentifierTree i) {
    VariableElement ve = (VariableElement) env.element(src, i);
    if (ve.getKind() == ElementKind.FIELD) {
      return constantField(ve);
    }
    TypeKind k = CTypes.elementKind(ve.asType()) != null ? TypeKind.ARRAY : env.type(src, i).getKind();
    return new Typed(CNames.of(i.getName().toString()), k);
  }

  private static Typed constantField(VariableElement ve) {
    TypeKind k = ve.asType().getKind();
    return new Typed(CTypes.literal(ve.getConstantValue(), k), k);
  }

  private Typed memberSelect(MemberSelectTree m) {
    TypeMirror owner = env.type(src, m.getExpression());
    if (isKernelContext(owner)) {
      return new Typed(Intrinsics.CONTEXT_FIELDS.get(m.getIdentifier().toString()), TypeKind.INT);
    }
    if (owner != null && owner.getKind() == TypeKind.ARRAY) { // length, an array's one field
      return new Typed(Integer.toString(checked.arraySizes().get(env.element(src, m.getExpression()))), TypeKind.INT);
    }
    return constantField((VariableElement) env.element(src, m));
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
      default -> throw unchecked(u);
    };
  }

  /** A binary operation with Java's promotion and semantics (JLS §15.17 to §15.24). */
  private Typed binary(Tree.Kind op, Typed l, Typed r) {
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
        default -> throw new IllegalStateException("no integer operator " + op);
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
      default -> throw new IllegalStateException("no operator " + op + " on " + p);
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

  /** A KernelContext method, an intrinsic ({@link Intrinsics}), or a device function (the check let no other by). */
  private Typed call(MethodInvocationTree mi) {
    ExecutableElement me = (ExecutableElement) env.element(src, mi);
    List<? extends ExpressionTree> args = mi.getArguments();
    if (isKernelContext(me.getEnclosingElement().asType())) {
      return contextCall(mi, me, args);
    }
    String template = Intrinsics.template(me);
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
    return switch (me.getSimpleName().toString()) {
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
      case "ldmatrixX4", "ldmatrixX4Trans" -> new Typed("j_ldmatrix_x4(" + expr(args.get(0)).c() + ", "
          + conv(expr(args.get(1)), TypeKind.INT) + ", " + expr(args.get(2)).c() + ", "
          + conv(expr(args.get(3)), TypeKind.INT) + ", " + me.getSimpleName().contentEquals("ldmatrixX4Trans") + ")",
          TypeKind.VOID);
      case "cpAsync16" -> new Typed("j_cp_async16(" + expr(args.get(0)).c() + " + " + conv(expr(args.get(1)),
          TypeKind.INT) + ", " + expr(args.get(2)).c() + " + " + conv(expr(args.get(3)), TypeKind.INT) + ")",
          TypeKind.VOID);
      case "cpAsyncCommit" -> new Typed("j_cp_async_commit()", TypeKind.VOID);
      case "cpAsyncWait" -> new Typed("j_cp_async_wait(" + conv(expr(args.get(0)), TypeKind.INT) + ")", TypeKind.VOID);
      default -> throw unchecked(mi);
    };
  }

  // ---- output ----

  private void line(String s) {
    out.append("  ".repeat(indent)).append(s).append('\n');
  }

  /** A construct {@link SubsetCheck} refuses: reaching it here means the check did not run first. */
  private IllegalStateException unchecked(Tree t) {
    return new IllegalStateException(src.fileName() + ":" + env.line(src, t) + ": " + t.getKind()
        + " reached the emitter; SubsetCheck refuses it");
  }
}
