// Embedding the sink with a custom change source: any code that produces row changes with versions
// can feed them to the sink, which applies them with last-write-wins and records progress.
//   npx tsx examples/custom-source.ts mysql://root@127.0.0.1:3306/
import { createSink, type SourceTransactionInput } from '../src/index.ts';
import { connect } from '../src/db/connection.ts';

export async function main(url: string): Promise<{ rows: unknown[]; position: string | undefined; skippedStale: number }> {
  const admin = await connect(url);
  await admin.query('CREATE DATABASE IF NOT EXISTS example_shop');
  await admin.query('DROP TABLE IF EXISTS example_shop.products');
  await admin.query(
    'CREATE TABLE example_shop.products (sku VARCHAR(20) PRIMARY KEY, name VARCHAR(100) NOT NULL, price DECIMAL(10,2) NOT NULL, _lww_ts BIGINT UNSIGNED NOT NULL)',
  );

  // A source of your own: here, a list. Versions are uint64 as bigint or decimal strings.
  const feed: SourceTransactionInput[] = [
    { sourceId: 'catalog-feed', position: 'offset-1', changes: [{ schema: 'example_shop', table: 'products', op: 'insert', after: { sku: 'A1', name: 'Lamp', price: '19.90' }, version: 2000n }] },
    { sourceId: 'catalog-feed', position: 'offset-2', changes: [{ schema: 'example_shop', table: 'products', op: 'update', after: { sku: 'A1', name: 'Desk lamp', price: '24.90' }, version: 3000n }] },
    // Arrives late with an older version: last-write-wins skips it.
    { sourceId: 'catalog-feed', position: 'offset-3', changes: [{ schema: 'example_shop', table: 'products', op: 'update', after: { sku: 'A1', name: 'Old name', price: '9.90' }, version: '2500' }] },
  ];

  const sink = createSink({ target: url });
  const resumeFrom = (await sink.checkpoint('catalog-feed'))?.position;
  for (const txn of feed) {
    if (resumeFrom !== undefined && txn.position <= resumeFrom) continue;
    await sink.write(txn);
  }
  await sink.flush();
  const position = (await sink.checkpoint('catalog-feed'))?.position;
  const skippedStale = sink.stats().totals.skippedStale;
  await sink.close();
  const [rows] = await admin.query('SELECT sku, name, price, _lww_ts FROM example_shop.products');
  await admin.end();
  return { rows: rows as unknown[], position, skippedStale };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.argv[2];
  if (!url) {
    console.error('usage: npx tsx examples/custom-source.ts mysql://user:pass@host:port/');
    process.exit(2);
  }
  console.log(JSON.stringify(await main(url), null, 2));
}
