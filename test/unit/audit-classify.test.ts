import { describe, expect, it } from 'vitest';
import { type CaptureEvent, TransactionAssembler } from '../../src/capture/assembler.ts';
import { tableFilter } from '../../src/capture/filter.ts';
import { classifyHistory, type HistoryTransaction, type KeyWrite, lostCandidates, type NodeHistory, withoutTransientInserts } from '../../src/checker/audit-classify.ts';
import { auditReportToJson, formatAuditReport } from '../../src/checker/audit-report.ts';
import { MissingTombstoneError } from '../../src/errors.ts';
import { makeVersion } from '../../src/model/version.ts';

// Node ids of the two audited nodes; node index 0 is A, 1 is B.
const A = 1;
const B = 2;
const v = (micros: number, nodeId: number) => makeVersion(BigInt(micros), nodeId);

const key = (id: number) => ({ table: 'app.t', keyText: JSON.stringify([String(id)]), key: { id: String(id) } });
const up = (id: number, version: bigint, c: string, before?: bigint): KeyWrite => ({
  ...key(id),
  op: 'upsert',
  version,
  values: { c },
  ...(before === undefined ? {} : { before }),
});
const del = (id: number, version: bigint | undefined, before?: bigint): KeyWrite => ({
  ...key(id),
  op: 'delete',
  version,
  ...(before === undefined ? {} : { before }),
});

let offset = 100;
const nextPosition = () => {
  offset += 100;
  return `binlog.000001:${offset}`;
};
const local = (...writes: KeyWrite[]): HistoryTransaction => ({ position: nextPosition(), applied: false, writes });
const applied = (...writes: KeyWrite[]): HistoryTransaction => ({ position: nextPosition(), applied: true, writes });
const nodes = (a: HistoryTransaction[], b: HistoryTransaction[]): NodeHistory[] => [
  { nodeId: A, transactions: a },
  { nodeId: B, transactions: b },
];

