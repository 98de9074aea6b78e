// One text per composite key, for grouping keys in JS (coalescing, matching a delete with its
// tombstone, merging two nodes' rows). Each part is prefixed with its length: a plain separator
// let two different keys read alike when a value held the separator ('a\u0001sb' + 'c' and
// 'a' + 'b\u0001sc'), and a batch then kept one row of the two.

/** The parts' texts joined so that different part lists never give the same text. */
export function compositeKeyText(parts: readonly string[]): string {
  let out = '';
  for (const p of parts) out += `${p.length}:${p}`;
  return out;
}
