import { expect, it } from 'vitest';
import { connect } from '../../src/db/connection.ts';
import { describeEachEngine } from '../helpers/engines.ts';
import { converged, setupNodes, startReplicator } from '../helpers/replication.ts';

// Found by the generated schemas (harness --schema-gen 1): under a case-insensitive key, a delete of
// 'Beta' raised the existing tombstone of 'BETA' without changing its spelling, capture could not
// match the delete with its tombstone, and the direction stopped (MissingTombstoneError).
describeEachEngine('generated-schema findings', 2, (ctx) => {
  it('a delete whose key is spelled otherwise than its existing tombstone replicates with its version', async () => {
    const urls = ctx.servers.map((s) => s.url);
    const ddl = ['CREATE TABLE gsf.t (k1 INT NOT NULL, k2 CHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, PRIMARY KEY (k1, k2))'];
    const conns = await setupNodes(urls, 'gsf', ddl, ['t']);
    const rep = await startReplicator(urls);
    const a = await connect(urls[0]!);
    try {
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (1, 'BETA', 1)");
      await a.query("DELETE FROM gsf.t WHERE k1 = 1 AND k2 = 'BETA'");
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (1, 'Beta', 2)");
      await a.query("DELETE FROM gsf.t WHERE k1 = 1 AND k2 = 'beta'");
      await a.query("INSERT INTO gsf.t (k1, k2, n) VALUES (2, 'x', 3)");
      await converged(conns, 'gsf', 't');
      const status = await rep.status();
      expect(status.directions.map((d) => d.state)).toEqual(['streaming', 'streaming']);
      const [rows] = await conns[1]!.query('SELECT k1, k2 FROM gsf.t ORDER BY k1');
      expect(rows).toEqual([{ k1: 2, k2: 'x' }]);
    } finally {
      await rep.stop();
      await a.end();
      for (const c of conns) await c.end();
    }
  });
});
