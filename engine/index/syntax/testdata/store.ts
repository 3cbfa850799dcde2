import { EventEmitter } from "events";

/** Identifies an entity in a store. */
export type Id = string;

export enum ChangeKind {
  Added = "added",
  Updated = "updated",
  Removed = "removed",
}

export interface Entity {
  readonly id: Id;
  version: number;
}

/** A change notification emitted by a Store. */
export interface Change<T extends Entity> {
  kind: ChangeKind;
  before?: T;
  after?: T;
}

export interface Query<T> {
  where?: (item: T) => boolean;
  orderBy?: keyof T;
  limit?: number;
}

export class ConflictError extends Error {
  constructor(public readonly id: Id, public readonly expected: number, public readonly actual: number) {
    super(`conflict on ${id}: expected version ${expected}, found ${actual}`);
  }
}

const DEFAULT_LIMIT = 100;

/**
 * An in-memory store with optimistic concurrency and change events.
 */
export class Store<T extends Entity> extends EventEmitter {
  private items = new Map<Id, T>();
  private history: Change<T>[] = [];
  static instances = 0;

  constructor(private readonly name: string, private readonly maxHistory = 1000) {
    super();
    Store.instances++;
  }

  get size(): number {
    return this.items.size;
  }

  get(id: Id): T | undefined {
    return this.items.get(id);
  }

  put(item: T, expectedVersion?: number): T {
    const current = this.items.get(item.id);
    if (expectedVersion !== undefined && current && current.version !== expectedVersion) {
      throw new ConflictError(item.id, expectedVersion, current.version);
    }
    const next = { ...item, version: (current?.version ?? 0) + 1 };
    this.items.set(item.id, next);
    this.record({ kind: current ? ChangeKind.Updated : ChangeKind.Added, before: current, after: next });
    return next;
  }

  remove(id: Id): boolean {
    const current = this.items.get(id);
    if (!current) {
      return false;
    }
    this.items.delete(id);
    this.record({ kind: ChangeKind.Removed, before: current });
    return true;
  }

  query(q: Query<T> = {}): T[] {
    let out = [...this.items.values()];
    if (q.where) {
      out = out.filter(q.where);
    }
    if (q.orderBy) {
      const key = q.orderBy;
      out.sort((a, b) => (a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0));
    }
    return out.slice(0, q.limit ?? DEFAULT_LIMIT);
  }

  changesSince(index: number): Change<T>[] {
    return this.history.slice(index);
  }

  private record(change: Change<T>): void {
    this.history.push(change);
    if (this.history.length > this.maxHistory) {
      this.history.splice(0, this.history.length - this.maxHistory);
    }
    this.emit("change", change);
  }
}

export namespace Stores {
  const registry = new Map<string, Store<any>>();

  export function get<T extends Entity>(name: string): Store<T> {
    let s = registry.get(name);
    if (!s) {
      s = new Store<T>(name);
      registry.set(name, s);
    }
    return s as Store<T>;
  }
}

export const snapshot = <T extends Entity>(store: Store<T>): Record<Id, T> =>
  Object.fromEntries(store.query({ limit: Number.MAX_SAFE_INTEGER }).map((item) => [item.id, item]));

export async function waitFor<T extends Entity>(store: Store<T>, id: Id, timeoutMs = 1000): Promise<T> {
  const existing = store.get(id);
  if (existing) return existing;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      store.off("change", onChange);
      reject(new Error(`timed out waiting for ${id}`));
    }, timeoutMs);
    function onChange(change: Change<T>) {
      if (change.after?.id === id) {
        clearTimeout(timer);
        store.off("change", onChange);
        resolve(change.after);
      }
    }
    store.on("change", onChange);
  });
}
