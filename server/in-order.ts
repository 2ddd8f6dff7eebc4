/**
 * Maps with an async function one item at a time. Inside a transaction the statements must run
 * in order on one connection, and on PostgreSQL a list of reads fired at once would take the pool
 * from every other request.
 */
export async function mapInOrder<T, R>(items: readonly T[], fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i++) results.push(await fn(items[i] as T, i));
  return results;
}
