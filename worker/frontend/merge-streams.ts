// Interleaves several async streams in arrival order, so each batch element's results go out as soon as they are
// ready rather than in index order.
export async function* mergeStreams<T>(streams: AsyncIterable<T>[]): AsyncGenerator<T> {
  const queue: ({ value: T } | { error: unknown } | { done: true })[] = [];
  let wake: (() => void) | undefined;
  const push = (item: (typeof queue)[number]) => {
    queue.push(item);
    wake?.();
  };
  for (const stream of streams) {
    void (async () => {
      try {
        for await (const value of stream) push({ value });
        push({ done: true });
      } catch (error) {
        push({ error });
      }
    })();
  }
  let open = streams.length;
  while (open > 0) {
    while (queue.length === 0) await new Promise<void>((resolve) => { wake = resolve; });
    wake = undefined;
    const item = queue.shift()!;
    if ('error' in item) throw item.error;
    if ('done' in item) open -= 1;
    else yield item.value;
  }
}
