// Versions are hybrid logical timestamps: (physical_microseconds << 10) | node_id, unsigned 64-bit.
// They are bigint in code and decimal strings on the wire, never a JS number.

export const NODE_BITS = 10n;
export const MAX_NODE_ID = 1023;
export const MAX_VERSION = (1n << 64n) - 1n;
const NODE_MASK = (1n << NODE_BITS) - 1n;

export class VersionFormatError extends Error {}

/** Parses a version given as bigint or decimal string; throws VersionFormatError when it is not a uint64. */
export function parseVersion(value: unknown): bigint {
  let v: bigint;
  if (typeof value === 'bigint') {
    v = value;
  } else if (typeof value === 'string' && /^[0-9]{1,20}$/.test(value)) {
    v = BigInt(value);
  } else if (typeof value === 'number') {
    // Numbers lose precision above 2^53: accept only exact small integers and say why otherwise.
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new VersionFormatError(`version ${value} is not a JS number holding an exact non-negative integer (up to 2^53 - 1); pass a bigint or decimal string`);
    }
    v = BigInt(value);
  } else if (value === undefined || value === null) {
    throw new VersionFormatError('version is missing; give a bigint or a decimal string of digits');
  } else if (typeof value === 'string') {
    throw new VersionFormatError(`version ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)} is not 1 to 20 decimal digits (no sign, spaces, prefix or exponent); give a bigint or a decimal string of digits`);
  } else {
    throw new VersionFormatError(`version must be a bigint or a decimal string, got ${typeof value}`);
  }
  if (v < 0n || v > MAX_VERSION) {
    throw new VersionFormatError(`version ${v} is outside the unsigned 64-bit range`);
  }
  return v;
}

/** Physical parts at or above this do not fit a version (the shift would wrap). */
export const MAX_PHYSICAL_MICROS = 1n << (64n - NODE_BITS);

export function makeVersion(physicalMicros: bigint, nodeId: number): bigint {
  if (!Number.isInteger(nodeId) || nodeId < 0 || nodeId > MAX_NODE_ID) throw new RangeError(`node id must be an integer in 0..${MAX_NODE_ID}, got ${nodeId}`);
  if (physicalMicros < 0n || physicalMicros >= MAX_PHYSICAL_MICROS) throw new RangeError(`physical time ${physicalMicros} µs does not fit a version (0..2^54-1)`);
  return (physicalMicros << NODE_BITS) | BigInt(nodeId);
}

export function nodeIdOf(version: bigint): number {
  return Number(version & NODE_MASK);
}

export function physicalMicrosOf(version: bigint): bigint {
  return version >> NODE_BITS;
}

/** The version a local write gets when it overwrites `prev`: strictly greater, even under clock skew. */
export function nextVersion(prev: bigint | undefined, nowMicros: bigint, nodeId: number): bigint {
  const floor = prev === undefined ? 0n : physicalMicrosOf(prev) + 1n;
  return makeVersion(nowMicros > floor ? nowMicros : floor, nodeId);
}

export function nowMicros(): bigint {
  return BigInt(Date.now()) * 1000n;
}
