// The history audit's decisions (DESIGN §8), pure: given what each node's binlog shows was written
// to each key over the window, which writes broke the LWW rules. audit.ts reads; this decides.
//
// Rules, per key (a key is `schema.table` + primary key; versions are compared as uint64):
// - lww_violation: on one node, a row was stored with a version below the highest the key had held
//   before on that node (row versions from before and after images, tombstone and delete versions),
//   or a delete with a known version removed a row newer than it. A delete without a tombstone (a
//   non-LWW sink's plain DELETE) makes the key absent without lowering anything; its before image
//   still counts as held, so a later re-insert of an older version is the violation.
// - lost: a local write of node A with A's own version (low 10 bits = A's node id) that no peer-B
//   replicated write carries (same key, same version; a local delete also counts as delivered by a
//   replicated untombstoned delete of the key, whose version cannot be told), while B never held a
//   higher version of the key: not in any B write of the window, nor now (`currentVersions`).
//   Held higher means LWW skipped it rightly (`lww_skipped`), which also covers the sink's
//   coalescing: intermediate versions of a key never reach B, whose later, higher version covers them.
// - redundant: a replicated write on B whose version matches no local write of that key on a peer,
//   unless the version's node is audited and the version is below every local write of that node in
//   the window (it was written before the window: `outsideWindow`, not judged).
// - inconsistent: a replicated write with the version of a peer's local write of the key, but another
//   operation or other values (columns present in both images compared by canonical text).
// A sink's delete marked `uniqueClash` (last-write-wins across a secondary UNIQUE key, apply.ts) is
// neither: it is counted in `uniqueClashRemovals`, and its version still counts as held. A sink's
// upsert marked `setNull` (a SET NULL foreign key cleared, its parent deleted) is not inconsistent
// for those values: counted in `foreignKeySetNull`. A sink's delete marked `cascaded` (a child row
// that went with its ON DELETE CASCADE parent, deleted on another node: writer/foreign-keys.ts) is a
// tombstone at the child write's own version, which the origin wrote as an upsert: counted in
// `foreignKeyCascades`, its version held like a UNIQUE clash's removal.
import { nodeIdOf } from '../model/version.ts';
import { type AuditFinding, type AuditReport, type AuditWrite, emptyAuditCounts } from './audit-report.ts';

/** One write to one key, as a node's binlog shows it. */
export interface KeyWrite {
  /** `schema.table` */
  table: string;
  /** Canonical key text: the same key gives the same text on every node. */
  keyText: string;
  /** Key column → canonical value (for the report). */
  key: Record<string, string | null>;
  op: 'upsert' | 'delete';
  /**
   * The version stored: an upsert's row version, a delete's tombstone version. Undefined for a
   * delete without a tombstone (a non-LWW sink's plain DELETE): the version it carried is unknown.
   */
  version: bigint | undefined;
  /** Upserts: canonical values of the columns other than key and version. */
  values?: Record<string, string | null>;
  /** The version of the row this write replaced or removed (update and delete before images). */
  before?: bigint;
  /**
   * A sink's removal of a row that lost a secondary UNIQUE value to a newer row (its transaction's
   * conflict log names the table and this version): a delete at the removed row's own version,
   * which the origin wrote as an upsert.
   */
  uniqueClash?: true;
  /** A sink's upsert with an ON DELETE SET NULL foreign key cleared (its parent was deleted): other values than the origin's. */
  setNull?: true;
  /** A sink's removal of a child row whose ON DELETE CASCADE parent was deleted on another node: a delete at the row's own version. */
  cascaded?: true;
}

export interface HistoryTransaction {
  /** Binlog position after the transaction. */
  position: string;
  /** Written by a sink (it wrote the checkpoint table), not by a local application. */
  applied: boolean;
  writes: KeyWrite[];
}

export interface NodeHistory {
  /** The node's id (<meta>.node): the low 10 bits of the versions its local writes get. */
  nodeId: number;
  /** Transactions committed in the window, in commit order. */
  transactions: HistoryTransaction[];
}

export interface ClassifyOptions {
  /**
   * Per node index, per keyId (see keyIdOf): the key's version on the node now (the higher of its
   * row's and its tombstone's). Only consulted for writes that would otherwise be `lost`
   * (lostCandidates lists them), so a tombstone older than the window still counts as held.
   */
  currentVersions?: ReadonlyArray<ReadonlyMap<string, bigint> | undefined>;
  /** Findings kept (all are counted). Default 10,000. */
  maxFindings?: number;
}

