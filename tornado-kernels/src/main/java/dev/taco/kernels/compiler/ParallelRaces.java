package dev.taco.kernels.compiler;

import com.sun.source.tree.ArrayAccessTree;
import com.sun.source.tree.AssignmentTree;
import com.sun.source.tree.BinaryTree;
import com.sun.source.tree.CompoundAssignmentTree;
import com.sun.source.tree.ExpressionTree;
import com.sun.source.tree.ForLoopTree;
import com.sun.source.tree.IdentifierTree;
import com.sun.source.tree.IfTree;
import com.sun.source.tree.LiteralTree;
import com.sun.source.tree.MethodInvocationTree;
import com.sun.source.tree.NewArrayTree;
import com.sun.source.tree.ParenthesizedTree;
import com.sun.source.tree.Tree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.util.TreeScanner;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.BiFunction;
import javax.lang.model.element.Element;
import javax.lang.model.element.VariableElement;
import javax.lang.model.type.TypeKind;

/**
 * What makes the iterations of a {@code @Parallel} loop race once they are GPU threads, where Java runs them one after
 * another: a kernel is refused, naming the line, if its loop
 * <ul>
 *   <li>writes an element of a shared array (a parameter, or an alias of one) at an index that does not depend on the
 *       loop variable ({@code out[0] += x[i]}: Java sums, the GPU's threads overwrite each other), unless the write is
 *       under {@code if (i == e)} with {@code e} not depending on {@code i}, which picks one iteration; an array so
 *       written may then be read only under such an {@code if}, and not written elsewhere in the loop;
 *   <li>updates an element ({@code +=}, {@code ++}) at an index that depends on the loop variable only through one
 *       term built with {@code /}, {@code %}, bit operations, shifts, a cast, a call, {@code ?:} or an array read
 *       ({@code out[i / 2] += x[i]}, a histogram {@code h[bin[i]]++}): several iterations may update one element,
 *       which Java sums and a GPU loses (several such terms, {@code out[(i / T) * T * D + (i % T) * D + j]}, are taken
 *       for a decomposition of the loop variable, each iteration its own element);
 *   <li>writes one array at two indices that provably meet across iterations ({@code x[i] = a; x[i + 1] = b});
 *   <li>reads an element of a shared array that the loop writes at an index none of its writes of that array use,
 *       unless the read provably misses every element another iteration writes ({@code x[2 * i + 1]} against a
 *       write at {@code 2 * i}), or at an index it writes but also at one that provably meets it across iterations
 *       ({@code x[i] += x[i - 1]}; {@code x[i + 1] = 0; x[i] += 1}: Java reads the previous iteration's result, a
 *       GPU thread whatever is there).
 * </ul>
 * A call that takes a shared array counts as a write of it if it may write that argument, else as a read, at one of
 * its integer arguments that depend on the loop variable (a write at no dependent index when none does); a call's read
 * is refused only where it provably meets another iteration's write ({@code get(x, i - 1)} against {@code x[i]}), and
 * what a call reads of an array it also writes, or at no dependent index ({@code Bytes.getFloat(body, 0)}), is not
 * checked.
 * <p>Indices are compared as polynomials in the loop variable, the other variables and literal constants
 * ({@code (i) * 2 + 1}, {@code 1 + 2 * i} and {@code k + 1} after {@code int k = 2 * i} are one index); a local
 * assigned once, where it is declared in the loop, stands for its initialiser; anything else ({@code i / 2},
 * {@code Math.min(i, 3)}, {@code idx[i]}) is an opaque term compared by its spelling. "Depends on the loop variable":
 * the variable itself, or a local whose initialiser or assignment mentions one that does. Arrays created inside the
 * loop are each thread's own and never race.
 * <p>The check is syntactic and does not follow the order of statements, so neither direction is exact. It misses
 * plain writes at an index that maps several iterations to one element ({@code out[i / 2] = x[i]}, a scatter through
 * an index array: the user guarantees the indices are distinct), writes that meet across iterations through an index
 * it cannot compare ({@code out[i * w + j]} with {@code j} running past {@code w}), a local reassigned after its
 * use, data-dependent conditions that pick several writers ({@code if (x[i] > m[0]) m[0] = x[i]}), and what a helper
 * method reads or writes beyond the indices it is passed. It refuses reads it cannot prove safe although they are
 * ({@code m = x[r * w]} then writes at {@code r * w + j}: start {@code m} from the loop instead), and a running sum
 * through the array ({@code x[r * w + j] += x[r * w + j - 1]}: carry it in a local, {@code acc += x[k]; x[k] = acc}).
 */