describe('history audit classification', () => {
  it('writes replicated both ways with their versions and values give no finding', () => {
    const h = nodes([local(up(1, v(100, A), 'x')), applied(up(2, v(110, B), 'y'))], [applied(up(1, v(100, A), 'x')), local(up(2, v(110, B), 'y'))]);
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.delivered).toBe(2);
    expect(r.lwwSkipped).toBe(0);
  });

  it('a write the peer skipped because it held a newer version is lww_skipped, not lost', () => {
    // A and B both update key 1; B's newer version wins on A, A's older one is skipped on B.
    const h = nodes(
      [local(up(1, v(100, A), 'a', v(10, A))), applied(up(1, v(200, B), 'b', v(100, A)))],
      [local(up(1, v(200, B), 'b', v(10, A)))],
    );
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.lwwSkipped).toBe(1);
    expect(r.delivered).toBe(1);
  });

  it('intermediate versions coalesced away by the sink are lww_skipped when the peer got a later one', () => {
    const h = nodes(
      [local(up(1, v(100, A), 'a1')), local(up(1, v(110, A), 'a2', v(100, A))), local(up(1, v(120, A), 'a3', v(110, A)))],
      [applied(up(1, v(120, A), 'a3'))],
    );
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.lwwSkipped).toBe(2);
    expect(r.delivered).toBe(1);
  });

  it('a local write that never reached the peer, which never held a newer version, is lost', () => {
    const h = nodes([local(up(1, v(100, A), 'a')), local(up(2, v(105, A), 'b'))], [local(up(1, v(90, B), 'older')), applied(up(2, v(105, A), 'b'))]);
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 0, lost: 1, redundant: 0, inconsistent: 0 });
    const f = r.findings[0]!;
    expect(f).toMatchObject({ class: 'lost', node: 1, table: 'app.t', key: { id: '1' }, write: { node: 0, op: 'upsert', version: v(100, A), applied: false } });
    expect(f.other).toMatchObject({ node: 1, version: v(90, B) });
  });

  it('a seemingly lost write is lww_skipped when the peer holds a newer version now (e.g. a tombstone from before the window)', () => {
    const h = nodes([local(up(1, v(100, A), 'a'))], []);
    const candidates = lostCandidates(h);
    expect([...candidates[1]!]).toEqual([`app.t\u0000${JSON.stringify(['1'])}`]);
    expect(candidates[0]!.size).toBe(0);
    const current = [new Map(), new Map([[`app.t\u0000${JSON.stringify(['1'])}`, v(150, B)]])];
    const r = classifyHistory(h, { currentVersions: current });
    expect(r.findings).toEqual([]);
    expect(r.lwwSkipped).toBe(1);
    // An older current version does not excuse it.
    const older = [new Map(), new Map([[`app.t\u0000${JSON.stringify(['1'])}`, v(50, B)]])];
    expect(classifyHistory(h, { currentVersions: older }).counts.lost).toBe(1);
  });

  it('a local delete reaches the peer as a tombstone-only write (its row was absent or newer)', () => {
    const h = nodes([local(del(1, v(100, A), v(80, A)))], [applied(del(1, v(100, A)))]);
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.delivered).toBe(1);
  });

  it('a replicated write storing an older version than the key held is an lww_violation (REPLACE as an update)', () => {
    const h = nodes(
      [local(up(1, v(200, A), 'old')), applied(up(1, v(300, B), 'new', v(200, A)))],
      [local(up(1, v(300, B), 'new', v(10, A))), applied(up(1, v(200, A), 'old', v(300, B)))],
    );
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 1, lost: 0, redundant: 0, inconsistent: 0 });
    expect(r.findings[0]).toMatchObject({ class: 'lww_violation', node: 1, write: { version: v(200, A), applied: true }, other: { version: v(300, B) } });
  });

  it('REPLACE as delete + insert: the delete has no tombstone, the re-insert of an older version is the violation', () => {
    const h = nodes(
      [local(up(1, v(200, A), 'old')), applied(up(1, v(300, B), 'new', v(200, A)))],
      [local(up(1, v(300, B), 'new')), applied(del(1, undefined, v(300, B)), up(1, v(200, A), 'old'))],
    );
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 1, lost: 0, redundant: 0, inconsistent: 0 });
    expect(r.unknownVersionDeletes).toBe(1);
    expect(r.findings[0]!.explanation).toMatch(/stored version .* after the key had held/);
  });

  it('an untombstoned replicated delete counts as delivering a local delete and lowers nothing; an older re-insert after it is a violation', () => {
    const h = nodes(
      [local(up(1, v(350, A), 'a')), applied(del(1, undefined, v(350, A))), applied(up(1, v(340, B), 'late'))],
      [local(up(1, v(340, B), 'late')), local(del(1, v(400, B), v(340, B)))],
    );
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 1, lost: 0, redundant: 0, inconsistent: 0 });
    expect(r.lwwSkipped).toBe(1);
    expect(r.findings[0]).toMatchObject({ class: 'lww_violation', node: 0, write: { version: v(340, B) }, other: { version: v(350, A) } });
  });

  it('a delete with a known version that removed a newer row is an lww_violation', () => {
    const h = nodes([local(del(1, v(100, A), v(90, A)))], [local(up(1, v(150, B), 'b')), applied(del(1, v(100, A), v(150, B)))]);
    const r = classifyHistory(h);
    expect(r.counts.lww_violation).toBe(1);
    expect(r.findings[0]!.explanation).toMatch(/removed a newer row/);
  });

  it('a replicated write whose version no peer wrote locally is redundant', () => {
    const h = nodes([local(up(2, v(100, A), 'a'))], [applied(up(2, v(100, A), 'a')), applied(up(1, v(500, A), 'ghost')), applied(up(3, v(500, 7), 'alien'))]);
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 0, lost: 0, redundant: 2, inconsistent: 0 });
    expect(r.findings.map((f) => f.key.id)).toEqual(['1', '3']);
    expect(r.findings[1]!.explanation).toMatch(/node id 7 is not an audited node/);
  });

  it('a replicated write older than every local write of its origin in the window is outside the window, not redundant', () => {
    const h = nodes([local(up(2, v(100, A), 'a'))], [applied(up(2, v(100, A), 'a')), applied(up(1, v(50, A), 'copied from before'))]);
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.outsideWindow).toBe(1);
  });

  it("a replicated write with the origin's version but other values (or another operation) is inconsistent", () => {
    const h = nodes([local(up(1, v(100, A), 'x')), local(del(2, v(110, A), v(1, A)))], [applied(up(1, v(100, A), 'x!')), applied(up(2, v(110, A), 'y'))]);
    const r = classifyHistory(h);
    expect(r.counts).toEqual({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 2 });
    expect(r.findings[0]).toMatchObject({ class: 'inconsistent', node: 1, write: { values: { c: 'x!' } }, other: { node: 0, values: { c: 'x' } } });
    expect(r.findings[1]!.explanation).toMatch(/applied as upsert but the origin's write was a delete/);
    // It was delivered (with the wrong values), so it is not lost as well.
    expect(r.delivered).toBe(2);
  });

  it('local writes stamped with a foreign version (loaded with the sink flag) are not expected on peers', () => {
    const h = nodes([local(up(1, v(1, 0), 'seed'))], [local(up(1, v(1, 0), 'seed'))]);
    const r = classifyHistory(h);
    expect(r.findings).toEqual([]);
    expect(r.delivered + r.lwwSkipped).toBe(0);
  });

  it('keeps maxFindings findings but counts all', () => {
    const h = nodes([1, 2, 3].map((id) => local(up(id, v(100 + id, A), 'a'))), []);
    const r = classifyHistory(h, { maxFindings: 2 });
    expect(r.counts.lost).toBe(3);
    expect(r.findings).toHaveLength(2);
    expect(r.findingsTruncated).toBe(true);
  });
});

