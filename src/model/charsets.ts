// Character sets whose text crosses capture exactly. Capture reads a text value's bytes from the
// binlog and decodes them to a JS string (zongji, with iconv-lite's tables); the sink writes that
// string through a utf8mb4 session and the target's server encodes it into the column's charset.
// Where iconv-lite's table and the server's differ, a value arrives as other bytes (big5 0xC6A1
// became 0xC7E9, ujis 0xF9A1 became 0x8FD4E3, tis620 0x80 became 0xFF: silently) or as a character
// the charset lacks (sjis 0x815F '＼' decoded as U+FF3C: refused by the server, the direction
// stopped on ordinary Japanese text). Probed 2026-12-05 on MySQL 9.7 and MariaDB 10.11: every valid
// sequence of every charset (all 1- and 2-byte ones, ujis/eucjpms 3-byte ones, a sample of gb18030's
// 4-byte ones) decoded as capture decodes it and encoded back by the server; the charsets below gave
// every byte back on both engines (latin1 through capture's own byte-for-byte decoding, latin1Text).
// dec8, geostd8, hp8, keybcs2 and swe7 have no decoder and would arrive as raw bytes, a path the
// sink's key comparisons were never checked on; ucs2 and utf32 lone surrogates (stored by MariaDB)
// arrive as U+FFFD.
export const EXACT_CAPTURE_CHARSETS: ReadonlySet<string> = new Set([
  'utf8mb4',
  'utf8mb3',
  'utf8',
  'utf16',
  'utf16le',
  'ascii',
  'binary',
  'latin1',
  'latin2',
  'latin5',
  'latin7',
  'cp1250',
  'cp1251',
  'cp1256',
  'cp1257',
  'cp850',
  'cp852',
  'koi8r',
  'macce',
  'euckr',
  'gbk',
]);

/** Why a column's charset cannot be replicated, or undefined when it can (or the column has none). */
export function unsupportedCharsetColumn(col: { name: string; charset: string | null | undefined }): string | undefined {
  const cs = col.charset?.toLowerCase();
  if (!cs || EXACT_CAPTURE_CHARSETS.has(cs)) return undefined;
  return (
    `its column ${col.name} is in character set ${cs}, whose text capture cannot carry byte for byte (some of its characters would reach the other nodes as other bytes, or stop replication): ` +
    `convert the column to utf8mb4 (ALTER TABLE … MODIFY ${col.name} … CHARACTER SET utf8mb4) on every node, or to one of ${[...EXACT_CAPTURE_CHARSETS].filter((c) => c !== 'utf8').join(', ')}`
  );
}