final class ParallelRaces {

  private final KernelTranslator.Source src;
  private final KernelTranslator.Env env;
  private final BiFunction<Tree, String, KernelCompileException> error;

  ParallelRaces(KernelTranslator.Source src, KernelTranslator.Env env,
      BiFunction<Tree, String, KernelCompileException> error) {
    this.src = src;
    this.env = env;
    this.error = error;
  }

  /**
   * One access of a shared array in the loop: its index as a polynomial (a call's: one of several, its integer
   * arguments that depend on the loop variable), the tree to name in errors, whether under an if that picks one
   * iteration.
   */
  private record Access(Element array, List<Poly> indices, Tree at, String shown, boolean picked) {
    Meet meet(Access o) {
      Meet m = Meet.OTHER_ITERATION;
      for (Poly a : indices) {
        for (Poly b : o.indices) {
          Meet p = Poly.meet(a, b);
          if (p == Meet.SAME_ITERATION_ONLY) return p;
          if (p == Meet.UNKNOWN) m = p;
        }
      }
      return m;
    }
  }

  /**
   * Checks loop {@code f} over {@code loopVar}; {@code shared} holds the parameters and the locals declared before it.
   *
   * @throws KernelCompileException at the first write or read that races, naming the line and the array
   */
  void check(ForLoopTree f, Element loopVar, Set<Element> shared) {
    if (oneIteration(f)) return; // for (@Parallel int once = 0; once < 1; once++): one thread, nothing to race with
    Set<Element> dependent = dependents(f, loopVar);
    Map<Element, Set<Element>> aliases = aliases(shared);
    Map<Element, ExpressionTree> definitions = definitions(f);
    Polys polys = new Polys(loopVar, dependent, definitions);
    List<Access> writes = new ArrayList<>();
    List<Access> reads = new ArrayList<>();
    Set<Element> pickedArrays = new HashSet<>();
    new TreeScanner<Void, Boolean>() { // the Boolean: inside an if that picks one iteration
      @Override
      public Void visitIf(IfTree t, Boolean picked) {
        scan(t.getCondition(), picked);
        scan(t.getThenStatement(), picked || picksOne(t.getCondition(), loopVar, dependent));
        scan(t.getElseStatement(), picked);
        return null;
      }

      @Override
      public Void visitAssignment(AssignmentTree a, Boolean picked) {
        write(a.getVariable(), picked, false);
        if (KernelTranslator.bare(a.getVariable()) instanceof ArrayAccessTree target) { // written, not read
          scan(target.getExpression(), picked);
          scan(target.getIndex(), picked);
        } else {
          scan(a.getVariable(), picked);
        }
        return scan(a.getExpression(), picked);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, Boolean picked) {
        write(a.getVariable(), picked, true);
        return super.visitCompoundAssignment(a, picked);
      }

      @Override
      public Void visitUnary(UnaryTree u, Boolean picked) {
        if (KernelTranslator.steps(u)) {
          write(u.getExpression(), picked, true);
        }
        return super.visitUnary(u, picked);
      }

      @Override
      public Void visitArrayAccess(ArrayAccessTree a, Boolean picked) {
        for (Element e : sharedArrays(a.getExpression(), shared, aliases)) {
          reads.add(new Access(e, List.of(polys.of(a.getIndex())), a, env.sourceText(src, a), picked));
        }
        return super.visitArrayAccess(a, picked);
      }

      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, Boolean picked) {
        List<ExpressionTree> at = mi.getArguments().stream()
            .filter(x -> isInteger(x) && mentions(x, dependent)).map(x -> (ExpressionTree) x).toList();
        for (int n = 0; n < mi.getArguments().size(); n++) {
          ExpressionTree arg = mi.getArguments().get(n);
          if (KernelTranslator.arrayRoot(arg) != KernelTranslator.bare(arg)) continue; // an element: read above
          boolean writes = env.writesArgument(src, mi, n);
          List<Poly> indices = at.isEmpty() ? List.of(Poly.CONSTANT) : at.stream().map(polys::of).toList();
          for (Element e : sharedArrays(arg, shared, aliases)) {
            String shown = e + " through " + env.sourceText(src, mi);
            if (writes) {
              writeAt(new Access(e, indices, mi, shown, picked), false);
            } else if (!at.isEmpty()) {
              reads.add(new Access(e, indices, mi, shown, picked));
            }
          }
        }
        return super.visitMethodInvocation(mi, picked);
      }

      private void write(ExpressionTree target, boolean picked, boolean update) {
        if (!(KernelTranslator.bare(target) instanceof ArrayAccessTree a)) return;
        for (Element e : sharedArrays(a.getExpression(), shared, aliases)) {
          writeAt(new Access(e, List.of(polys.of(a.getIndex())), target, env.sourceText(src, a), picked), update);
        }
      }

      private void writeAt(Access w, boolean update) {
        if (w.indices().stream().noneMatch(Poly::dependent)) {
          if (!w.picked()) {
            throw error.apply(w.at(),
                "writes " + w.shown() + " at an index that does not depend on the @Parallel variable "
                    + loopVar + ": every iteration writes that element, one after another in Java but all at once on a"
                    + " GPU (a race; a sum over the loop needs a reduction: a KernelContext kernel); write it under"
                    + " if (" + loopVar + " == <one value>) if one iteration should write it");
          }
          pickedArrays.add(w.array());
          return;
        }
        if (update && w.indices().getFirst().onlyThroughOneOpaqueTerm()) {
          throw error.apply(w.at(), "updates " + w.shown() + " at an index that depends on " + loopVar + " only"
              + " through one /, %, bit operation, cast, call, ?: or array read: several iterations may update one element, which Java does one after another and"
              + " a GPU's threads at once (a race; updates lost); give each iteration its own element (an index"
              + " linear in " + loopVar + "), or sum with a KernelContext kernel");
        }
        writes.add(w);
      }
    }.scan(f.getStatement(), false);