describe('history audit report', () => {
  it('renders versions as strings in JSON and a readable table', () => {
    const h = nodes([local(up(1, v(100, A), 'x'))], [applied(up(1, v(100, A), 'x!'))]);
    const r = classifyHistory(h);
    const report = {
      nodes: [
        { url: 'mysql://root:***@a', nodeId: A, from: 'binlog.000001:4', until: 'binlog.000001:900', transactions: { local: 1, applied: 0 }, writes: { local: 1, applied: 0 } },
        { url: 'mysql://root:***@b', nodeId: B, from: 'binlog.000001:4', until: 'binlog.000001:900', transactions: { local: 0, applied: 1 }, writes: { local: 0, applied: 1 } },
      ],
      tables: ['app.t'],
      ...r,
      notes: [],
      ok: false,
      durationMs: 12,
    };
    const json = JSON.parse(auditReportToJson(report));
    expect(json.findings[0].write.version).toBe(v(100, A).toString());
    expect(json.counts.inconsistent).toBe(1);
    const text = formatAuditReport(report);
    expect(text).toMatch(/inconsistent\s+B\s+app\.t\s+id=1\s+B applied row @\d+ c="x!"\s+A local row @\d+ c="x"/);
    expect(text).toMatch(/FINDINGS: 1 \(inconsistent 1\)/);
  });
});

describe('capture for the audit (includeApplied)', () => {
  const events: CaptureEvent[] = [
    { type: 'begin' },
    { type: 'rows', schema: 'lww_meta', table: 'tomb__app__t', op: 'insert', rows: [{ id: 5, _lww_ts: 900 }], bytes: 10 },
    { type: 'rows', schema: 'app', table: 't', op: 'delete', rows: [{ id: 1, c: 'x', _lww_ts: 300 }], bytes: 10 },
    { type: 'rows', schema: 'app', table: 't', op: 'insert', rows: [{ id: 1, c: 'y', _lww_ts: 200 }], bytes: 10 },
    { type: 'rows', schema: 'lww_meta', table: 'checkpoints', op: 'update', rows: [{ before: { source_id: 'n1' }, after: { source_id: 'n1' } }], bytes: 10 },
    { type: 'commit', nextPosition: 700, timestamp: 1_700_000_000_000 },
  ];
  const feed = (a: TransactionAssembler, list: CaptureEvent[]) => list.flatMap((e) => a.push(e));
  const assembler = (includeApplied: boolean) => {
    const a = new TransactionAssembler({ sourceId: 'A', tables: tableFilter(['app']), metaSchema: 'lww_meta', versionColumn: '_lww_ts', includeApplied });
    a.resumeFrom({ file: 'binlog.000001', offset: 100 });
    return a;
  };

  it('emits a sink-applied transaction marked applied, an untombstoned delete with its row version, and the tombstones written', () => {
    const out = feed(assembler(true), events);
    expect(out).toHaveLength(1);
    const item = out[0]!;
    if (item.kind !== 'transaction') throw new Error(`expected a transaction, got ${item.kind}`);
    expect(item.details).toEqual({ applied: true, untombstoned: [0], tombstones: [{ table: 'tomb__app__t', key: { id: 5 }, version: 900n }], timestamp: 1_700_000_000_000 });
    expect(item.txn.changes.map((c) => [c.op, c.version])).toEqual([
      ['delete', 300n],
      ['insert', 200n],
    ]);
  });

  it('emits a transaction that only wrote tombstones', () => {
    const out = feed(assembler(true), [
      { type: 'begin' },
      { type: 'rows', schema: 'lww_meta', table: 'tomb__app__t', op: 'insert', rows: [{ id: 5, _lww_ts: 900 }], bytes: 10 },
      { type: 'rows', schema: 'lww_meta', table: 'checkpoints', op: 'insert', rows: [{ source_id: 'n1' }], bytes: 10 },
      { type: 'commit', nextPosition: 800 },
    ]);
    expect(out[0]).toMatchObject({ kind: 'transaction', txn: { changes: [] }, details: { applied: true, tombstones: [{ version: 900n }] } });
  });

  it('without the option, capture still drops sink-applied transactions and refuses untombstoned local deletes', () => {
    // The commit's time travels with the position (the GC horizon reads it from the checkpoint).
    expect(feed(assembler(false), events)).toEqual([{ kind: 'dropped', position: 'binlog.000001:700', timestamp: 1_700_000_000_000 }]);
    const local = events.filter((e) => !(e.type === 'rows' && e.table === 'checkpoints'));
    expect(() => feed(assembler(false), local)).toThrow(MissingTombstoneError);
  });
});

