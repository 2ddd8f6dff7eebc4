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
import { MiaError } from '#server/errors.ts';
import type { AuditNote, HandlerContext, HandlerResult } from '#server/http/route.ts';
import type { Database } from '#server/store/database.ts';

/**
 * What is kept at most: a few hot pages, not a second store. Bytes are those each format wrote
 * (a 500-result page with masks is megabytes of XML); an answer whose text alone passes a quarter
 * of the budget is given once and not kept.
 */
export type SharedLimits = { entries: number; items: number; bytes: number };
const LIMITS: SharedLimits = { entries: 32, items: 5_000, bytes: 32 * 1024 * 1024 };

type Entry = {
  key: string;
  version: string;
  result: HandlerResult;
  note: AuditNote;
  items: number;
  /** What each format wrote of it, as bytes (respond.ts). */
  texts: Map<string, Buffer>;
  bytes: number;
  owner: SharedAnswers;
};

/** Where a request's answer is kept, and the store's read version when it was asked. */
export type Sharing = { key: string; version: string };

/** An answer given to more than one request, with the audit note of the request that computed it. */
export type SharedAnswer = { result: HandlerResult; note: AuditNote };

/** A request computing an answer: the version it asked at, and its answer once it has one. */
type Underway = { version: string; answer: Promise<SharedAnswer | undefined> };

const entryOf = new WeakMap<HandlerResult, Entry>();

/**
 * The bytes `format` writes of a kept answer, written once while it stays kept; null when the
 * result is not a kept one (the caller writes it itself).
 */
export function keptText(result: HandlerResult, format: string, write: () => string): Buffer | null {
  const entry = entryOf.get(result);
  if (!entry) return null;
  const kept = entry.texts.get(format);
  if (kept) return kept;
  const text = Buffer.from(write());
  entry.owner.account(entry, format, text);
  return text;
}

export class SharedAnswers {
  private readonly entries = new Map<string, Entry>();
  private readonly underway = new Map<string, Underway>();
  private items = 0;
  private bytes = 0;
  /** The last read version seen: versions never come back, so a new one ends every entry. */
  private lastVersion: string | null = null;

  constructor(
    private readonly db: Database,
    private readonly limits: SharedLimits = LIMITS,
  ) {}

  /** The request's place, or null when the store cannot say whether it changed (PostgreSQL). */
  sharing(routePath: string, inputs: unknown): Sharing | null {
    const version = this.db.readVersion();
    if (version === null) return null;
    if (version !== this.lastVersion) {
      // Nothing kept can be given again: let it go now rather than when pushed out.
      this.clear();
      this.lastVersion = version;
    }
    return { key: `${routePath} ${JSON.stringify(inputs)}`, version };
  }

  /** The kept answer and its audit note, if the store is unchanged since it was computed. */
  get(sharing: Sharing): { result: HandlerResult; note: AuditNote } | undefined {
    const entry = this.entries.get(sharing.key);
    if (!entry || entry.version !== sharing.version) return undefined;
    // Now the most recently used.
    this.entries.delete(sharing.key);
    this.entries.set(sharing.key, entry);
    return entry;
  }

  /**
   * The answer another request is computing at the version this one asked at, once it has it
   * (undefined if it failed): requests that miss together wait for one computation instead of
   * each doing it. After a write, 50 connections asking for 500 results each computed the page,
   * one after the other, and the last waited 0.6-0.9 s (bench/api.bench.ts, limit=500). A request
   * that asked after a write has another version and does not join: it sees the write.
   */
  joining(sharing: Sharing): Promise<SharedAnswer | undefined> | undefined {
    const underway = this.underway.get(sharing.key);
    return underway?.version === sharing.version ? underway.answer : undefined;
  }

  /**
   * Marks this request as computing the answer for `sharing`, for others to join; the returned
   * function gives them its answer, or undefined when it failed (each then computes its own).
   */
  computing(sharing: Sharing): (answer: SharedAnswer | undefined) => void {
    let settle: (answer: SharedAnswer | undefined) => void = () => undefined;
    const mine: Underway = { version: sharing.version, answer: new Promise((resolve) => (settle = resolve)) };
    this.underway.set(sharing.key, mine);
    return (answer) => {
      if (this.underway.get(sharing.key) === mine) this.underway.delete(sharing.key);
      settle(answer);
    };
  }

  /** Keeps a list answer computed at `sharing.version`, unless the store changed meanwhile. */
  keep(sharing: Sharing, result: HandlerResult, note: AuditNote): void {
    if (result.kind !== 'list' || result.items.length > this.limits.items) return;
    // A write while the handler awaited: the answer may mix both sides of it.
    if (this.db.readVersion() !== sharing.version) return;
    const old = this.entries.get(sharing.key);
    if (old) this.drop(old);
    const entry: Entry = { key: sharing.key, version: sharing.version, result, note: { ...note }, items: result.items.length, texts: new Map(), bytes: 0, owner: this };
    this.entries.set(sharing.key, entry);
    this.items += entry.items;
    entryOf.set(result, entry);
    this.trim(entry);
  }

  /** Counts a text written of a kept entry (keptText), or lets the entry go if it is too large. */
  account(entry: Entry, format: string, text: Buffer): void {
    if (this.entries.get(entry.key) !== entry) return;
    if (entry.bytes + text.byteLength > this.limits.bytes / 4) {
      this.drop(entry);
      return;
    }
    entry.texts.set(format, text);
    entry.bytes += text.byteLength;
    this.bytes += text.byteLength;
    this.trim(entry);
  }

  /** Oldest first until within the limits; `keepIt` (just added or used) goes last of all. */
  private trim(keepIt: Entry): void {
    for (const entry of this.entries.values()) {
      if (this.entries.size <= this.limits.entries && this.items <= this.limits.items && this.bytes <= this.limits.bytes) return;
      if (entry !== keepIt) this.drop(entry);
    }
  }

  private clear(): void {
    for (const entry of this.entries.values()) entryOf.delete(entry.result);
    this.entries.clear();
    this.items = 0;
    this.bytes = 0;
  }

  private drop(entry: Entry): void {
    this.entries.delete(entry.key);
    entryOf.delete(entry.result);
    this.items -= entry.items;
    this.bytes -= entry.bytes;
  }
}

/**
 * A sharedAnswer route's context: its answer is given to every caller while the store is
 * unchanged, so reading who asks (or how) is a mistake, refused where it is made.
 */
export function callerBlind<C extends HandlerContext<unknown, unknown, unknown>>(context: C, path: string): C {
  const blind = { ...context };
  for (const field of ['auth', 'requestId', 'headers', 'upload', 'body'] as const) {
    Object.defineProperty(blind, field, {
      get() {
        throw new MiaError('internal', 'a shared answer may not depend on its caller', `${path} read ${field}`);
      },
    });
  }
  return blind;
}
