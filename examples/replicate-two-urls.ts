// Replication between two servers given by URL: install LWW on both, replicate both ways in-process,
// write on each side, and watch both converge.
//   npx tsx examples/replicate-two-urls.ts mysql://root@127.0.0.1:3307/ mysql://root@127.0.0.1:3308/
import { connect } from '../src/db/connection.ts';
import { checkState, install, Replicator } from '../src/index.ts';

async function until(condition: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !(await condition()); ) {
    if (Date.now() > deadline) throw new Error('replication did not deliver in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function main(urlA: string, urlB: string): Promise<{ identical: boolean; rows: unknown[] }> {
  for (const [i, url] of [urlA, urlB].entries()) {
    const c = await connect(url);
    await c.query('CREATE DATABASE IF NOT EXISTS example_app');
    await c.query('CREATE TABLE IF NOT EXISTS example_app.notes (id INT PRIMARY KEY, body VARCHAR(200) NOT NULL)');
    await c.end();
    await install({ url, nodeId: i + 1, tables: ['example_app.notes'] });
  }
  const replicator = new Replicator({ nodes: [urlA, urlB] });
  await replicator.start();
  await replicator.whenStreaming();

  const a = await connect(urlA);
  const b = await connect(urlB);
  await a.query("INSERT INTO example_app.notes (id, body) VALUES (1, 'written on A')");
  await b.query("INSERT INTO example_app.notes (id, body) VALUES (2, 'written on B')");
  await until(async () => ((await b.query('SELECT 1 FROM example_app.notes WHERE id = 1'))[0] as unknown[]).length === 1);
  // Both sides edit note 1; the later write wins on both.
  await a.query("UPDATE example_app.notes SET body = 'edited on A' WHERE id = 1");
  await b.query("UPDATE example_app.notes SET body = 'edited on B, later' WHERE id = 1");

  const edited = async () => ((await a.query("SELECT 1 FROM example_app.notes WHERE body = 'edited on B, later'"))[0] as unknown[]).length === 1;
  await until(edited);
  const identical = (await checkState({ nodes: [urlA, urlB], tables: ['example_app.notes'] })).identical;
  const [rows] = await a.query('SELECT id, body FROM example_app.notes ORDER BY id');
  await replicator.stop();
  await a.end();
  await b.end();
  return { identical, rows: rows as unknown[] };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [a, b] = process.argv.slice(2);
  if (!a || !b) {
    console.error('usage: npx tsx examples/replicate-two-urls.ts mysql://…A mysql://…B');
    process.exit(2);
  }
  console.log(JSON.stringify(await main(a, b), null, 2));
}