describe('a sink transaction that inserted a row and removed it before commit', () => {
  const tomb = v(2_000, A);
  const older = v(1_000, B);
  it('is no write of the key: the pair is dropped, the tombstone kept', () => {
    const writes = [del(1, tomb, v(500, A)), up(1, older, 'late'), del(1, undefined, older)];
    expect(withoutTransientInserts(writes)).toEqual([writes[0]]);
    // Judged as written, the pair would read as an older row stored under the newer tombstone.
    const asWritten = classifyHistory(nodes([local(del(1, tomb, v(500, A)))], [applied(...writes)]));
    expect(asWritten.counts.lww_violation).toBe(1);
    const netted = classifyHistory(nodes([local(del(1, tomb, v(500, A)))], [applied(...withoutTransientInserts(writes))]));
    expect(netted.counts.lww_violation).toBe(0);
  });
  it('keeps the tombstone a removed insert was matched with, as a tombstone-only delete', () => {
    // The batch's tombstone for the key was written before the insert; the audit matched it to the
    // delete that removed the insert again.
    expect(withoutTransientInserts([up(1, older, 'late'), del(1, tomb, older)])).toEqual([del(1, tomb)]);
  });
  it('removes the updates of that row before its delete too (two spellings of a collated key in one statement)', () => {
    const newer = v(1_500, B);
    expect(withoutTransientInserts([up(1, older, 'BETA'), up(1, newer, 'beta', older), del(1, undefined, newer)])).toEqual([]);
    // An update of a row that existed before the transaction is kept, and so is its delete.
    const kept = [up(1, newer, 'x', older), del(1, undefined, newer)];
    expect(withoutTransientInserts(kept)).toEqual(kept);
  });
  it('keeps a delete of another row and an update followed by a delete', () => {
    const other = [up(1, older, 'x'), del(1, undefined, v(900, B))];
    expect(withoutTransientInserts(other)).toEqual(other);
    const updated = [up(1, older, 'x', v(900, B)), del(1, undefined, older)];
    expect(withoutTransientInserts(updated)).toEqual(updated);
    const otherKey = [up(1, older, 'x'), del(2, undefined, older)];
    expect(withoutTransientInserts(otherKey)).toEqual(otherKey);
  });
});

