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
import com.sun.source.tree.Tree;
import com.sun.source.tree.UnaryTree;
import com.sun.source.tree.VariableTree;
import com.sun.source.util.TreeScanner;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import javax.lang.model.element.Element;
import javax.lang.model.type.TypeKind;

/**
 * What makes the iterations of a {@code @Parallel} loop race once they are GPU threads, where Java runs them one after
 * another: a kernel is refused, naming the line, if its loop
 * <ul>
 *   <li>writes an element of a shared array (a parameter, or a local declared before the loop) at an index that does
 *       not depend on the loop variable ({@code out[0] += x[i]}: every iteration adds to one element; Java sums, the
 *       GPU's threads overwrite each other), unless an {@code if} on the loop variable picks the iterations that write
 *       ({@code if (i == 0) out[0] = s}); a call that writes memory counts as a write at its arguments;
 *   <li>reads an element of a shared array that the loop writes, at an index none of its writes use
 *       ({@code x[i] += x[i - 1]}: Java reads the previous iteration's result, a GPU thread whatever is there).
 * </ul>
 * "Depends on the loop variable" is syntactic: the variable itself, or a local whose initialiser or assignment
 * mentions one that does. Arrays declared inside the loop are each thread's own and never race. A read at an index
 * that differs only in spelling from the written one ({@code a[j + i * c]} against {@code a[i * c + j]}) is refused
 * too: write both the same way, or through one local. Both rules are syntactic, so neither is exact: an {@code if}
 * whose condition reads data ({@code if (x[i] > 0) flag[0] = 1}) also counts as picking the writer, and races unless
 * every writer writes the same value; and a read refused as another iteration's element may be one no other
 * iteration writes ({@code if (i == 0) y[0] = n;} then {@code y[i]}): split such a kernel in two.
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
   * Checks loop {@code f} over {@code loopVar}; {@code shared} holds the parameters and the locals declared before it.
   *
   * @throws KernelCompileException at the first write or read that races, naming the line and the array
   */
  void check(ForLoopTree f, Element loopVar, Set<Element> shared) {
    if (oneIteration(f)) return; // for (@Parallel int once = 0; once < 1; once++): one thread, nothing to race with
    Set<Element> dependent = dependents(f, loopVar);
    Map<Element, Set<String>> writtenAt = new HashMap<>();
    Set<Element> writtenByCalls = new HashSet<>();
    new TreeScanner<Void, Boolean>() { // the Boolean: inside an if on the loop variable
      @Override
      public Void visitIf(IfTree t, Boolean picked) {
        scan(t.getCondition(), picked);
        boolean p = picked || mentions(t.getCondition(), dependent);
        scan(t.getThenStatement(), p);
        scan(t.getElseStatement(), p);
        return null;
      }

      @Override
      public Void visitAssignment(AssignmentTree a, Boolean picked) {
        write(a.getVariable(), picked);
        return super.visitAssignment(a, picked);
      }

      @Override
      public Void visitCompoundAssignment(CompoundAssignmentTree a, Boolean picked) {
        write(a.getVariable(), picked);
        return super.visitCompoundAssignment(a, picked);
      }

      @Override
      public Void visitUnary(UnaryTree u, Boolean picked) {
        if (KernelTranslator.steps(u)) {
          write(u.getExpression(), picked);
        }
        return super.visitUnary(u, picked);
      }

      @Override
      public Void visitMethodInvocation(MethodInvocationTree mi, Boolean picked) {
        if (env.writesMemory(src, mi)) {
          boolean indexed = picked || mi.getArguments().stream().anyMatch(x -> mentions(x, dependent));
          for (ExpressionTree arg : mi.getArguments()) {
            Element e = sharedArray(arg);
            if (e == null) continue;
            writtenByCalls.add(e);
            if (!indexed) {
              throw error.apply(mi, "the call may write " + e + " and none of its arguments depends on the"
                  + " @Parallel variable " + loopVar + ": every iteration writes the same elements, one after another"
                  + " in Java but all at once on a GPU (a race); pass an index that depends on " + loopVar
                  + ", or write under an if on " + loopVar);
            }
          }
        }
        return super.visitMethodInvocation(mi, picked);
      }

      private void write(ExpressionTree target, boolean picked) {
        if (!(KernelTranslator.bare(target) instanceof ArrayAccessTree a)) return;
        Element e = sharedArray(a.getExpression());
        if (e == null) return;
        writtenAt.computeIfAbsent(e, k -> new HashSet<>()).add(a.getIndex().toString());
        if (!picked && !mentions(a.getIndex(), dependent)) {
          throw error.apply(target, "writes " + a + ", an index that does not depend on the @Parallel variable "
              + loopVar + ": every iteration writes that element, one after another in Java but all at once on a GPU"
              + " (a race; a sum over the loop needs a reduction: a KernelContext kernel); write under an if on "
              + loopVar + " if one iteration should write it");
        }
      }

      private Element sharedArray(ExpressionTree arrayExpr) {
        Element e = env.element(src, KernelTranslator.arrayRoot(arrayExpr));
        return e != null && shared.contains(e) && e.asType().getKind() == TypeKind.ARRAY ? e : null;
      }
    }.scan(f.getStatement(), false);
    new TreeScanner<Void, Void>() {
      @Override
      public Void visitArrayAccess(ArrayAccessTree a, Void v) {
        Element e = env.element(src, KernelTranslator.arrayRoot(a.getExpression()));
        Set<String> at = writtenAt.get(e);
        if (at != null && !writtenByCalls.contains(e) && !at.contains(a.getIndex().toString())) {
          throw error.apply(a, "reads " + a + " and the @Parallel loop writes " + e + " at " + String.join(", ", at)
              + ": in Java an iteration reads what an earlier one wrote, on a GPU whatever is there when its thread"
              + " reads (a race); read and write each element at the same index (spelled the same), or split the"
              + " work into two kernels");
        }
        return super.visitArrayAccess(a, v);
      }
    }.scan(f.getStatement(), null);
  }

  /** Whether the loop runs at most once: {@code for (@Parallel int i = A; i < B; ...)} with literals B - A <= 1. */
  private static boolean oneIteration(ForLoopTree f) {
    return ((VariableTree) f.getInitializer().getFirst()).getInitializer() instanceof LiteralTree a
        && f.getCondition() instanceof BinaryTree c && c.getRightOperand() instanceof LiteralTree b
        && a.getValue() instanceof Integer from && b.getValue() instanceof Integer to && (long) to - from <= 1;
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
}