/** The part of the audit report that classification decides. */
export type Classification = Pick<AuditReport, 'counts' | 'lwwSkipped' | 'delivered' | 'outsideWindow' | 'unknownVersionDeletes' | 'uniqueClashRemovals' | 'foreignKeySetNull' | 'foreignKeyCascades' | 'cascadeSideEffects' | 'findings' | 'findingsTruncated'>;

/**
 * Nets out the rows a sink transaction inserted and removed again before commit: the sink's upsert
 * inserts a key's row and, when a tombstone of the same or a newer version covers it, deletes it in
 * the same transaction. No other session saw that row (it was X-locked until it was gone), so the
 * pair is no write of the row; judged as writes it would read as an older version stored under a
 * newer tombstone. An insert (no before image), the updates of that row that followed it (a later
 * spelling of a collated key in the same statement), and the delete of exactly that row (each before
 * image carries the previous version) become nothing, or, when a tombstone write of the transaction
 * was matched to that delete, a tombstone-only delete with its version (what the transaction left).
 * An insert followed only by updates of that row becomes one insert of the last version. Everything
 * else is kept as written.
 */
export function withoutTransientInserts(writes: readonly KeyWrite[]): KeyWrite[] {
  const out: Array<KeyWrite | undefined> = [...writes];
  // Per key: the writes since its insert in this transaction, each replacing the one before it.
  const chains = new Map<string, number[]>();
  writes.forEach((w, i) => {
    const id = keyIdOf(w.table, w.keyText);
    const chain = chains.get(id);
    const last = chain === undefined ? undefined : writes[chain[chain.length - 1]!]!;
    const continues = last !== undefined && w.before !== undefined && w.before === last.version;
    if (w.op === 'upsert') {
      if (w.before === undefined) chains.set(id, [i]);
      else if (continues) chain!.push(i);
      else chains.delete(id);
      return;
    }
    // A tombstone written without a row delete (listed after the row changes) leaves the row alone.
    if (w.before === undefined) return;
    chains.delete(id);
    if (!continues) return;
    for (const at of chain!) out[at] = undefined;
    out[i] = w.version === undefined ? undefined : { table: w.table, keyText: w.keyText, key: w.key, op: 'delete', version: w.version, ...(w.uniqueClash ? { uniqueClash: true } : {}), ...(w.cascaded ? { cascaded: true } : {}) };
  });
  // An insert overwritten by newer versions of the same row later in the transaction (a second
  // spelling of a collated key in the same statement): only the last is ever seen, as an insert.
  for (const chain of chains.values()) {
    if (chain.length < 2) continue;
    // A change that kept the version is no overwrite but a cascade's side effect: judged as it is.
    if (chain.some((at, n) => n > 0 && writes[at]!.version === writes[chain[n - 1]!]!.version)) continue;
    const last = out[chain[chain.length - 1]!];
    if (last?.op !== 'upsert') continue;
    for (const at of chain.slice(0, -1)) out[at] = undefined;
    const { before: _gone, ...insert } = last;
    out[chain[chain.length - 1]!] = insert;
  }
  return out.filter((w): w is KeyWrite => w !== undefined);
}

/** The identity of a key across nodes. */
export function keyIdOf(table: string, keyText: string): string {
  return `${table}\u0000${keyText}`;
}

interface Seen {
  node: number;
  txn: HistoryTransaction;
  write: KeyWrite;
}

interface KeyOnNode {
  writes: Seen[];
  /** Highest version in any write of the window (stored or before image). */
  maxHeld?: bigint;
  maxHeldBy?: Seen;
  /** Replicated writes by version. */
  applied: Map<bigint, Seen[]>;
  appliedUntombstonedDelete: boolean;
}

class HistoryIndex {
  /** Per node: keyId → what the node shows for it. */
  readonly perNode: Array<Map<string, KeyOnNode>>;
  /** keyId → version → local writes carrying it (every node). */
  readonly local = new Map<string, Map<bigint, Seen[]>>();
  /** Per node: the lowest version of its own local writes (undefined: none in the window). */
  readonly floor: Array<bigint | undefined>;

