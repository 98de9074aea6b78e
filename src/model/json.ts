// A MySQL JSON document whose scalars JSON text cannot type. MySQL's binary JSON keeps DECIMAL,
// DATE, TIME and DATETIME values (and unsigned integers) as their own types; its text form prints
// them as numbers and strings, which parse back as DOUBLE, STRING or INTEGER. Capture hands such a
// document over as TypedJson; the sink writes the text and sets each typed scalar back with a CAST,
// so JSON_TYPE() answers the same on the peer. MariaDB stores JSON as text: it gets `text` alone.

/** SQL types a JSON scalar can be cast back to (what JSON_TYPE() names, less TIMESTAMP: no CAST makes one). */
export type JsonScalarType = 'decimal' | 'date' | 'time' | 'datetime' | 'unsigned';

export interface TypedJsonScalar {
  /** MySQL JSON path of the scalar: `$`, `$."key"`, `$[2]`... */
  path: string;
  type: JsonScalarType;
  /** The value as MySQL prints it: `1.50`, `2024-01-02`, `-12:34:56.000001`, `2024-01-02 03:04:05.500000`, `7`. */
  value: string;
  /** DECIMAL only: the stored precision and scale (the scale decides how many decimals print). */
  precision?: number;
  scale?: number;
}

export class TypedJson {
  constructor(
    /** The document as a SELECT prints it. */
    readonly text: string,
    /** Scalars whose type the text loses, in document order. */
    readonly scalars: readonly TypedJsonScalar[],
  ) {}

  /** In logs and JSON renderings (the conflict log) the document reads as its text. */
  toJSON(): string {
    return this.text;
  }
}

/** A JSON path step for an object member: always quoted, so any key (spaces, dots, quotes) is one step. */
export function memberStep(key: string): string {
  return `.${JSON.stringify(key)}`;
}
