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
import com.sun.source.tree.StatementTree;
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
 *       under {@code if (i == e)} with {@code e} the same all through the iteration (no dependence on {@code i}, no
 *       local the loop changes), which picks one iteration; such an element may then be read, or written under
 *       another such {@code if}, only where the indices provably differ;
 *   <li>updates an element ({@code +=}, {@code ++}, {@code a[e] = a[e] + ...}, or a helper method that may write it)
 *       at an index that depends on the loop variable only through data (an array read, a call: a histogram
 *       {@code h[bin[i]]++}), through a local assigned more than once, or through one term built with {@code /},
 *       {@code %}, bit operations, shifts, a cast or {@code ?:} ({@code out[i / 2] += x[i]}): several iterations may
 *       update one element, which Java sums and a GPU loses;
 *   <li>writes one array at two indices that provably meet across iterations ({@code x[i] = a; x[i + 1] = b},
 *       {@code out[i]} and {@code out[2 * i]});
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
 * <p>Indices are compared as polynomials in the loop variable, the other variables and literal constants, their
 * coefficients wrapped as Java's {@code int} arithmetic wraps ({@code (i) * 2 + 1}, {@code 1 + 2 * i} and
 * {@code k + 1} after {@code int k = 2 * i} are one index; {@code i - i} and {@code i * 65536 * 65536} are 0); a local
 * assigned once, where it is declared in the loop, stands for its initialiser; anything else ({@code i / 2},
 * {@code Math.min(i, 3)}, {@code idx[i]}), and a product of more than 64 monomials, is an opaque term compared by its
 * spelling. An inner loop {@code for (int j = A; j < B; j++)} with {@code A = c * i + r} and {@code B} at most
 * {@code A + c} ({@code Math.min(A + c, n)}) runs over elements of the iteration's own, so its counter counts as the
 * loop variable. "Depends on the loop variable": a remaining monomial holds it, a local that depends on it (its
 * initialiser or an assignment mentions one that does), or an opaque term that mentions one. Arrays created inside
 * the loop are each thread's own and never race.
 * <p>The check is syntactic and does not follow the order of statements or the loop's bounds, so neither direction is
 * exact. It misses plain writes at an index that maps several iterations to one element ({@code out[i / 2] = x[i]},
 * a scatter through an index array: the user guarantees the indices are distinct), writes that meet across iterations
 * through indices it cannot compare ({@code out[i]} and {@code out[n - 1 - i]}; {@code out[i * w + j]} with {@code j}
 * running past {@code w}), updates at several opaque terms that do not decompose the loop variable (it takes
 * {@code out[(i / T) * T * D + (i % T) * D + j]} for a decomposition without checking it, so
 * {@code out[i / 2 + i % 2] += 1} passes), a local reassigned after its use, data-dependent conditions that pick
 * several writers ({@code if (x[i] > m[0]) m[0] = x[i]}), an integer value argument of a call taken for its index,
 * and what a helper method reads or writes beyond the indices it is passed. It refuses reads it cannot prove safe
 * although they are ({@code m = x[r * w]} then writes at {@code r * w + j}: start {@code m} from the loop instead), and
 * a running sum through the array ({@code x[r * w + j] += x[r * w + j - 1]}: carry it in a local,
 * {@code acc += x[k]; x[k] = acc}).
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
   * arguments that depend on the loop variable), the tree to name in errors, and the value of the loop variable that
   * an enclosing {@code if (i == e)} picks ({@code e}'s index form; null when no if picks one iteration).
   */
  private record Access(Element array, List<Poly> indices, Tree at, String shown, String pick) {
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
    Set<Element> varying = varying(f, definitions);
    Polys polys = new Polys(loopVar, dependent, definitions);
    polys.owned.addAll(ownedCounters(f, definitions, polys));
    List<Access> writes = new ArrayList<>();
    List<Access> reads = new ArrayList<>();
    Map<Element, List<Access>> pickedArrays = new HashMap<>(); // writes at indices that do not depend on i
    new TreeScanner<Void, String>() { // the String: the value of i that an enclosing if picks, or null
      @Override
      public Void visitIf(IfTree t, String pick) {
        scan(t.getCondition(), pick);
        String p = picksOne(t.getCondition(), loopVar, dependent, varying, polys);
        scan(t.getThenStatement(), pick != null ? pick : p);
        scan(t.getElseStatement(), pick);
        return null;
      }

      @Override
      public Void visitAssignment(AssignmentTree a, String pick) {
        boolean update = false; // a[e] = ... a[e] ...: an update spelled out
        if (KernelTranslator.bare(a.getVariable()) instanceof ArrayAccessTree target) { // written, not read
          update = reads(a.getExpression(), target);
          scan(target.getExpression(), pick);
          scan(target.getIndex(), pick);
        } else {
          scan(a.getVariable(), pick);
        }
        write(a.getVariable(), pick, update);
        return scan(a.getExpression(), pick);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, String pick) {
        write(a.getVariable(), pick, true);
        return super.visitCompoundAssignment(a, pick);
      }

      @Override
      public Void visitUnary(UnaryTree u, String pick) {
        if (KernelTranslator.steps(u)) {
          write(u.getExpression(), pick, true);
        }
        return super.visitUnary(u, pick);
      }

      @Override
      public Void visitArrayAccess(ArrayAccessTree a, String pick) {
        for (Element e : sharedArrays(a.getExpression(), shared, aliases)) {
          reads.add(new Access(e, List.of(polys.of(a.getIndex())), a, shown(a), pick));
        }
        return super.visitArrayAccess(a, pick);
      }

      /** Whether {@code value} reads {@code target}'s array at {@code target}'s index. */
      private boolean reads(ExpressionTree value, ArrayAccessTree target) {
        Set<Element> arrays = sharedArrays(target.getExpression(), shared, aliases);
        Poly index = polys.of(target.getIndex());
        boolean[] found = {false};
        new TreeScanner<Void, Void>() {
          @Override
          public Void visitArrayAccess(ArrayAccessTree a, Void v) {
            found[0] |= !java.util.Collections.disjoint(arrays, sharedArrays(a.getExpression(), shared, aliases))
                && index.terms().equals(polys.of(a.getIndex()).terms());
            return super.visitArrayAccess(a, v);
          }
        }.scan(value, null);
        return found[0];
      }

      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, String pick) {
        List<ExpressionTree> at = mi.getArguments().stream()
            .filter(x -> isInteger(x) && mentions(x, dependent)).map(x -> (ExpressionTree) x).toList();
        for (int n = 0; n < mi.getArguments().size(); n++) {
          ExpressionTree arg = mi.getArguments().get(n);
          if (KernelTranslator.arrayRoot(arg) != KernelTranslator.bare(arg)) continue; // an element: read above
          boolean writes = env.writesArgument(src, mi, n);
          List<Poly> indices = at.isEmpty() ? List.of(Poly.CONSTANT) : at.stream().map(polys::of).toList();
          for (Element e : sharedArrays(arg, shared, aliases)) {
            String shown = e + " through " + shown(mi);
            if (writes) { // a helper's write as an update (it may add to what is there); an intrinsic's: a store
              writeAt(new Access(e, indices, mi, shown, pick), env.hasSource(src, mi));
            } else if (!at.isEmpty()) {
              reads.add(new Access(e, indices, mi, shown, pick));
            }
          }
        }
        return super.visitMethodInvocation(mi, pick);
      }

      private void write(ExpressionTree target, String pick, boolean update) {
        if (!(KernelTranslator.bare(target) instanceof ArrayAccessTree a)) return;
        for (Element e : sharedArrays(a.getExpression(), shared, aliases)) {
          writeAt(new Access(e, List.of(polys.of(a.getIndex())), target, shown(a), pick), update);
        }
      }

      private void writeAt(Access w, boolean update) {
        if (w.indices().stream().noneMatch(Poly::dependent)) {
          if (w.pick() == null) {
            throw error.apply(w.at(),
                "writes " + w.shown() + " at an index that does not depend on the @Parallel variable "
                    + loopVar + ": every iteration writes that element, one after another in Java but all at once on a"
                    + " GPU (a race; a sum over the loop needs a reduction: a KernelContext kernel); write it under"
                    + " if (" + loopVar + " == <one value>) if one iteration should write it");
          }
          List<Access> picked = pickedArrays.computeIfAbsent(w.array(), k -> new ArrayList<>());
          for (Access other : picked) {
            if (!other.pick().equals(w.pick()) && !apart(other, w)) {
              throw error.apply(w.at(), "writes " + w.shown() + " under an if that picks one iteration, and "
                  + other.shown() + " under another: two iterations write " + w.array() + " there, one after the"
                  + " other in Java but at once on a GPU (a race); write it under one if");
            }
          }
          picked.add(w);
          return;
        }
        if (update && w.indices().stream().noneMatch(Poly::updatable)) {
          throw error.apply(w.at(), "updates " + w.shown() + " at an index that depends on " + loopVar + " only"
              + " through data (an array read, a call), a local assigned more than once, or one /, %, bit"
              + " operation, cast or ?: term: several iterations may update one element, which Java does one after"
              + " another and a GPU's threads at once (a race; updates lost); give each iteration its own element"
              + " (an index linear in " + loopVar + "), or sum with a KernelContext kernel");
        }
        writes.add(w);
      }
    }.scan(f.getStatement(), (String) null);

    Set<Element> written = new HashSet<>(pickedArrays.keySet());
    writes.forEach(w -> written.add(w.array()));
    VariableTree counter = (VariableTree) f.getInitializer().getFirst();
    onceReads(counter.getInitializer(), "the @Parallel loop's start", written, shared, aliases);
    onceReads(((BinaryTree) f.getCondition()).getRightOperand(), "the @Parallel loop's bound", written, shared,
        aliases);
    for (StatementTree t : src.method().getBody().getStatements()) {
      if (t instanceof VariableTree d && d.getInitializer() != null) {
        onceReads(d.getInitializer(), "a declaration outside the @Parallel loop", written, shared, aliases);
      }
    }

    for (Access w : writes) {
      if (pickedArrays.containsKey(w.array())) {
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
      for (Access picked : pickedArrays.getOrDefault(r.array(), List.of())) {
        if (!picked.pick().equals(r.pick()) && !apart(picked, r)) {
          throw error.apply(r.at(), "reads " + r.shown() + ", which one iteration of the @Parallel loop writes ("
              + picked.shown() + " under an if that picks it): the other iterations read it before or after that"
              + " write on a GPU, after it in Java's order only where they come later (a race); write it in a kernel"
              + " before this one");
        }
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

  /**
   * The value of the loop variable for which {@code cond} alone holds, as a key ({@code e}'s index form), if
   * {@code cond} is {@code i == e} (or that and more, by &&) with {@code e} the same through the iteration (no
   * dependence on the loop variable, no local that changes in the loop); else null.
   */
  private String picksOne(ExpressionTree cond, Element loopVar, Set<Element> dependent, Set<Element> varying,
      Polys polys) {
    cond = KernelTranslator.bare(cond);
    if (!(cond instanceof BinaryTree b)) return null;
    if (b.getKind() == Tree.Kind.CONDITIONAL_AND) {
      String l = picksOne(b.getLeftOperand(), loopVar, dependent, varying, polys);
      return l != null ? l : picksOne(b.getRightOperand(), loopVar, dependent, varying, polys);
    }
    if (b.getKind() != Tree.Kind.EQUAL_TO) return null;
    ExpressionTree l = KernelTranslator.bare(b.getLeftOperand()), r = KernelTranslator.bare(b.getRightOperand());
    ExpressionTree e = env.element(src, l) == loopVar ? r : env.element(src, r) == loopVar ? l : null;
    if (e == null || mentions(e, dependent) || mentions(e, varying)) return null;
    return polys.of(e).terms().toString();
  }

  /**
   * The inner loop counters {@code for (int j = A; j < B; j++)} that run over elements no other iteration's counter
   * reaches: {@code A} is {@code c * i + r} (c > 0 a literal) and {@code B} is {@code A + d} with 0 < d <= c, or
   * {@code Math.min} of that and anything ({@code j0 = blk * 16; j1 = Math.min(j0 + 16, n)}: block {@code blk}'s
   * columns).
   */
  private Set<Element> ownedCounters(ForLoopTree f, Map<Element, ExpressionTree> definitions, Polys polys) {
    Set<Element> owned = new HashSet<>();
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitForLoop(ForLoopTree inner, Void v) {
        if (inner.getInitializer().size() == 1 && inner.getInitializer().getFirst() instanceof VariableTree var
            && var.getInitializer() != null && inner.getCondition() instanceof BinaryTree c
            && c.getKind() == Tree.Kind.LESS_THAN && env.element(src, c.getLeftOperand()) == env.element(src, var)
            && inner.getUpdate().size() == 1
            && env.incrementsByOne(src, inner.getUpdate().getFirst().getExpression(), env.element(src, var))) {
          Poly start = polys.of(var.getInitializer());
          Long coef = start.terms() == null ? null : start.terms().get(Poly.LOOP);
          if (coef != null && coef > 0 && !Poly.loopElsewhere(start)
              && bounded(c.getRightOperand(), start, coef, definitions, polys, 0)) {
            owned.add(env.element(src, var));
          }
        }
        return super.visitForLoop(inner, v);
      }
    }.scan(f.getStatement(), null);
    return owned;
  }

  /** Whether {@code bound} is at most {@code start + coef} (above {@code start}): see {@link #ownedCounters}. */
  private boolean bounded(ExpressionTree bound, Poly start, long coef, Map<Element, ExpressionTree> definitions,
      Polys polys, int depth) {
    bound = KernelTranslator.bare(bound);
    if (depth < 16 && bound instanceof IdentifierTree id
        && definitions.get(env.element(src, id)) instanceof ExpressionTree d) {
      return bounded(d, start, coef, definitions, polys, depth + 1);
    }
    if (bound instanceof MethodInvocationTree mi
        && env.element(src, mi) instanceof javax.lang.model.element.ExecutableElement m
        && m.getSimpleName().contentEquals("min")
        && m.getEnclosingElement().toString().equals("java.lang.Math")) {
      return mi.getArguments().stream().anyMatch(a -> bounded(a, start, coef, definitions, polys, depth + 1));
    }
    Map<String, Long> diff = Poly.minus(polys.of(bound).terms(), start.terms());
    return diff.keySet().equals(Set.of("")) && diff.get("") > 0 && diff.get("") <= coef;
  }

  /** Whether two single-index accesses are provably at different elements (their indices differ by a constant). */
  private static boolean apart(Access a, Access b) {
    if (a.indices().size() != 1 || b.indices().size() != 1) return false;
    Map<String, Long> x = a.indices().getFirst().terms(), y = b.indices().getFirst().terms();
    if (x == null || y == null) return false;
    return Poly.minus(x, y).keySet().equals(Set.of(""));
  }

  /**
   * Refuses in {@code e} (the loop's start or bound, or a declaration outside the loop: each GPU thread evaluates it,
   * the bound at each of its iterations, before or after other threads' iterations) a read of an array the loop writes
   * ({@code written}), through an alias too, and a call given such an array (it may read it). {@link SubsetCheck}
   * refuses the direct reads first; this finds them through aliases and helper methods.
   */
  private void onceReads(ExpressionTree e, String where, Set<Element> written, Set<Element> shared,
      Map<Element, Set<Element>> aliases) {
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitArrayAccess(ArrayAccessTree a, Void v) {
        for (Element x : sharedArrays(a.getExpression(), shared, aliases)) {
          if (written.contains(x)) {
            throw error.apply(a, "reads " + shown(a) + " in " + where + ", and the loop writes " + x + ": each GPU"
                + " thread reads it before or after other threads' iterations, not once before (or after) all of them"
                + " as in Java; pass the value as a parameter");
          }
        }
        return super.visitArrayAccess(a, v);
      }

      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, Void v) {
        for (ExpressionTree arg : mi.getArguments()) {
          if (KernelTranslator.arrayRoot(arg) != KernelTranslator.bare(arg)) continue; // an element: a read above
          for (Element x : sharedArrays(arg, shared, aliases)) {
            if (written.contains(x)) {
              throw error.apply(mi, "passes " + x + " to " + shown(mi.getMethodSelect()) + " in " + where + ", and"
                  + " the loop writes " + x + ": each GPU thread calls it before or after other threads' iterations,"
                  + " not once before (or after) all of them as in Java; pass the value as a parameter");
            }
          }
        }
        return super.visitMethodInvocation(mi, v);
      }
    }.scan(e, null);
  }

  /** An access as the source spells it, on one line. */
  private String shown(Tree t) {
    return env.sourceText(src, t).replaceAll("\\s+", " ");
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
    return constant(((VariableTree) f.getInitializer().getFirst()).getInitializer()) instanceof Number from
        && (from instanceof Integer || from instanceof Long) && f.getCondition() instanceof BinaryTree c
        && constant(c.getRightOperand()) instanceof Number to && (to instanceof Integer || to instanceof Long)
        && to.longValue() - from.longValue() <= 1;
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
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitVariable(VariableTree t, Void v) {
        TypeKind k = env.type(src, t).getKind();
        if (t.getInitializer() != null && (k == TypeKind.INT || k == TypeKind.LONG)) {
          defs.put(env.element(src, t), t.getInitializer());
        }
        return super.visitVariable(t, v);
      }
    }.scan(f.getStatement(), null);
    defs.keySet().removeAll(assigned(f));
    return defs;
  }

  /** The locals that the loop assigns or steps (other than by a declaration's initialiser). */
  private Set<Element> assigned(ForLoopTree f) {
    Set<Element> assigned = new HashSet<>();
    new TreeScanner<Void, Void>() {
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
    return assigned;
  }

  /**
   * The locals that change during an iteration: assigned or stepped in the loop other than by their one declaration
   * (inner loop counters), and those declared from one that does.
   */
  private Set<Element> varying(ForLoopTree f, Map<Element, ExpressionTree> definitions) {
    Set<Element> varying = assigned(f);
    for (int before = -1; before != varying.size();) {
      before = varying.size();
      definitions.forEach((local, init) -> {
        if (mentions(init, varying)) varying.add(local);
      });
    }
    return varying;
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
   * constant) with their integer coefficients (wrapped as Java's int arithmetic wraps); {@link #UNKNOWN} where the
   * index is not known at all. {@code dependent}: whether a remaining monomial involves the loop variable (directly,
   * through a local that depends on it, or through an opaque term that does); {@code updatable}: whether an update at
   * this index gives each iteration its own element as far as the check can tell (the loop variable appears as such,
   * or through several opaque terms, none of them data, and no local assigned more than once).
   */
  record Poly(Map<String, Long> terms, boolean dependent, boolean updatable) {
    static final Poly UNKNOWN = new Poly(null, true, false);
    static final Poly CONSTANT = new Poly(Map.of(), false, false);
    /** The monomial of the loop variable alone. */
    static final String LOOP = "\u0001";

    /**
     * Whether an element at index {@code a} in one iteration can be the element at {@code b} in another. When the
     * loop variable appears in both only linearly, {@code a = c·i + r + k} and {@code b = d·i + r + m} with the same
     * rest {@code r}: they meet for some {@code i != i'} exactly when gcd(c, d) divides m - k, except for c = d and
     * m = k (each iteration its own element). Equal polynomials otherwise are taken as each iteration's own element;
     * anything else is unknown. The loop's bounds are not considered.
     */
    static Meet meet(Poly a, Poly b) {
      if (a.terms == null || b.terms == null) return Meet.UNKNOWN;
      Long ca = a.terms.get(LOOP), cb = b.terms.get(LOOP);
      if (ca == null || cb == null || loopElsewhere(a) || loopElsewhere(b)) {
        return a.terms.equals(b.terms) ? Meet.SAME_ITERATION_ONLY : Meet.UNKNOWN;
      }
      Map<String, Long> diff = minus(b.terms, a.terms);
      diff.remove(LOOP);
      if (diff.size() > 1 || diff.size() == 1 && !diff.containsKey("")) return Meet.UNKNOWN;
      long d = diff.getOrDefault("", 0L);
      if (ca.equals(cb) && d == 0) return Meet.SAME_ITERATION_ONLY;
      return d % java.math.BigInteger.valueOf(ca).gcd(java.math.BigInteger.valueOf(cb)).longValueExact() == 0
          ? Meet.OTHER_ITERATION : Meet.SAME_ITERATION_ONLY;
    }

    /** {@code a - b}, without the monomials whose coefficients cancel. */
    static Map<String, Long> minus(Map<String, Long> a, Map<String, Long> b) {
      Map<String, Long> diff = new TreeMap<>(a);
      b.forEach((k, v) -> diff.merge(k, -v, Long::sum));
      diff.values().removeIf(v -> v == 0);
      return diff;
    }

    /** Whether the loop variable appears in a monomial other than {@code c * i} (a product, an opaque term). */
    static boolean loopElsewhere(Poly p) {
      return p.terms.keySet().stream().anyMatch(k -> !k.equals(LOOP) && k.contains(LOOP));
    }
  }

  /** Indices to polynomials, for one loop. */
  private final class Polys {
    /** Monomials a polynomial may hold before it is taken as one opaque term (nested products multiply out). */
    private static final int MAX_TERMS = 64;
    private final Element loopVar;
    private final Set<Element> dependent;
    private final Map<Element, ExpressionTree> definitions;
    /** Inner loop counters that each iteration runs over elements of its own ({@link #ownedCounters}). */
    final Set<Element> owned = new HashSet<>();

    Polys(Element loopVar, Set<Element> dependent, Map<Element, ExpressionTree> definitions) {
      this.loopVar = loopVar;
      this.dependent = dependent;
      this.definitions = definitions;
    }

    /** What {@link #poly} found on its way: the factors that depend on the loop variable, by kind. */
    private static final class Found {
      final Set<String> names = new HashSet<>(); // locals assigned more than once that depend on it
      final Set<String> owned = new HashSet<>(); // inner loop counters over an iteration's own elements
      final Set<String> opaque = new HashSet<>(); // opaque terms that depend on it
      final Set<String> data = new HashSet<>(); // of those, the ones that read an array or call a method
    }

    /** {@code e} as a polynomial, with whether it depends on the loop variable and whether an update there is safe. */
    Poly of(ExpressionTree e) {
      Found found = new Found();
      Map<String, Long> terms = poly(e, 0, found);
      Set<String> factors = new HashSet<>();
      terms.keySet().forEach(k -> factors.addAll(List.of(k.split("\\*"))));
      boolean direct = factors.contains(Poly.LOOP) || found.owned.stream().anyMatch(factors::contains);
      Set<String> names = new HashSet<>(found.names), opaque = new HashSet<>(found.opaque);
      names.retainAll(factors);
      opaque.retainAll(factors);
      boolean data = opaque.stream().anyMatch(found.data::contains);
      return new Poly(terms, direct || !names.isEmpty() || !opaque.isEmpty(),
          direct || names.isEmpty() && !data && opaque.size() >= 2);
    }

    /** Monomial (factors joined by *, sorted; "" for the constant) to coefficient. */
    private Map<String, Long> poly(ExpressionTree e, int depth, Found found) {
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
          return poly(definitions.get(el), depth + 1, found);
        }
        if (el instanceof VariableElement v && v.getConstantValue() instanceof Number n) {
          if (n.longValue() != 0) p.put("", n.longValue());
          return p;
        }
        String name = el == loopVar ? Poly.LOOP : id.getName().toString();
        if (owned.contains(el)) {
          found.owned.add(name);
        } else if (el != loopVar && dependent.contains(el)) {
          found.names.add(name);
        }
        p.put(name, 1L);
        return p;
      }
      if (e instanceof UnaryTree u && (u.getKind() == Tree.Kind.UNARY_MINUS || u.getKind() == Tree.Kind.UNARY_PLUS)) {
        Map<String, Long> inner = poly(u.getExpression(), depth, found);
        if (u.getKind() == Tree.Kind.UNARY_MINUS) inner.replaceAll((k, v) -> -v);
        return wrapped(e, inner);
      }
      if (e instanceof BinaryTree b && (b.getKind() == Tree.Kind.PLUS || b.getKind() == Tree.Kind.MINUS)
          && isIntegral(b)) {
        Map<String, Long> l = poly(b.getLeftOperand(), depth, found);
        Map<String, Long> r = poly(b.getRightOperand(), depth, found);
        long sign = b.getKind() == Tree.Kind.PLUS ? 1 : -1;
        r.forEach((k, v) -> l.merge(k, sign * v, Long::sum));
        if (l.size() <= MAX_TERMS) return wrapped(e, l);
      }
      if (e instanceof BinaryTree b && b.getKind() == Tree.Kind.MULTIPLY && isIntegral(b)) {
        Map<String, Long> l = poly(b.getLeftOperand(), depth, found);
        Map<String, Long> r = poly(b.getRightOperand(), depth, found);
        if ((long) l.size() * r.size() <= MAX_TERMS) {
          l.forEach((kl, vl) -> r.forEach((kr, vr) -> p.merge(monomial(kl, kr), vl * vr, Long::sum)));
          return wrapped(e, p);
        }
      }
      // anything else is one opaque term, by its spelling
      String term = "\u0003" + e.toString().replace('*', '\u00b7');
      if (mentions(e, dependent)) {
        found.opaque.add(term);
        if (readsData(e)) found.data.add(term);
      }
      p.put(term, 1L);
      return p;
    }

    /** {@code p} with its coefficients wrapped as {@code e}'s type wraps (int: mod 2^32) and zeros dropped. */
    private Map<String, Long> wrapped(ExpressionTree e, Map<String, Long> p) {
      if (env.type(src, e).getKind() == TypeKind.INT) p.replaceAll((k, v) -> (long) (int) (long) v);
      p.values().removeIf(v -> v == 0);
      return p;
    }

    /** Whether {@code e} reads an array or calls a method (its value is data, not arithmetic on the loop variable). */
    private boolean readsData(ExpressionTree e) {
      boolean[] found = {false};
      new TreeScanner<Void, Void>() {
        @Override
        public Void visitArrayAccess(ArrayAccessTree a, Void v) {
          found[0] = true;
          return null;
        }

        @Override
        public Void visitMethodInvocation(MethodInvocationTree mi, Void v) {
          found[0] = true;
          return null;
        }
      }.scan(e, null);
      return found[0];
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
