// Named errors: each carries what an operator or caller needs to act on it.

export class LwwError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A source transaction or change that cannot be applied as given; nothing of it was written. */
export class InvalidChangeError extends LwwError {
  constructor(
    message: string,
    readonly changeIndex?: number,
    readonly field?: string,
  ) {
    super(message);
  }
}

/** A sink/replicator option that fails validation. */
export class InvalidOptionsError extends LwwError {}

export class UnknownTableError extends LwwError {
  constructor(
    readonly schema: string,
    readonly table: string,
  ) {
    super(`table ${schema}.${table} does not exist on the target`);
  }
}

export class UnknownColumnError extends LwwError {
  constructor(
    readonly schema: string,
    readonly table: string,
    readonly column: string,
    context = '',
  ) {
    super(`column ${column} does not exist in ${schema}.${table}${context ? ` (${context})` : ''}`);
  }
}

/** A table the sink cannot replicate safely (no primary key, no version column...). */
export class UnsupportedTableError extends LwwError {
  constructor(
    readonly schema: string,
    readonly table: string,
    reason: string,
  ) {
    super(`table ${schema}.${table} cannot be replicated: ${reason}`);
  }
}

/** A source server setting that would silently lose changes; names the setting to change. */
export class UnsafeSourceSettingError extends LwwError {
  constructor(
    readonly setting: string,
    readonly actual: string,
    readonly required: string,
  ) {
    super(`unsafe source setting: ${setting} is ${actual}, must be ${required}`);
  }
}

/** Another writer took over this (source → target) direction; this one must stop. */
export class OwnershipLostError extends LwwError {
  constructor(
    readonly sourceId: string,
    readonly ownEpoch: bigint,
    readonly currentEpoch: bigint,
  ) {
    super(
      `sink for source ${sourceId} lost ownership: its epoch is ${ownEpoch}, the checkpoint is owned by epoch ${currentEpoch}; stopping instead of writing`,
    );
  }
}