  constructor(readonly histories: readonly NodeHistory[]) {
    this.perNode = histories.map(() => new Map());
    this.floor = histories.map(() => undefined);
    histories.forEach((h, node) => {
      for (const txn of h.transactions) {
        for (const write of txn.writes) {
          const id = keyIdOf(write.table, write.keyText);
          const seen: Seen = { node, txn, write };
          let k = this.perNode[node]!.get(id);
          if (!k) {
            k = { writes: [], applied: new Map(), appliedUntombstonedDelete: false };
            this.perNode[node]!.set(id, k);
          }
          k.writes.push(seen);
          for (const v of [write.before, write.version]) {
            if (v !== undefined && (k.maxHeld === undefined || v > k.maxHeld)) {
              k.maxHeld = v;
              k.maxHeldBy = seen;
            }
          }
          if (write.version === undefined) {
            if (txn.applied && write.op === 'delete') k.appliedUntombstonedDelete = true;
            continue;
          }
          if (txn.applied) {
            push(k.applied, write.version, seen);
          } else {
            let byVersion = this.local.get(id);
            if (!byVersion) {
              byVersion = new Map();
              this.local.set(id, byVersion);
            }
            push(byVersion, write.version, seen);
            if (nodeIdOf(write.version) === h.nodeId) {
              const f = this.floor[node];
              if (f === undefined || write.version < f) this.floor[node] = write.version;
            }
          }
        }
      }
    });
  }

  /** Local writes with the node's own version, each with every peer. */
  *ownWritesByPeer(): Generator<{ seen: Seen; peer: number; id: string }> {
    for (const [node, h] of this.histories.entries()) {
      for (const txn of h.transactions) {
        if (txn.applied) continue;
        for (const write of txn.writes) {
          if (write.version === undefined || nodeIdOf(write.version) !== h.nodeId) continue;
          const id = keyIdOf(write.table, write.keyText);
          for (let peer = 0; peer < this.histories.length; peer++) {
            if (peer !== node) yield { seen: { node, txn, write }, peer, id };
          }
        }
      }
    }
  }

  /** How a local write stands on a peer, judged on the window alone. */
  standing(seen: Seen, peer: number, id: string): 'delivered' | 'skipped' | 'missing' {
    const k = this.perNode[peer]!.get(id);
    const v = seen.write.version!;
    if (k?.applied.has(v)) return 'delivered';
    if (seen.write.op === 'delete' && k?.appliedUntombstonedDelete) return 'delivered';
    if (k?.maxHeld !== undefined && k.maxHeld > v) return 'skipped';
    return 'missing';
  }
}

function push<K, V>(map: Map<K, V[]>, key: K, value: V): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

function summary(seen: Seen): AuditWrite {
  const w: AuditWrite = { node: seen.node, op: seen.write.op, version: seen.write.version ?? null, position: seen.txn.position, applied: seen.txn.applied };
  if (seen.write.values) w.values = seen.write.values;
  return w;
}

/** A version the key held on a node, seen in a write (its before image, or what it stored). */
function heldIn(seen: Seen, version: bigint): AuditWrite {
  return { node: seen.node, version, position: seen.txn.position, applied: seen.txn.applied };
}

/** Same operation and, for upserts, the same canonical value in every column both images have. */
function sameContent(a: KeyWrite, b: KeyWrite): boolean {
  if (a.op !== b.op) return false;
  if (a.op === 'delete') return true;
  const av = a.values ?? {};
  const bv = b.values ?? {};
  for (const c of Object.keys(av)) if (c in bv && av[c] !== bv[c]) return false;
  return true;
}

/**
 * The keys (per node index, as keyIdOf) whose current version decides whether a write was lost:
 * a peer's local write is neither delivered nor covered by a higher version in the window.
 */
export function lostCandidates(histories: readonly NodeHistory[]): Array<Set<string>> {
  const index = new HistoryIndex(histories);
  const out = histories.map(() => new Set<string>());
  for (const { seen, peer, id } of index.ownWritesByPeer()) {
    if (index.standing(seen, peer, id) === 'missing') out[peer]!.add(id);
  }
  return out;
}

