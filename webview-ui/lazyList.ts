/**
 * A list that draws its items a chunk at a time: the first chunk at once, the next
 * when a sentinel at the end comes near the viewport (or when keyboard navigation
 * asks for an item not drawn yet). A 20,000-file review costs the page one chunk of
 * rows up front instead of all of them, and scrolling stays smooth.
 */
export interface LazyList<T = unknown> {
  /** The list element to insert into the page. */
  readonly element: HTMLElement;
  /** Draws items up to and including `index` (no-op when already drawn). */
  drawThrough(index: number): void;
  /** Whether every item is drawn. */
  complete(): boolean;
  /** Adds items at the end (drawn as the others are); returns the index of the first. */
  extend(more: readonly T[]): number;
}

/**
 * `first` rows are drawn at once (about a screenful: the first frame waits for them),
 * then `chunk` at a time as the sentinel nears the viewport. The list keeps its own copy
 * of the items; `extend` adds more (a listing that arrives in parts).
 */
export function lazyList<T>(element: HTMLElement, initial: readonly T[], row: (item: T) => HTMLElement, chunk = 100, first = chunk): LazyList<T> {
  const items = [...initial];
  let drawn = 0;
  const sentinel = document.createElement('li');
  sentinel.className = 'sentinel';
  sentinel.setAttribute('aria-hidden', 'true');
  const observer = new IntersectionObserver((entries) => {
    if (!entries.some((e) => e.isIntersecting)) return;
    drawThrough(drawn + chunk - 1);
    // Still in view after a chunk (a tall window)? Observing anew reports it again.
    if (drawn < items.length) {
      observer.unobserve(sentinel);
      observer.observe(sentinel);
    }
    // The page's own viewport as the root: a webview is a cross-origin frame, and against the implicit
    // root (the top-level window) the margin is ignored and a frame taller than the window hides its end.
  }, { root: document, rootMargin: '1500px 0px' });

  function drawThrough(index: number): void {
    const end = Math.min(items.length, Math.max(drawn, index + 1));
    if (end <= drawn) return;
    const frag = document.createDocumentFragment();
    for (; drawn < end; drawn++) frag.append(row(items[drawn]!));
    if (sentinel.parentNode === element) sentinel.before(frag);
    else element.append(frag);
    if (drawn >= items.length) {
      observer.disconnect();
      sentinel.remove();
    }
  }

  /** The sentinel at the end, watched, while items are left to draw. */
  function arm(): void {
    if (drawn >= items.length || sentinel.parentNode === element) return;
    element.append(sentinel);
    observer.observe(sentinel);
  }

  drawThrough(first - 1);
  arm();
  return {
    element,
    drawThrough,
    complete: () => drawn >= items.length,
    extend(more) {
      const at = items.length;
      items.push(...more);
      arm();
      return at;
    },
  };
}
