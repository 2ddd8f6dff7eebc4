/**
 * Answers kept between requests, for routes whose answer is a function of their path parameters,
 * query and API version over the store's content (RouteSpec.sharedAnswer): the first pages of
 * the worklist and of results, which every open workstation and integration asks again and
 * again. A kept answer is used only while the store's read version (Database.readVersion) is the
 * one it was computed at: any committed write, by this process or another, ends it, so an answer
 * is never older than the store. Every request is still authenticated, rate-limited and audited
 * with the same audit note as the request that computed it (its target and patients).
 *
 * Measured (BENCHMARKS.md, HTTP API): GET /v1/scan/results at 50 connections spent ~0.5 of its
 * 0.77 ms a request reading the page and writing its JSON.
 */
import type { AuditNote, HandlerResult } from '#server/http/route.ts';
import type { Database } from '#server/store/database.ts';

/** Pages kept at most, and their items at most in all: a few hot pages, not a second store. */
const MAX_ENTRIES = 32;
const MAX_ITEMS = 5_000;

type Entry = { version: string; result: HandlerResult; note: AuditNote; items: number };

/** Where a request's answer is kept, and the store's read version when it was asked. */
export type Sharing = { key: string; version: string };

/** Results that came out of (or went into) SharedAnswers: their serialized bodies are kept too. */
const sharedResults = new WeakSet<HandlerResult>();

export function isSharedResult(result: HandlerResult): boolean {
  return sharedResults.has(result);
}

export class SharedAnswers {
  private readonly entries = new Map<string, Entry>();
  private items = 0;

  constructor(
    private readonly db: Database,
    private readonly limits: { entries: number; items: number } = { entries: MAX_ENTRIES, items: MAX_ITEMS },
  ) {}

  /** The request's place, or null when the store cannot say whether it changed (PostgreSQL). */
  sharing(routePath: string, inputs: unknown): Sharing | null {
    const version = this.db.readVersion();
    return version === null ? null : { key: `${routePath} ${JSON.stringify(inputs)}`, version };
  }

  /** The kept answer and its audit note, if the store is unchanged since it was computed. */
  get(sharing: Sharing): { result: HandlerResult; note: AuditNote } | undefined {
    const entry = this.entries.get(sharing.key);
    if (!entry) return undefined;
    this.drop(sharing.key, entry);
    if (entry.version !== sharing.version) return undefined;
    this.entries.set(sharing.key, entry); // now the most recently used
    this.items += entry.items;
    return entry;
  }

  /** Keeps a list answer computed at `sharing.version`, unless the store changed meanwhile. */
  keep(sharing: Sharing, result: HandlerResult, note: AuditNote): void {
    if (result.kind !== 'list' || result.items.length > this.limits.items) return;
    // A write while the handler awaited: the answer may mix both sides of it.
    if (this.db.readVersion() !== sharing.version) return;
    const old = this.entries.get(sharing.key);
    if (old) this.drop(sharing.key, old);
    const entry: Entry = { version: sharing.version, result, note: { ...note }, items: result.items.length };
    this.entries.set(sharing.key, entry);
    this.items += entry.items;
    sharedResults.add(result);
    for (const [key, oldest] of this.entries) {
      if (this.entries.size <= this.limits.entries && this.items <= this.limits.items) break;
      this.drop(key, oldest);
    }
  }

  private drop(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.items -= entry.items;
  }
}
