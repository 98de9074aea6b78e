// Passwords never reach a log line, an error or a report, whatever form the URL has.
import { describe, expect, it } from 'vitest';
import { parseUrl, redactSecrets, redactUrl } from '../../src/db/url.ts';
import { createLogger } from '../../src/log/logger.ts';

const HOSTILE = ['p/ss', 'p@ss', 'p:ss', 'p%ss', 'a/b@c:d%e', 'p%40ss', '@@::/%'];

describe('URL redaction', () => {
  for (const pw of HOSTILE) {
    it(`masks the raw password ${JSON.stringify(pw)} with and without a scheme`, () => {
      for (const url of [`mysql://app:${pw}@db1:3306/shop`, `mariadb://app:${pw}@db1/`, `app:${pw}@db1:3306/shop`, `mysql://app:${pw}@db1`]) {
        const shown = redactUrl(url);
        expect(shown, url).not.toContain(pw);
        expect(shown).toContain('app:***@db1');
      }
    });

    it(`masks ${JSON.stringify(pw)} inside free text once its URL was parsed`, () => {
      parseUrl(`mysql://app:${pw}@db1:3306/`);
      const text = `cannot connect to mysql://app:${pw}@db1:3306/: Access denied (password ${pw}, encoded ${encodeURIComponent(pw)})`;
      const shown = redactSecrets(text);
      if (pw.length >= 4) expect(shown).not.toContain(pw);
      expect(shown).not.toContain(`:${pw}@`);
      expect(shown).toContain('mysql://app:***@db1:3306/');
    });
  }

  it('parses raw and percent-encoded passwords to the same credentials', () => {
    expect(parseUrl('mysql://app:a/b@c:d@db1:3307/shop')).toMatchObject({ user: 'app', password: 'a/b@c:d', host: 'db1', port: 3307, database: 'shop' });
    expect(parseUrl(`mysql://app:${encodeURIComponent('a/b@c:d%e')}@db1/`)).toMatchObject({ password: 'a/b@c:d%e', port: 3306 });
    expect(parseUrl('mysql://app:100%real@db1/')).toMatchObject({ password: '100%real' });
    expect(parseUrl('mysql://root@[::1]:3310/')).toMatchObject({ user: 'root', password: '', host: '::1', port: 3310 });
  });

  it('masks the password in URL parse errors', () => {
    expect(() => parseUrl('postgres://app:hunter2secret@db1/')).toThrow(/postgres:\/\//);
    try {
      parseUrl('app:hunter2secret@db1:99999/');
    } catch (e) {
      expect((e as Error).message).not.toContain('hunter2secret');
    }
  });

  it('masks passwords in log messages and fields, text and JSON', () => {
    parseUrl('mysql://app:s3cr%t/x@db1/');
    for (const format of ['text', 'json'] as const) {
      const lines: string[] = [];
      const log = createLogger({ format, level: 'debug', write: (l) => lines.push(l) });
      log.error('cannot connect to mysql://app:s3cr%t/x@db1/', { url: 'mysql://app:s3cr%t/x@db1/', nested: { error: new Error('password s3cr%t/x rejected') } });
      expect(lines.join('')).not.toContain('s3cr%t/x');
      expect(lines.join('')).toContain('app:***@db1');
    }
  });
});

describe('the process logger', () => {
  it('writes JSON lines with context in fields, bigints as strings, and honours the level', () => {
    const lines: string[] = [];
    const log = createLogger({ format: 'json', level: 'info', write: (l) => lines.push(l) });
    log.debug('hidden');
    log.child!({ direction: 'n1->n2' }).warn('lagging', { version: 1843000000000001025n, lagMs: 120 });
    expect(lines).toHaveLength(1);
    const entry = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(entry).toMatchObject({ level: 'warn', msg: 'lagging', direction: 'n1->n2', version: '1843000000000001025', lagMs: 120 });
    expect(typeof entry.time).toBe('string');
  });
});
