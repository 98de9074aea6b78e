// Rendering shared by the checker's reports: JSON with versions as strings, and table cells.

/** JSON where bigint versions become decimal strings (never a JS number). */
export function reportToJson(report: unknown, indent = 2): string {
  return JSON.stringify(report, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value), indent);
}

const MAX_CELL = 60;

/** NULL, numbers and JSON documents as they are; any other text quoted (so '' and 'NULL' stay visible). */
export function shown(text: string | null): string {
  if (text === null) return 'NULL';
  if (/^-?\d+(\.\d+)?$/.test(text) || /^[[{]/.test(text)) return text;
  return JSON.stringify(text);
}

/** Text cut to a table cell's width. */
export function clip(text: string, max = MAX_CELL): string {
  return [...text].length <= max ? text : `${[...text].slice(0, max - 1).join('')}…`;
}
