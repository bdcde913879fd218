package dev.taco.kernels.cuda;

import dev.taco.kernels.cuda.ImmutableTaskGraph.Node;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * How the nodes of a graph that run in one execution are enqueued on their lanes, and which cross-lane waits that
 * takes (docs/design.md §5): lane 0 records a <em>fork</em> event that every other lane with work waits on first; nodes are
 * enqueued in insertion order, each on its lane's stream; a dependency on a node of another lane becomes a wait on
 * that node's event, recorded right after it; at the end lane 0 <em>joins</em> every other lane by waiting on the
 * event of its last node. So an execution begins after the work enqueued on lane 0 before it and ends on lane 0,
 * eagerly and under CUDA-graph capture alike (where the fork and the join bring the other streams into the capture).
 *
 * <p>Waits are made only where needed: each lane keeps a vector clock (for every lane, how many of its nodes are
 * known to complete before this lane's tail, directly or through earlier waits), and a dependency, or a join, that
 * the clock already covers costs nothing. Dependencies on nodes that do not run in this execution
 * ({@link DataTransferMode#FIRST_EXECUTION} transfers after the first) count as met.
 */
final class LaneSchedule {
  /**
   * One node in enqueue order.
   *
   * @param node   the node's index in the graph
   * @param waits  indices of the nodes (of other lanes) whose events its lane waits on first
   * @param record whether the node's event is recorded after it (a later node or the join waits on it)
   */
  record Entry(int node, List<Integer> waits, boolean record) {}

  private final List<Entry> entries;
  private final List<Integer> forked;
  private final List<Integer> joins;

  private LaneSchedule(List<Entry> entries, List<Integer> forked, List<Integer> joins) {
    this.entries = entries;
    this.forked = forked;
    this.joins = joins;
  }

  /**
   * @param nodes the graph's nodes (each {@code after} names an earlier node)
   * @param index name → node index
   * @param lanes the graph's lane count
   * @param first whether this is the first execution
   * @return the schedule
   */
  static LaneSchedule of(List<Node> nodes, Map<String, Integer> index, int lanes, boolean first) {
    int n = nodes.size();
    int[] count = new int[lanes];
    int[] last = new int[lanes];
    int[][] clock = new int[lanes][lanes];
    int[][] snapshot = new int[n][];
    int[] seq = new int[n];
    boolean[] record = new boolean[n];
    List<Integer> order = new ArrayList<>();
    List<List<Integer>> orderWaits = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Node node = nodes.get(i);
      if (!node.runs(first)) {
        continue;
      }
      int l = node.lane();
      int[] latest = new int[lanes];
      Arrays.fill(latest, -1);
      for (String dep : node.after()) {
        int p = index.get(dep);
        Node pn = nodes.get(p);
        if (pn.runs(first) && pn.lane() != l && (latest[pn.lane()] < 0 || seq[p] > seq[latest[pn.lane()]])) {
          latest[pn.lane()] = p;
        }
      }
      List<Integer> waits = new ArrayList<>();
      for (int m = 0; m < lanes; m++) {
        int p = latest[m];
        if (p >= 0 && clock[l][m] < seq[p] + 1) {
          waits.add(p);
          record[p] = true;
          merge(clock[l], snapshot[p]);
        }
      }
      seq[i] = count[l]++;
      last[l] = i;
      clock[l][l] = count[l];
      snapshot[i] = clock[l].clone();
      order.add(i);
      orderWaits.add(List.copyOf(waits));
    }
    List<Integer> forked = new ArrayList<>();
    List<Integer> joins = new ArrayList<>();
    for (int m = 1; m < lanes; m++) {
      if (count[m] == 0) {
        continue;
      }
      forked.add(m);
      if (clock[0][m] < count[m]) {
        joins.add(last[m]);
        record[last[m]] = true;
        merge(clock[0], snapshot[last[m]]);
      }
    }
    List<Entry> entries = new ArrayList<>();
    for (int k = 0; k < order.size(); k++) {
      entries.add(new Entry(order.get(k), orderWaits.get(k), record[order.get(k)]));
    }
    return new LaneSchedule(List.copyOf(entries), List.copyOf(forked), List.copyOf(joins));
  }

  private static void merge(int[] into, int[] from) {
    for (int m = 0; m < into.length; m++) {
      into[m] = Math.max(into[m], from[m]);
    }
  }

  /** @return the nodes that run, in enqueue (insertion) order */
  List<Entry> entries() {
    return entries;
  }

  /** @return the lanes other than 0 that have work, each waiting on the fork event before its first node */
  List<Integer> forked() {
    return forked;
  }

  /** @return the nodes whose events lane 0 waits on at the end (the last node of each lane not already covered) */
  List<Integer> joins() {
    return joins;
  }

  /** @return the nodes whose events are recorded */
  Set<Integer> recorded() {
    Set<Integer> s = new TreeSet<>();
    for (Entry e : entries) {
      if (e.record()) {
        s.add(e.node());
      }
    }
    return s;
  }

  /**
   * A readable form for tests and logs, e.g. {@code fork[1] a@0 b@1<-a c@0<-b join[]}: each node as
   * {@code name@lane}, its waits after {@code <-}.
   */
  String describe(List<Node> nodes) {
    StringBuilder b = new StringBuilder("fork").append(forked);
    for (Entry e : entries) {
      b.append(' ').append(nodes.get(e.node()).name()).append('@').append(nodes.get(e.node()).lane());
      for (int w : e.waits()) {
        b.append("<-").append(nodes.get(w).name());
      }
    }
    b.append(" join[");
    for (int j = 0; j < joins.size(); j++) {
      b.append(j == 0 ? "" : ",").append(nodes.get(joins.get(j)).name());
    }
    return b.append(']').toString();
  }
}
