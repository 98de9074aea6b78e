// The --tables flag shared by install and uninstall: comma-separated names, commas inside
// backtick-quoted names kept.
import { InvalidOptionsError } from '../../errors.ts';

export function splitTableList(flag: string): string[] {
  const names: string[] = [];
  let current = '';
  let quoted = false;
  for (const ch of flag) {
    if (ch === '`') quoted = !quoted;
    if (ch === ',' && !quoted) {
      names.push(current.trim());
      current = '';
    } else {
      current += ch;
    }
  }
  names.push(current.trim());
  if (quoted) throw new InvalidOptionsError(`--tables has an unclosed backtick: ${flag}`);
  if (names.some((n) => n === '')) throw new InvalidOptionsError(`--tables has an empty name: "${flag}"`);
  return names;
}
