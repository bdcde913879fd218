package dev.taco.runtime.model;

/**
 * A tensor as the layers see it: an arena of one memory space and the element offset where the tensor starts (the
 * shape travels with each call, as in llm.c). On the CPU the arena is a {@code float[]}; a GPU backend's is its device
 * arena.
 *
 * @param arena the arena
 * @param offset the first element
 * @param <A> the arena type of the backend
 */
public record View<A>(A arena, long offset) {
  /** The offset as an int, for the CPU's arrays. */
  public int off() {
    return Math.toIntExact(offset);
  }
}