/** Classifies the window's writes by the rules in the header comment. */
export function classifyHistory(histories: readonly NodeHistory[], options: ClassifyOptions = {}): Classification {
  const maxFindings = options.maxFindings ?? 10_000;
  const index = new HistoryIndex(histories);
  const result: Classification = {
    counts: emptyAuditCounts(),
    lwwSkipped: 0,
    delivered: 0,
    outsideWindow: 0,
    unknownVersionDeletes: 0,
    uniqueClashRemovals: 0,
    foreignKeySetNull: 0,
    foreignKeyCascades: 0,
    cascadeSideEffects: 0,
    findings: [],
    findingsTruncated: false,
  };
  const add = (f: AuditFinding) => {
    result.counts[f.class]++;
    if (result.findings.length < maxFindings) result.findings.push(f);
    else result.findingsTruncated = true;
  };

  // lww_violation: per node, per key, in commit order.
  for (const [node, keys] of index.perNode.entries()) {
    for (const k of keys.values()) {
      let max: { version: bigint; by: Seen; fromBefore: boolean } | undefined;
      for (const seen of k.writes) {
        const w = seen.write;
        if (w.before !== undefined && (!max || w.before > max.version)) max = { version: w.before, by: seen, fromBefore: true };
        if (w.op === 'upsert' && w.version !== undefined && max && w.version < max.version) {
          add({
            class: 'lww_violation',
            node,
            table: w.table,
            key: w.key,
            write: summary(seen),
            other: max.fromBefore ? heldIn(max.by, max.version) : summary(max.by),
            explanation: `${seen.txn.applied ? 'a replicated' : 'a local'} write stored version ${w.version} after the key had held ${max.version}`,
          });
        } else if (w.op === 'delete' && w.version !== undefined && w.before !== undefined && w.before > w.version) {
          add({
            class: 'lww_violation',
            node,
            table: w.table,
            key: w.key,
            write: summary(seen),
            other: heldIn(seen, w.before),
            explanation: `a delete of version ${w.version} removed a newer row (version ${w.before})`,
          });
        }
        if (w.version !== undefined && (!max || w.version > max.version)) max = { version: w.version, by: seen, fromBefore: false };
      }
    }
  }

  // lost / lww_skipped / delivered: every own local write against every peer.
  for (const { seen, peer, id } of index.ownWritesByPeer()) {
    const standing = index.standing(seen, peer, id);
    if (standing === 'delivered') {
      result.delivered++;
      continue;
    }
    if (standing === 'skipped') {
      result.lwwSkipped++;
      continue;
    }
    const v = seen.write.version!;
    const now = options.currentVersions?.[peer]?.get(id);
    if (now !== undefined && now > v) {
      result.lwwSkipped++;
      continue;
    }
    const k = index.perNode[peer]!.get(id);
    let other: AuditWrite | undefined;
    if (k?.maxHeld !== undefined && (now === undefined || k.maxHeld >= now)) other = heldIn(k.maxHeldBy!, k.maxHeld);
    else if (now !== undefined) other = { node: peer, version: now };
    add({
      class: 'lost',
      node: peer,
      table: seen.write.table,
      key: seen.write.key,
      write: summary(seen),
      ...(other ? { other } : {}),
      explanation: `this local ${seen.write.op} never reached the peer, which never held a higher version`,
    });
  }

  // redundant / inconsistent: every replicated write against the peers' local writes.
  for (const [node, keys] of index.perNode.entries()) {
    for (const [id, k] of keys) {
      for (const seen of k.writes) {
        if (!seen.txn.applied) continue;
        const w = seen.write;
        if (w.uniqueClash) {
          result.uniqueClashRemovals++;
          continue;
        }
        if (w.cascaded) {
          result.foreignKeyCascades++;
          continue;
        }
        if (w.version === undefined) {
          if (w.op === 'delete') result.unknownVersionDeletes++;
          continue;
        }
        const origins = (index.local.get(id)?.get(w.version) ?? []).filter((o) => o.node !== node);
        if (w.op === 'upsert' && w.before === w.version) {
          // The row kept its version and changed: a foreign key's cascade on the target (MySQL logs
          // cascaded changes inside the sink's transaction; no trigger stamps them).
          result.cascadeSideEffects++;
          continue;
        }
        if (origins.length === 0) {
          const originNode = histories.findIndex((h) => h.nodeId === nodeIdOf(w.version!));
          if (originNode >= 0) {
            const floor = index.floor[originNode];
            if (floor === undefined || w.version < floor) {
              result.outsideWindow++;
              continue;
            }
          }
          add({
            class: 'redundant',
            node,
            table: w.table,
            key: w.key,
            write: summary(seen),
            explanation: `no peer wrote version ${w.version} of this key locally${originNode >= 0 ? '' : ` (its node id ${nodeIdOf(w.version)} is not an audited node)`}`,
          });
          continue;
        }
        if (origins.some((o) => sameContent(o.write, w))) continue;
        if (w.setNull && origins.some((o) => o.write.op === 'upsert')) {
          result.foreignKeySetNull++;
          continue;
        }
        const origin = origins[0]!;
        add({
          class: 'inconsistent',
          node,
          table: w.table,
          key: w.key,
          write: summary(seen),
          other: summary(origin),
          explanation:
            origin.write.op !== w.op
              ? `applied as ${w.op} but the origin's write was ${origin.write.op === 'delete' ? 'a delete' : 'an upsert'}`
              : 'applied with the origin\'s version but other values',
        });
      }
    }
  }
  return result;
}