describe('writes the sink resolved', () => {
  it('a removal by a UNIQUE clash is counted, not redundant or inconsistent; unmarked it is a finding', () => {
    const removed = { ...del(1, v(10, A), v(10, A)), uniqueClash: true as const };
    const history = (w: KeyWrite) => nodes([local(up(1, v(10, A), 'a'))], [applied(w)]);
    const marked = classifyHistory(history(removed));
    expect(marked.counts).toMatchObject({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
    expect(marked.uniqueClashRemovals).toBe(1);
    expect(classifyHistory(history(del(1, v(10, A), v(10, A)))).counts.inconsistent).toBe(1);
  });

  it('a child row gone with its CASCADE parent (a tombstone at its own version) is counted and delivers the write; unmarked it is a finding', () => {
    // A's upsert reached B as a tombstone at the same version (B had deleted the parent), and B's own
    // row was tombstoned at its own version when A's parent delete cascaded it there.
    const dropped = { ...del(1, v(10, A)), cascaded: true as const };
    const history = (w: KeyWrite) => nodes([local(up(1, v(10, A), 'a'))], [applied(w)]);
    const marked = classifyHistory(history(dropped));
    expect(marked.counts).toMatchObject({ lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 });
    expect(marked).toMatchObject({ foreignKeyCascades: 1, delivered: 1 });
    expect(classifyHistory(history(del(1, v(10, A)))).counts.inconsistent).toBe(1);
    // Both sides of one child write of B: dropped on A, cascaded away on B by A's parent delete.
    const both = nodes([applied({ ...del(1, v(10, B)), cascaded: true })], [local(up(1, v(10, B), 'b')), applied({ ...del(1, v(10, B), v(10, B)), cascaded: true })]);
    expect(classifyHistory(both)).toMatchObject({ foreignKeyCascades: 2, delivered: 1, counts: { lww_violation: 0, lost: 0, redundant: 0, inconsistent: 0 } });
  });

  it('a row written with its SET NULL foreign key cleared is counted; other values unmarked are inconsistent', () => {
    const cleared = { ...up(1, v(10, A), 'null'), setNull: true as const };
    const history = (w: KeyWrite) => nodes([local(up(1, v(10, A), 'parent-1'))], [applied(w)]);
    expect(classifyHistory(history(cleared))).toMatchObject({ foreignKeySetNull: 1, counts: { inconsistent: 0, redundant: 0 } });
    expect(classifyHistory(history(up(1, v(10, A), 'null'))).counts.inconsistent).toBe(1);
  });

  it('a row changed with its version kept inside a sink transaction (a cascade on the target) is not judged; a new version nobody wrote is redundant', () => {
    const cascaded = nodes([], [local(up(1, v(10, B), 'p')), applied(up(1, v(10, B), 'null', v(10, B)))]);
    expect(classifyHistory(cascaded)).toMatchObject({ cascadeSideEffects: 1, counts: { redundant: 0 } });
    const forged = nodes([], [local(up(1, v(10, B), 'p')), applied(up(1, v(11, B), 'x', v(10, B)))]);
    expect(classifyHistory(forged).counts.redundant).toBe(1);
  });
});

describe('an insert overwritten later in the same sink transaction', () => {
  it('becomes one insert of the last version, so an older first spelling under a newer local delete is no violation', () => {
    const writes = [up(1, v(100, A), 'old'), up(1, v(300, A), 'new', v(100, A))];
    expect(withoutTransientInserts(writes)).toEqual([up(1, v(300, A), 'new')]);
    const history = (w: KeyWrite[]) => nodes([local(up(1, v(100, A), 'old')), local(up(1, v(300, A), 'new', v(100, A)))], [local(del(1, v(200, B), v(50, B))), applied(...w)]);
    expect(classifyHistory(history(writes)).counts.lww_violation).toBe(1);
    expect(classifyHistory(history(withoutTransientInserts(writes))).counts.lww_violation).toBe(0);
  });

  it('an update that does not continue from the insert is kept as written', () => {
    const writes = [up(1, v(100, B), 'old'), up(1, v(300, B), 'new', v(99, B))];
    expect(withoutTransientInserts(writes)).toEqual(writes);
  });
});

describe('a tombstone-only write of the key in the same sink transaction', () => {
  it('does not keep an insert overwritten later in the transaction from being one insert', () => {
    const writes = [up(1, v(100, A), 'old'), up(1, v(300, A), 'new', v(100, A)), del(1, v(200, A))];
    expect(withoutTransientInserts(writes)).toEqual([up(1, v(300, A), 'new'), del(1, v(200, A))]);
  });
});

describe('an insert changed later in the same sink transaction with its version kept', () => {
  it('stays an insert plus a cascade side effect (not one insert with the changed values)', () => {
    const writes = [up(1, v(100, A), 'parent-1'), up(1, v(100, A), 'null', v(100, A))];
    expect(withoutTransientInserts(writes)).toEqual(writes);
    const r = classifyHistory(nodes([local(up(1, v(100, A), 'parent-1'))], [applied(...withoutTransientInserts(writes))]));
    expect(r).toMatchObject({ cascadeSideEffects: 1, counts: { inconsistent: 0 } });
  });
});