/** A statement failed for a reason retrying cannot fix; values are redacted from the message. */
export class ApplyError extends LwwError {
  constructor(
    message: string,
    readonly table: string | undefined,
    readonly serverCode: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class SinkClosedError extends LwwError {
  constructor() {
    super('sink is closed');
  }
}

/** A binlog position that is malformed or no longer (or not yet) on the source server. */
export class BinlogPositionError extends LwwError {
  constructor(
    readonly position: string,
    reason: string,
  ) {
    super(`binlog position ${JSON.stringify(position)}: ${reason}`);
  }
}

/** The source server has settings that would lose changes; `problems` says what to change, one per setting. */
export class UnsafeSourceError extends LwwError {
  constructor(
    readonly source: string,
    readonly problems: UnsafeSourceSettingError[],
  ) {
    super(`capture refuses to read ${source}: ${problems.map((p) => p.message).join('; ')}`);
  }
}

/**
 * A captured DELETE without the tombstone its trigger writes in the same transaction: the lww
 * triggers are missing, or the row went two or more levels down an ON DELETE CASCADE chain (cascaded
 * deletes fire no triggers; a parent's trigger tombstones its own children only). MySQL 9.6+ logs
 * such deletes; MariaDB does not.
 */
export class MissingTombstoneError extends LwwError {
  constructor(
    readonly schema: string,
    readonly table: string,
    readonly tombstoneTable: string,
    readonly position: string,
  ) {
    super(
      `a DELETE on ${schema}.${table} (transaction ending at ${position}) wrote no tombstone into ${tombstoneTable}: ` +
        `its version is unknown. Either the lww triggers are missing on ${schema}.${table} (run install for this table), ` +
        'or the row was deleted two or more levels down a chain of ON DELETE CASCADE foreign keys, which the triggers cover one level deep ' +
        '(delete such rows level by level, children first, or make the lower foreign keys RESTRICT), ' +
        'or (MariaDB) the table was given an application-time period after install and a DELETE or UPDATE … FOR PORTION OF wrote a part of the row ' +
        'under its key before the tombstone (such tables cannot be replicated: drop the period on every node, run lww-sink sync for the table, ' +
        'resume after that transaction).',
    );
  }
}

/**
 * Rows of one table clash on secondary UNIQUE values in a way last-write-wins cannot order the same
 * on every node (the incoming row is newer than some holders and older than others, or a holder
 * cannot be found by its values): applying either way could leave the nodes different, so the
 * direction stops. Permanent: the same change meets the same rows again.
 */
export class UniqueClashError extends LwwError {
  readonly permanent = true;
  constructor(
    readonly schema: string,
    readonly table: string,
    detail: string,
  ) {
    super(
      `${schema}.${table}: a replicated row clashes on a secondary UNIQUE key and last-write-wins cannot resolve it the same way on every node: ${detail}. ` +
        'Resolve the rows by hand on every node (keep one row per UNIQUE value), then restart the replicator.',
    );
  }
}

/** The binlog holds something capture cannot turn into changes without loss; it stops instead of skipping it. */
export class CaptureError extends LwwError {
  constructor(
    message: string,
    readonly position?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Capture met a change it cannot turn into exactly what the source did (a statement-logged DML, an
 * unrepairable row image, a TRUNCATE, a value the target cannot take...). Permanent: reading the
 * same binlog again meets it again, so a supervisor must stop the direction, not restart it.
 * Carries the cause, the table, the position and what the operator should do.
 */
export class CaptureRefusedError extends CaptureError {
  /** Restarting from the checkpoint reads the same event again: never retry this. */
  readonly permanent = true;
  constructor(
    readonly reason: string,
    readonly table: string | undefined,
    position: string | undefined,
    readonly remedy: string,
    options?: { cause?: unknown },
  ) {
    super(`capture stopped${table ? ` on ${table}` : ''} at ${position ?? 'an unknown position'}: ${reason}. What to do: ${remedy}`, position, options);
  }
}

/** This server already stamps its writes with another node id; changing it needs an uninstall first. */
export class NodeIdConflictError extends LwwError {
  constructor(
    readonly recordedNodeId: number,
    readonly requestedNodeId: number,
  ) {
    super(`node id ${recordedNodeId} is already recorded on this server; uninstall first (install was asked for node id ${requestedNodeId})`);
  }
}

/** install found several tables it cannot take; `problems` holds one error per table. Nothing was changed. */
export class InstallRefusedError extends LwwError {
  constructor(readonly problems: Error[]) {
    super(`install changed nothing: ${problems.length} tables cannot be installed:\n${problems.map((p) => `  - ${p.message}`).join('\n')}`);
  }
}

/**
 * install failed part-way on a server (a statement refused: a missing privilege, a failing ALTER)
 * and took back what the run had changed: none of its tables is left registered.
 */
export class InstallUndoneError extends LwwError {
  constructor(
    readonly table: string,
    detail: string,
    /** The error that stopped install (kept out of `cause`, so this message is what gets printed). */
    readonly error: unknown,
    /** What could not be taken back (each undo step that failed), empty when all was undone. */
    readonly leftovers: string[],
  ) {
    super(
      `install stopped at ${table}: ${detail}. ` +
        (leftovers.length === 0
          ? 'Everything this run had changed was undone: none of its tables is registered; fix the cause and run install again'
          : `Undoing the run was incomplete (${leftovers.join('; ')}): run uninstall for these tables, then install again`),
    );
  }
}

/**
 * A direction's progress watchdog found work pending and nothing moving (no binlog read, no apply
 * statement completed, no checkpoint) for longer than its timeout. The message is the diagnosis:
 * direction, state, read and applied positions, the source's binlog head, what it waited on.
 * The first stall restarts the direction; `repeated` (no commit since the previous stall) ends it.
 */
export class DirectionStalledError extends LwwError {
  constructor(
    readonly direction: string,
    message: string,
    readonly repeated: boolean,
    readonly report: unknown,
  ) {
    super(repeated ? `${message} (stalled again at the same checkpoint after a restart: restarting does not help)` : message);
  }
}

/** A replication direction stopped on an error restarting cannot fix; `kind` names the cause (classify.ts). */
export class DirectionFailedError extends LwwError {
  constructor(
    readonly direction: string,
    readonly kind: string,
    detail: string,
    /** The error that stopped it (kept out of `cause`, so the message above is what gets printed). */
    readonly error: unknown,
  ) {
    super(`replication ${direction} stopped (${kind}): ${detail}`);
  }
}

/**
 * A merge or stream would have to decide a key below a node's tombstone GC horizon: the node may
 * have removed the tombstone that refuses the older version, so applying it could bring a deleted
 * row back. The source node's data (or pending changes) is older than what the target collected:
 * re-seed the source from a peer (README "Tombstone GC").
 */
export class HorizonCrossedError extends LwwError {
  readonly code = 'LWW_HORIZON_CROSSED';
  /** Restarting meets it again: a direction fails instead of looping (replicator/classify.ts). */
  readonly permanent = true;
  constructor(
    message: string,
    readonly source: string,
    readonly target: string,
    readonly table?: string,
  ) {
    super(message);
  }
}

/**
 * A checkpoint's position belongs to another server or to a binlog history that was reset
 * (RESET BINARY LOGS AND GTIDS / RESET MASTER): reading from its offset would replay or skip
 * unrelated changes. Permanent: the operator re-seeds the target and resets the checkpoint.
 */
export class SourceIdentityError extends LwwError {
  readonly code = 'LWW_SOURCE_IDENTITY';
  /** Restarting meets it again: a direction fails instead of looping (replicator/classify.ts). */
  readonly permanent = true;
  constructor(
    message: string,
    readonly sourceId: string,
    readonly storedUuid: string | undefined,
    readonly currentUuid: string,
  ) {
    super(message);
  }
}