    for (Access w : writes) {
      if (pickedArrays.contains(w.array())) {
        throw error.apply(w.at(), "writes " + w.shown() + ", and the @Parallel loop also writes " + w.array()
            + " under an if that picks one iteration: that iteration's write and the others' meet at once on a GPU"
            + " (a race); write it from a separate array or a second kernel");
      }
      for (Access other : writes) {
        if (other.array().equals(w.array()) && w.meet(other) == Meet.OTHER_ITERATION) {
          throw error.apply(other.at(), "writes " + other.shown() + " and " + w.shown() + ": iteration " + loopVar
              + " writes an element another iteration writes too, one after the other in Java but at once on a"
              + " GPU (a race)");
        }
      }
    }
    for (Access r : reads) {
      if (pickedArrays.contains(r.array()) && !r.picked()) {
        throw error.apply(r.at(), "reads " + r.shown() + ", which one iteration of the @Parallel loop writes (under an"
            + " if that picks it): the other iterations read it before or after that write on a GPU, after it in"
            + " Java's order only where they come later (a race); write it in a kernel before this one");
      }
      // a read at an index the loop also writes at (each iteration reads its own element) may meet the loop's other
      // writes of the array unless they provably land elsewhere; any other read must provably miss every write
      List<Access> same = writes.stream().filter(w -> w.array().equals(r.array()))
          .filter(w -> w.meet(r) == Meet.SAME_ITERATION_ONLY).toList();
      for (Access w : writes) {
        if (!w.array().equals(r.array())) continue;
        Meet m = w.meet(r);
        boolean guessed = r.at() instanceof MethodInvocationTree; // a call's index is one of its arguments: a guess
        if (m == Meet.OTHER_ITERATION || m == Meet.UNKNOWN && same.isEmpty() && !guessed) {
          throw error.apply(r.at(), "reads " + r.shown() + " and the @Parallel loop writes " + w.shown() + ": the"
              + " element read " + (m == Meet.UNKNOWN ? "may be" : "is") + " one another iteration writes, which"
              + " Java reads after or before that iteration's write and a GPU thread at whatever moment (a race);"
              + " read and write each element at the same index, carry a running value in a local, or split the"
              + " work into two kernels");
        }
      }
    }
  }

  /** Whether {@code cond} holds for at most one value of the loop variable: {@code i == e} (and more, by &&). */
  private boolean picksOne(ExpressionTree cond, Element loopVar, Set<Element> dependent) {
    cond = KernelTranslator.bare(cond);
    if (!(cond instanceof BinaryTree b)) return false;
    if (b.getKind() == Tree.Kind.CONDITIONAL_AND) {
      return picksOne(b.getLeftOperand(), loopVar, dependent) || picksOne(b.getRightOperand(), loopVar, dependent);
    }
    if (b.getKind() != Tree.Kind.EQUAL_TO) return false;
    ExpressionTree l = KernelTranslator.bare(b.getLeftOperand()), r = KernelTranslator.bare(b.getRightOperand());
    return env.element(src, l) == loopVar && !mentions(r, dependent)
        || env.element(src, r) == loopVar && !mentions(l, dependent);
  }

  /** The shared arrays (parameters, or what an alias names) whose elements {@code arrayExpr}'s elements are. */
  private Set<Element> sharedArrays(ExpressionTree arrayExpr, Set<Element> shared, Map<Element, Set<Element>> aliases) {
    Element e = env.element(src, KernelTranslator.arrayRoot(arrayExpr));
    if (e == null || e.asType().getKind() != TypeKind.ARRAY) return Set.of();
    if (aliases.containsKey(e)) return aliases.get(e);
    return shared.contains(e) ? Set.of(e) : Set.of();
  }

  /**
   * The array locals of the kernel that alias shared arrays ({@code float[] y = x}, {@code y = c ? x : z}), each with
   * the shared arrays it may name (to a fixed point over the whole method); locals that only ever hold new arrays are
   * not in it.
   */
  private Map<Element, Set<Element>> aliases(Set<Element> shared) {
    Map<Element, Set<Element>> aliases = new HashMap<>();
    for (int before = -1, now = 0; before != now;) {
      before = now;
      new TreeScanner<Void, Void>() {
        @Override
        public Void visitVariable(VariableTree t, Void v) {
          alias(env.element(src, t), t.getInitializer());
          return super.visitVariable(t, v);
        }

        @Override
        public Void visitAssignment(AssignmentTree a, Void v) {
          if (KernelTranslator.bare(a.getVariable()) instanceof IdentifierTree id) {
            alias(env.element(src, id), a.getExpression());
          }
          return super.visitAssignment(a, v);
        }

        private void alias(Element local, ExpressionTree value) {
          if (local == null || value == null || local.asType().getKind() != TypeKind.ARRAY
              || KernelTranslator.bare(value) instanceof NewArrayTree) {
            return;
          }
          new TreeScanner<Void, Void>() {
            @Override
            public Void visitIdentifier(IdentifierTree id, Void v) {
              Element named = env.element(src, id);
              if (named != null && named != local && named.asType().getKind() == TypeKind.ARRAY) {
                Set<Element> to = aliases.computeIfAbsent(local, k -> new HashSet<>());
                to.addAll(aliases.getOrDefault(named, shared.contains(named) ? Set.of(named) : Set.of()));
              }
              return null;
            }

            @Override
            public Void visitArrayAccess(ArrayAccessTree a, Void v) {
              return scan(a.getExpression(), v); // x[i] names x's element, not an alias of the index's arrays
            }
          }.scan(value, null);
        }
      }.scan(src.method().getBody(), null);
      now = aliases.values().stream().mapToInt(Set::size).sum() + aliases.size();
    }
    return aliases;
  }

  /** Whether the loop runs at most once: {@code for (@Parallel int i = A; i < B; ...)} with constants B - A <= 1. */
  private boolean oneIteration(ForLoopTree f) {
    return constant(((VariableTree) f.getInitializer().getFirst()).getInitializer()) instanceof Integer from
        && f.getCondition() instanceof BinaryTree c && constant(c.getRightOperand()) instanceof Integer to
        && (long) to - from <= 1;
  }

  /** An int literal or a named constant ({@code static final int ONE = 1}), else null. */
  private Object constant(ExpressionTree e) {
    e = KernelTranslator.bare(e);
    if (e instanceof LiteralTree l) return l.getValue();
    return env.element(src, e) instanceof VariableElement v ? v.getConstantValue() : null;
  }

  /** The loop variable and the locals that depend on it (to a fixed point over the loop body). */
  private Set<Element> dependents(ForLoopTree f, Element loopVar) {
    Set<Element> dependent = new HashSet<>(Set.of(loopVar));
    for (int before = 0; before != dependent.size();) {
      before = dependent.size();
      new TreeScanner<Void, Void>() {
        @Override
        public Void visitVariable(VariableTree t, Void v) {
          if (t.getInitializer() != null && mentions(t.getInitializer(), dependent)) dependent.add(env.element(src, t));
          return super.visitVariable(t, v);
        }

        @Override
        public Void visitAssignment(AssignmentTree a, Void v) {
          local(a.getVariable(), a.getExpression());
          return super.visitAssignment(a, v);
        }

        @Override
        public Void visitCompoundAssignment(CompoundAssignmentTree a, Void v) {
          local(a.getVariable(), a.getExpression());
          return super.visitCompoundAssignment(a, v);
        }

        private void local(ExpressionTree target, ExpressionTree value) {
          if (KernelTranslator.bare(target) instanceof IdentifierTree id && mentions(value, dependent)) {
            dependent.add(env.element(src, id));
          }
        }
      }.scan(f.getStatement(), null);
    }
    return dependent;
  }

  /**
   * The integer locals declared in the loop with an initialiser and never assigned again (nor stepped): each stands
   * for its initialiser where indices are compared.
   */
  private Map<Element, ExpressionTree> definitions(ForLoopTree f) {
    Map<Element, ExpressionTree> defs = new HashMap<>();
    Set<Element> assigned = new HashSet<>();
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitVariable(VariableTree t, Void v) {
        TypeKind k = env.type(src, t).getKind();
        if (t.getInitializer() != null && (k == TypeKind.INT || k == TypeKind.LONG)) {
          defs.put(env.element(src, t), t.getInitializer());
        }
        return super.visitVariable(t, v);
      }

      @Override
      public Void visitAssignment(AssignmentTree a, Void v) {
        assigned.add(env.element(src, KernelTranslator.bare(a.getVariable())));
        return super.visitAssignment(a, v);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, Void v) {
        assigned.add(env.element(src, KernelTranslator.bare(a.getVariable())));
        return super.visitCompoundAssignment(a, v);
      }

      @Override
      public Void visitUnary(UnaryTree u, Void v) {
        if (KernelTranslator.steps(u)) assigned.add(env.element(src, KernelTranslator.bare(u.getExpression())));
        return super.visitUnary(u, v);
      }
    }.scan(f.getStatement(), null);
    defs.keySet().removeAll(assigned);
    return defs;
  }

  private boolean isInteger(ExpressionTree e) {
    TypeKind k = env.type(src, e).getKind();
    return k == TypeKind.INT || k == TypeKind.LONG || k == TypeKind.SHORT || k == TypeKind.BYTE;
  }

  /** Whether {@code t} names any of {@code elements}. */
  private boolean mentions(Tree t, Set<Element> elements) {
    if (t == null) return false;
    boolean[] found = {false};
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitIdentifier(IdentifierTree id, Void v) {
        found[0] |= elements.contains(env.element(src, id));
        return null;
      }
    }.scan(t, null);
    return found[0];
  }

  /** How two indices of one array relate across the iterations of the loop. */
  enum Meet {
    SAME_ITERATION_ONLY, OTHER_ITERATION, UNKNOWN
  }

  /**
   * An index as a polynomial: monomials (products of variable names and opaque terms, sorted, {@code ""} for the
   * constant) with their integer coefficients; {@link #UNKNOWN} where the index is not known at all.
   */
  record Poly(Map<String, Long> terms, boolean dependent, boolean onlyThroughOneOpaqueTerm) {
    static final Poly UNKNOWN = new Poly(null, true, true);
    static final Poly CONSTANT = new Poly(Map.of(), false, false);
    /** The monomial of the loop variable alone. */
    static final String LOOP = "\u0001";

    /**
     * Whether an element at index {@code a} in one iteration can be the element at {@code b} in another: never if the
     * two are equal as polynomials in which the loop variable appears linearly, as {@code c * i}, and nowhere else
     * (each iteration its own element) or if they differ by a constant that is no multiple of {@code c}; surely if
     * they differ by a non-zero multiple of it; otherwise unknown.
     */
    static Meet meet(Poly a, Poly b) {
      if (a.terms == null || b.terms == null) return Meet.UNKNOWN;
      Long ca = a.terms.get(LOOP), cb = b.terms.get(LOOP);
      if (ca == null || !ca.equals(cb) || loopElsewhere(a) || loopElsewhere(b)) {
        return a.terms.equals(b.terms) ? Meet.SAME_ITERATION_ONLY : Meet.UNKNOWN;
      }
      Map<String, Long> diff = new TreeMap<>(b.terms);
      a.terms.forEach((k, v) -> diff.merge(k, -v, Long::sum));
      diff.values().removeIf(v -> v == 0);
      if (diff.isEmpty()) return Meet.SAME_ITERATION_ONLY;
      if (diff.size() > 1 || !diff.containsKey("")) return Meet.UNKNOWN;
      return diff.get("") % ca == 0 ? Meet.OTHER_ITERATION : Meet.SAME_ITERATION_ONLY;
    }

    /** Whether the loop variable appears in a monomial other than {@code c * i} (a product, an opaque term). */
    private static boolean loopElsewhere(Poly p) {
      return p.terms.keySet().stream().anyMatch(k -> !k.equals(LOOP) && k.contains(LOOP));
    }
  }

  /** Indices to polynomials, for one loop. */
  private final class Polys {
    private final Element loopVar;
    private final Set<Element> dependent;
    private final Map<Element, ExpressionTree> definitions;

    Polys(Element loopVar, Set<Element> dependent, Map<Element, ExpressionTree> definitions) {
      this.loopVar = loopVar;
      this.dependent = dependent;
      this.definitions = definitions;
    }

    /** {@code e} as a polynomial, noting whether it depends on the loop variable and does so through an opaque term. */
    Poly of(ExpressionTree e) {
      Set<String> opaque = new HashSet<>(); // the opaque terms that depend on the loop variable
      boolean[] direct = new boolean[1]; // depends on it through a name (the loop variable, a local)
      Map<String, Long> terms = poly(e, 0, direct, opaque);
      return new Poly(terms, direct[0] || !opaque.isEmpty(), !direct[0] && opaque.size() == 1);
    }

    /** Monomial (factors joined by *, sorted; "" for the constant) to coefficient. */
    private Map<String, Long> poly(ExpressionTree e, int depth, boolean[] direct, Set<String> opaque) {
      e = KernelTranslator.bare(e);
      Map<String, Long> p = new TreeMap<>();
      if (e instanceof LiteralTree l && (l.getValue() instanceof Integer || l.getValue() instanceof Long)) {
        long v = ((Number) l.getValue()).longValue();
        if (v != 0) p.put("", v);
        return p;
      }
      if (e instanceof IdentifierTree id) {
        Element el = env.element(src, id);
        if (definitions.containsKey(el) && depth < 16) {
          return poly(definitions.get(el), depth + 1, direct, opaque);
        }
        if (el instanceof VariableElement v && v.getConstantValue() instanceof Number n) {
          if (n.longValue() != 0) p.put("", n.longValue());
          return p;
        }
        direct[0] |= dependent.contains(el);
        p.put(el == loopVar ? Poly.LOOP : id.getName().toString(), 1L);
        return p;
      }
      if (e instanceof UnaryTree u && (u.getKind() == Tree.Kind.UNARY_MINUS || u.getKind() == Tree.Kind.UNARY_PLUS)) {
        Map<String, Long> inner = poly(u.getExpression(), depth, direct, opaque);
        if (u.getKind() == Tree.Kind.UNARY_MINUS) inner.replaceAll((k, v) -> -v);
        return inner;
      }
      if (e instanceof BinaryTree b && (b.getKind() == Tree.Kind.PLUS || b.getKind() == Tree.Kind.MINUS)
          && isIntegral(b)) {
        Map<String, Long> l = poly(b.getLeftOperand(), depth, direct, opaque);
        Map<String, Long> r = poly(b.getRightOperand(), depth, direct, opaque);
        long sign = b.getKind() == Tree.Kind.PLUS ? 1 : -1;
        r.forEach((k, v) -> l.merge(k, sign * v, Long::sum));
        l.values().removeIf(v -> v == 0);
        return l;
      }
      if (e instanceof BinaryTree b && b.getKind() == Tree.Kind.MULTIPLY && isIntegral(b)) {
        Map<String, Long> l = poly(b.getLeftOperand(), depth, direct, opaque);
        Map<String, Long> r = poly(b.getRightOperand(), depth, direct, opaque);
        l.forEach((kl, vl) -> r.forEach((kr, vr) -> p.merge(monomial(kl, kr), vl * vr, Long::sum)));
        p.values().removeIf(v -> v == 0);
        return p;
      }
      // anything else is one opaque term, by its spelling
      String term = "\u0003" + e.toString().replace('*', '\u00b7');
      if (mentions(e, dependent)) opaque.add(term);
      p.put(term, 1L);
      return p;
    }

    private boolean isIntegral(ExpressionTree e) {
      TypeKind k = env.type(src, e).getKind();
      return k == TypeKind.INT || k == TypeKind.LONG;
    }

    private static String monomial(String a, String b) {
      if (a.isEmpty()) return b;
      if (b.isEmpty()) return a;
      List<String> f = new ArrayList<>(List.of(a.split("\\*")));
      f.addAll(List.of(b.split("\\*")));
      f.sort(null);
      return String.join("*", f);
    }
  }
}
